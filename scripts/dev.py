#!/usr/bin/env python3
"""Set up the development environment and run a task in it.

    python3 scripts/dev.py demo          run the demo on the embedded SQLite default
    python3 scripts/dev.py test [ARGS]   run the whole test suite (ARGS go to pytest)
    python3 scripts/dev.py lint          ruff check, ruff format --check, mypy --strict
    python3 scripts/dev.py setup         only create or refresh the environment

Needs nothing but Python 3.10+ and access to PyPI. The environment is
`.venv` at the repository root: the four packages installed editable plus the
`dev` dependency group of the root pyproject.toml. It is refreshed when a
pyproject.toml changes. Standard library only, on purpose.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PACKAGES = ["alkstore", "alkstore-sqlite", "alkstore-postgres", "alkstore-conformance"]
STAMP = VENV / ".alkstore-installed"
# pip learned `--group` (PEP 735 dependency groups) in 25.1.
PIP_SPEC = "pip>=25.1"


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


def ensure_env() -> Path:
    python = venv_python()
    wanted = fingerprint()
    if python.exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return python
    if not python.exists():
        print(f"creating {VENV.relative_to(ROOT)} with Python {sys.version.split()[0]}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    run(python, "-m", "pip", "install", "--quiet", "--upgrade", PIP_SPEC)
    editable: list[str] = []
    for package in PACKAGES:
        editable += ["-e", f"packages/{package}"]
    run(python, "-m", "pip", "install", "--quiet", *editable, "--group", "dev")
    STAMP.write_text(wanted)
    return python


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - say so plainly on an old Python
        print("alkstore needs Python 3.10 or newer", file=sys.stderr)
        return 2
    task, args = (argv[0], argv[1:]) if argv else ("help", [])
    if task in {"help", "-h", "--help"}:
        print(__doc__)
        return 0
    python = ensure_env()
    if task == "setup":
        return 0
    if task == "demo":
        return subprocess.call([str(python), "-m", "alkstore", "demo", *args], cwd=ROOT)
    if task == "test":
        return subprocess.call([str(python), "-m", "pytest", *args], cwd=ROOT)
    if task == "lint":
        status = 0
        for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
            status |= subprocess.call([str(python), "-m", *cmd], cwd=ROOT)
        status |= subprocess.call([str(python), str(ROOT / "scripts" / "typecheck.py")], cwd=ROOT)
        return status
    print(f"unknown task {task!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
