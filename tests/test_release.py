"""The release (SPEC §18): publishable files, installable by anyone.

The files are built here without build isolation (the backend comes from the
development environment, so the tests need no network); `dev.py dist` in CI
builds them isolated, checks them the same way, runs `twine check` and
installs them into a fresh environment (P-2).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["alkstore", "alkstore-sqlite", "alkstore-postgres", "alkstore-conformance"]


def build(package_dir: Path, outdir: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--outdir",
            str(outdir),
            str(package_dir),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel and an sdist of each distribution, built from this checkout."""
    outdir = tmp_path_factory.mktemp("dist")
    for package in PACKAGES:
        build(ROOT / "packages" / package, outdir)
    return outdir


def _copy(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "dist"
    shutil.copytree(built, copy)
    return copy


def _rewrite_wheel(path: Path, member_pattern: str, edit: object) -> None:
    """Rewrite the members of the wheel *path* whose names match *member_pattern*
    with ``edit(text) -> text | None`` (``None`` drops the member)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            if re.fullmatch(member_pattern, name):
                text = edit(data.decode())  # type: ignore[operator]
                if text is None:
                    continue
                data = text.encode()
            zf.writestr(name, data)


@pytest.mark.clause("P-1", "P-3")
def test_built_files_are_publishable(dev: ModuleType, built: Path) -> None:
    files = dev.built_files(built)
    assert len(files) == 8  # a wheel and an sdist of each of the four
    assert dev.check_dist(files) == []


@pytest.mark.clause("P-1")
def test_a_direct_reference_in_an_extra_is_refused(
    dev: ModuleType, built: Path, tmp_path: Path
) -> None:
    # The bug this release build exists for: an extra naming a sibling
    # directory builds fine and installs nowhere else.
    package = tmp_path / "alkstore"
    shutil.copytree(ROOT / "packages" / "alkstore", package)
    pyproject = package / "pyproject.toml"
    text = pyproject.read_text()
    text = re.sub(
        r'sqlite = \["alkstore-sqlite[^"]*"\]',
        f'sqlite = ["alkstore-sqlite @ {(ROOT / "packages" / "alkstore-sqlite").as_uri()}"]',
        text,
    )
    text += "\n[tool.hatch.metadata]\nallow-direct-references = true\n"
    pyproject.write_text(text)
    dist = _copy(built, tmp_path)
    for old in dist.glob("alkstore-0*"):
        old.unlink()
    build(package, dist)
    problems = dev.check_dist(dev.built_files(dist))
    assert any("direct reference in Requires-Dist" in p for p in problems), problems
    assert any(p.startswith("alkstore-") and ".tar.gz" in p for p in problems), problems


@pytest.mark.clause("P-1")
def test_a_wheel_without_its_licence_is_refused(
    dev: ModuleType, built: Path, tmp_path: Path
) -> None:
    dist = _copy(built, tmp_path)
    (wheel,) = dist.glob("alkstore_sqlite-*.whl")
    _rewrite_wheel(wheel, r".*/licenses/LICENSE", lambda text: None)
    problems = dev.check_dist(dev.built_files(dist))
    assert problems == [f"{wheel.name}: no MIT LICENSE file inside"]


@pytest.mark.clause("P-3")
def test_pins_that_break_the_versioning_policy_are_refused(
    dev: ModuleType, built: Path, tmp_path: Path
) -> None:
    dist = _copy(built, tmp_path)
    (wheel,) = dist.glob("alkstore_postgres-*.whl")
    _rewrite_wheel(
        wheel,
        r".*\.dist-info/METADATA",
        lambda text: re.sub(r"Requires-Dist: alkstore[^\n]*", "Requires-Dist: alkstore>=0.1", text),
    )
    (suite,) = dist.glob("alkstore_conformance-*.whl")
    _rewrite_wheel(
        suite,
        r".*\.dist-info/METADATA",
        lambda text: text.replace("Requires-Dist: alkstore==", "Requires-Dist: alkstore>="),
    )
    problems = dev.check_dist(dev.built_files(dist))
    assert any(p.startswith("alkstore-postgres: requirements") for p in problems), problems
    assert any(p.startswith("alkstore-conformance: requirements") for p in problems), problems


@pytest.mark.clause("P-1")
def test_every_distribution_carries_the_licence() -> None:
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "alkstore maintainers" in licence
    for package in PACKAGES:
        assert (ROOT / "packages" / package / "LICENSE").read_text() == licence, package


@pytest.mark.clause("P-3")
def test_the_versioning_policy_is_written_down(dev: ModuleType, built: Path) -> None:
    version = dev.built_files(built)[0].name.split("-")[1]
    series = ".".join(version.split(".")[:2])
    major, minor = (int(p) for p in series.split("."))
    engine_range = f"alkstore>={series},<{major}.{minor + 1}"
    releasing = (ROOT / "docs" / "releasing.md").read_text()
    guide = (ROOT / "docs" / "implementing-an-engine.md").read_text()
    for text in (releasing, guide):
        assert engine_range in text
        assert "lockstep" in text
    assert f"alkstore-conformance=={series}.*" in guide or "alkstore-conformance==" in guide


@pytest.mark.clause("P-2", "P-4")
def test_the_readme_says_what_ci_proves() -> None:
    """The README's install line and commands are those `.ci/run` runs, on
    files installed from the built wheels (P-2)."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    commands = [c for c in commands if c]
    assert 'pip install "alkstore[sqlite]"' in commands
    assert "python3 scripts/dev.py demo" in commands and "python3 scripts/dev.py test" in commands
    # pip_install: pip from the copied files and the index, with no cache.
    helper = re.search(r"pip_install\(\) \{\n(.*?)\n\}", ci, re.S)
    assert helper is not None
    for flag in ("-m pip install", "--no-cache-dir", '--find-links "$work/files"'):
        assert flag in helper[1], flag
    for extra in ("sqlite", "postgres"):
        assert f'pip_install "alkstore[{extra}]"' in ci
    for command in commands:
        if command.startswith("python3 scripts/dev.py"):
            assert command in ci, command
        elif command.startswith("alkstore "):
            assert f'"$venv/bin/alkstore" {command.partition(" ")[2]}' in ci, command
    assert '"$venv/bin/python" -m alkstore_conformance' in ci
    assert "dev.py dist" in ci
