"""The generated sync face (docs/adr/0017): ``dev.py generate --check`` passes
on the repository as committed, and fails after a hand edit of a generated
file or when a generated file's source is gone.

Runs on a copy of the sources, so the checkout is never edited.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED_MARK = "# Generated from "


def _copy(dest: Path) -> Path:
    """The generator, the ruff configuration and every package's Python files."""
    (dest / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "async_to_sync.py", dest / "scripts")
    shutil.copy2(ROOT / "pyproject.toml", dest)
    for path in (ROOT / "packages").rglob("*.py"):
        rel = path.relative_to(ROOT)
        if any(part.startswith(".") or part == "build" for part in rel.parts):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / rel)
    return dest


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "async_to_sync.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=root,
    )


def _generated(root: Path) -> list[Path]:
    found = []
    for path in sorted((root / "packages").rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            if f.readline().startswith(GENERATED_MARK):
                found.append(path)
    return found


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy(tmp_path_factory.mktemp("generate") / "repo")


def test_generated_files_match_their_sources(pristine: Path) -> None:
    done = _check(pristine)
    assert done.returncode == 0, done.stderr
    assert "generated file(s) match their sources" in done.stdout
    assert len(_generated(pristine)) >= 10  # kit, worker and PostgreSQL faces


def test_a_hand_edit_of_a_generated_file_fails_the_check(tmp_path: Path) -> None:
    root = _copy(tmp_path / "repo")
    target = next(p for p in _generated(root) if p.name == "queue.py")
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("def claim_sync(", "def claim_sync(  ", 1), encoding="utf-8")
    done = _check(root)
    assert done.returncode == 1
    assert "queue.py differs from what queue_async.py makes" in done.stderr


def test_a_generated_file_without_its_source_fails_the_check(tmp_path: Path) -> None:
    root = _copy(tmp_path / "repo")
    target = next(p for p in _generated(root) if p.name == "stream.py")
    (target.parent / "stream_async.py").unlink()
    done = _check(root)
    assert done.returncode == 1
    assert "says it is generated, but no source makes it" in done.stderr
