"""The ``alkstore`` command (SPEC §13)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``alkstore`` command."""
    print("alkstore: the command line is not built yet", file=sys.stderr)
    return 2
