#!/usr/bin/env python3
"""Set up the development environment and run a task in it.

    python3 scripts/dev.py demo [ARGS]   run the demo on a temporary SQLite store
    python3 scripts/dev.py test [ARGS]   run the whole test suite (ARGS go to pytest)
    python3 scripts/dev.py lint          ruff check, ruff format --check, mypy --strict
    python3 scripts/dev.py generate [--check]
                                         make the sync face from the async source
                                         (--check: fail when a generated file differs)
    python3 scripts/dev.py dist          build the release files into dist/ and check them
    python3 scripts/dev.py check-dist [FILE...]
                                         check built files (default: dist/*) without building
    python3 scripts/dev.py setup         only create or refresh the environment

Needs nothing but Python 3.10+ and access to PyPI. The environment is
`.venv` at the repository root: the four packages installed editable, plus,
for every task but `demo`, the `dev` dependency group of the root
pyproject.toml (test runner, linters, release tools). It is refreshed when a
pyproject.toml changes. Standard library only, on purpose.

`dist` writes a wheel and an sdist of each distribution into dist/, then
refuses them (exit 1) unless their metadata is publishable: no direct
references (`name @ file://...`), the extras and the contract requirements
pinned as docs/releasing.md says, a LICENSE in every file, project URLs, a
README, and `twine check --strict` clean.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterable
from email.message import Message
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
DIST = ROOT / "dist"
PACKAGES = ["alkstore", "alkstore-sqlite", "alkstore-postgres", "alkstore-conformance"]
ENGINES = {"sqlite": "alkstore-sqlite", "postgres": "alkstore-postgres"}
STAMP = VENV / ".alkstore-installed"
# pip learned `--group` (PEP 735 dependency groups) in 25.1.
PIP_SPEC = "pip>=25.1"
# Files every wheel must carry besides its code (relative to the package dir).
WHEEL_EXTRAS = {"alkstore-conformance": ["alkstore_conformance/CONTRACT.md"]}


def venv_python() -> Path:
    if os.name == "nt":
        return VENV / "Scripts" / "python.exe"
    return VENV / "bin" / "python"


def fingerprint() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for path in [
        ROOT / "pyproject.toml",
        *(ROOT / "packages" / p / "pyproject.toml" for p in PACKAGES),
    ]:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run(*cmd: str | Path, **kwargs: object) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=ROOT, **kwargs)  # type: ignore[call-overload]


def ensure_env(with_dev: bool) -> Path:
    """The environment's Python, with the packages (and the dev group when
    *with_dev*) installed and current."""
    python = venv_python()
    wanted = fingerprint()
    installed = STAMP.read_text().split() if python.exists() and STAMP.exists() else []
    if installed[:1] == [wanted] and (not with_dev or "dev" in installed):
        return python
    if not python.exists():
        print(f"creating {VENV.relative_to(ROOT)} with Python {sys.version.split()[0]}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    run(python, "-m", "pip", "install", "--quiet", "--upgrade", PIP_SPEC)
    editable: list[str] = []
    for package in PACKAGES:
        editable += ["-e", f"packages/{package}"]
    group = ["--group", "dev"] if with_dev else []
    run(python, "-m", "pip", "install", "--quiet", *editable, *group)
    STAMP.write_text(f"{wanted} {'dev' if with_dev else 'run'}\n")
    return python


# ------------------------------------------------------------------ release


def built_files(directory: Path) -> list[Path]:
    """The wheels and sdists of our distributions in *directory*."""
    prefixes = tuple(p.replace("-", "_") + "-" for p in PACKAGES)
    return sorted(
        f
        for f in directory.iterdir()
        if f.name.startswith(prefixes) and (f.suffix == ".whl" or f.name.endswith(".tar.gz"))
    )


def _read_archive(path: Path) -> dict[str, bytes]:
    """Every member of a wheel or sdist, by name."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}
    members: dict[str, bytes] = {}
    with tarfile.open(path, "r:gz") as tf:
        for member in tf.getmembers():
            handle = tf.extractfile(member) if member.isfile() else None
            if handle is not None:
                members[member.name] = handle.read()
    return members


def _metadata(path: Path, files: dict[str, bytes]) -> tuple[str, Message]:
    """The name of the metadata file of *path* and its parsed contents."""
    if path.suffix == ".whl":
        names = [n for n in files if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    else:
        names = [n for n in files if re.fullmatch(r"[^/]+/PKG-INFO", n)]
    if len(names) != 1:
        raise ValueError(f"{path.name}: expected one metadata file, found {names}")
    return names[0], Parser().parsestr(files[names[0]].decode("utf-8"))


_DIRECT_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*@")
_SPECIFIER = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(?P<spec>[^;]*)")


def _requirement(line: str) -> tuple[str, str, str]:
    """``name``, version specifier and marker of a ``Requires-Dist`` value."""
    head, _, marker = line.partition(";")
    match = _SPECIFIER.match(head.strip())
    if match is None:
        return head.strip(), "", marker.strip()
    parts = match["spec"].strip().strip("()").replace(" ", "").split(",")
    spec = ",".join(sorted(p for p in parts if p))
    return match["name"].lower().replace("_", "-"), spec, marker.strip().replace("'", '"')


def _next_minor(version: str) -> str:
    major, minor = (int(p) for p in version.split(".")[:2])
    return f"{major}.{minor + 1}"


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def check_dist(paths: Iterable[Path]) -> list[str]:
    """What keeps these built files from being published; empty when nothing.

    Checked in each wheel and sdist: no direct reference in any requirement
    (and no ``file:`` anywhere in the metadata or the sdist's pyproject.toml);
    a LICENSE file, named in the metadata; a README as the long description;
    project URLs; and across the set, the versioning policy of
    docs/releasing.md: one version for all four distributions, the suite
    requiring ``alkstore==`` that version, the engines ``alkstore>=X.Y,<X.Y+1``
    and the ``[sqlite]``/``[postgres]`` extras ``>=`` the engine built with
    them, ``<`` its next minor version.
    """
    problems: list[str] = []
    versions: dict[str, set[str]] = {}
    requires: dict[str, list[str]] = {}
    paths = list(paths)
    if not paths:
        return ["no built files to check"]
    for path in paths:

        def say(text: str, path: Path = path) -> None:
            problems.append(f"{path.name}: {text}")

        try:
            files = _read_archive(path)
            meta_name, meta = _metadata(path, files)
        except (OSError, ValueError, zipfile.BadZipFile, tarfile.TarError) as exc:
            problems.append(f"{path.name}: unreadable: {exc}")
            continue
        name = str(meta.get("Name", "")).lower()
        if name not in PACKAGES:
            say(f"unexpected distribution name {name!r}")
            continue
        versions.setdefault(name, set()).add(str(meta.get("Version", "")))
        reqs = [str(r) for r in meta.get_all("Requires-Dist") or []]
        requires.setdefault(name, reqs)
        for req in reqs:
            if _DIRECT_REFERENCE.match(req.strip()):
                say(f"direct reference in Requires-Dist: {req!r}")
        text = files[meta_name].decode("utf-8", "replace")
        if "file:" in text:
            say(f"{meta_name} mentions a file: URL")
        pyproject = next((n for n in files if re.fullmatch(r"[^/]+/pyproject\.toml", n)), None)
        if pyproject is not None:
            source = files[pyproject].decode("utf-8", "replace")
            if re.search(r"@\s*(file:|\{root)", source) or "allow-direct-references" in source:
                say(f"{pyproject} declares a direct reference")
        if meta.get("License-Expression") != "MIT":
            say(f"License-Expression is {meta.get('License-Expression')!r}, not 'MIT'")
        if "LICENSE" not in (meta.get_all("License-File") or []):
            say("the metadata names no License-File LICENSE")
        licence = (
            [n for n in files if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", n)]
            if path.suffix == ".whl"
            else [n for n in files if re.fullmatch(r"[^/]+/LICENSE", n)]
        )
        if not licence or b"MIT License" not in files[licence[0]]:
            say("no MIT LICENSE file inside")
        if not meta.get_all("Project-URL"):
            say("no Project-URL")
        description = str(meta.get_payload() or "")
        if meta.get("Description-Content-Type") != "text/markdown" or len(description) < 200:
            say("no README as the long description")
        if path.suffix == ".whl":
            package = name.replace("-", "_")
            for extra in [f"{package}/py.typed", *WHEEL_EXTRAS.get(name, [])]:
                if extra not in files:
                    say(f"{extra} is missing")
            init = files.get(f"{package}/_version.py") or files.get(f"{package}/__init__.py", b"")
            declared = re.search(r'^__version__ = "([^"]+)"', init.decode("utf-8", "replace"), re.M)
            if declared is not None and declared[1] != meta.get("Version"):
                say(f"{package}.__version__ is {declared[1]!r}, not {meta.get('Version')!r}")
    for name, found in versions.items():
        if len(found) != 1:
            problems.append(f"{name}: the wheel and the sdist disagree on the version: {found}")
    missing = sorted(set(PACKAGES) - set(versions))
    if missing:
        problems.append(f"missing distributions: {', '.join(missing)}")
        return problems
    version = {name: next(iter(v)) for name, v in versions.items()}
    if len(set(version.values())) != 1:
        problems.append(f"the four distributions must share one version, found {version}")
    contract = version["alkstore"]
    series = f"<{_next_minor(contract)},>={_series(contract)}"  # sorted, as _requirement
    wanted = {
        "alkstore-conformance": {("alkstore", f"=={contract}", "")},
        "alkstore-sqlite": {("alkstore", series, "")},
        "alkstore-postgres": {("alkstore", series, "")},
        "alkstore": {
            (dist, f"<{_next_minor(version[dist])},>={version[dist]}", f'extra == "{extra}"')
            for extra, dist in ENGINES.items()
        },
    }
    for name, expected in wanted.items():
        got = {_requirement(r) for r in requires[name]}
        ours = {r for r in got if r[0] in PACKAGES}
        if ours != expected:
            problems.append(
                f"{name}: requirements on alkstore distributions are "
                f"{sorted(ours)}, the versioning policy wants {sorted(expected)}"
            )
    return problems


def dist(python: Path) -> int:
    """Build every distribution into dist/ and check the files."""
    DIST.mkdir(exist_ok=True)
    for old in built_files(DIST):
        old.unlink()
    for package in PACKAGES:
        # Each sdist is built first and the wheel from it, so a file missing
        # from the sdist breaks the build here, not on a user's machine.
        run(python, "-m", "build", "--outdir", DIST, ROOT / "packages" / package)
    return check(python, built_files(DIST))


def check(python: Path, files: list[Path]) -> int:
    problems = check_dist(files)
    for problem in problems:
        print(f"dist: {problem}", file=sys.stderr)
    if problems:
        print(f"dist: {len(problems)} problem(s): do not publish these files", file=sys.stderr)
        return 1
    status = subprocess.call([str(python), "-m", "twine", "check", "--strict", *map(str, files)])
    if status != 0:
        print("dist: twine check failed; these files must not be published", file=sys.stderr)
        return 1
    for path in files:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        print(f"{digest}  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"dist: {len(files)} files checked, ready to publish")
    return 0


# -------------------------------------------------------------------- tasks


#: Test processes for `dev.py test`: the suite mostly waits (short real
#: timeouts, child processes, a database server), so more workers than cores
#: pay off. `-n 0` (or any -n/-p of your own) overrides it. docs/adr/0016.
TEST_WORKERS = "4"


def test_args(args: list[str]) -> list[str]:
    """pytest arguments of `dev.py test`: in parallel unless told otherwise."""
    if any(a == "-n" or a.startswith(("-n", "--numprocesses", "-pno:xdist")) for a in args):
        return args
    if "-p" in args and "no:xdist" in args:
        return args
    return ["-n", TEST_WORKERS, *args]


#: pytest's exit status when no test was selected.
NO_TESTS = 5


def run_tests(python: Path, args: list[str]) -> int:
    """`dev.py test`: the suite in parallel, then the tests marked ``alone``
    (they time the event loop's pauses, which other tests' CPU load would
    stretch) in one process. With a -n/-p or -m of your own: one run, as told."""
    pytest = [str(python), "-m", "pytest"]
    if test_args(args) == args or "-m" in args:
        return subprocess.call([*pytest, *test_args(args)], cwd=ROOT)
    codes = [
        subprocess.call([*pytest, *test_args(["-m", "not alone", *args])], cwd=ROOT),
        subprocess.call([*pytest, "-p", "no:xdist", "-m", "alone", *args], cwd=ROOT),
    ]
    failed = [code for code in codes if code not in (0, NO_TESTS)]
    if failed:
        return failed[0]
    return NO_TESTS if all(code == NO_TESTS for code in codes) else 0


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - say so plainly on an old Python
        print("alkstore needs Python 3.10 or newer", file=sys.stderr)
        return 2
    task, args = (argv[0], argv[1:]) if argv else ("help", [])
    if task in {"help", "-h", "--help"}:
        print(__doc__)
        return 0
    tasks = {"setup", "demo", "test", "lint", "generate", "dist", "check-dist"}
    if task not in tasks:  # before anything is built or installed
        print(f"unknown task {task!r}\n{__doc__}", file=sys.stderr)
        return 2
    if task in {"setup", "lint", "dist"} and args:
        print(f"the {task} task takes no arguments, got {' '.join(args)}", file=sys.stderr)
        return 2
    # The demo needs the packages, not the test runner and the linters.
    python = ensure_env(with_dev=task != "demo")
    if task == "setup":
        return 0
    if task == "demo":
        return subprocess.call([str(python), "-m", "alkstore", "demo", *args], cwd=ROOT)
    if task == "test":
        return run_tests(python, args)
    if task == "dist":
        return dist(python)
    if task == "generate":
        script = ROOT / "scripts" / "async_to_sync.py"
        return subprocess.call([str(python), str(script), *args], cwd=ROOT)
    if task == "check-dist":
        files = [Path(a).resolve() for a in args] if args else built_files(DIST)
        return check(python, files)
    status = subprocess.call([str(python), str(ROOT / "scripts" / "async_to_sync.py"), "--check"])
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        status |= subprocess.call([str(python), "-m", *cmd], cwd=ROOT)
    status |= subprocess.call([str(python), str(ROOT / "scripts" / "typecheck.py")], cwd=ROOT)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
