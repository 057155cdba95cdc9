#!/usr/bin/env python3
"""mypy --strict over every package (sources and tests) and the contract tests.

Each target is checked in its own run: several packages have a `tests`
directory, and one mypy run would see their modules as duplicates.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = [
    ["packages/alkstore/src", "packages/alkstore/tests"],
    ["packages/alkstore-sqlite/src", "packages/alkstore-sqlite/tests"],
    ["packages/alkstore-postgres/src", "packages/alkstore-postgres/tests"],
    ["packages/alkstore-conformance/src", "packages/alkstore-conformance/tests"],
    ["contract_tests", "bench", "scripts"],
    ["tests"],  # the repository's own tests (release, rule coverage)
]


def _has_sources(path: Path) -> bool:
    """Python files outside hidden directories (a benchmark's .venv)."""
    return any(
        not any(part.startswith(".") for part in f.relative_to(path).parts)
        for f in path.rglob("*.py")
    )


def main() -> int:
    status = 0
    for target in TARGETS:
        paths = [p for p in target if _has_sources(ROOT / p)]
        if not paths:
            continue
        print("mypy --strict", " ".join(paths), flush=True)
        status |= subprocess.call([sys.executable, "-m", "mypy", "--strict", *paths], cwd=ROOT)
    return status


if __name__ == "__main__":
    sys.exit(main())
