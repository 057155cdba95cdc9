"""Known failures of the in-repo engines: suite tests that fail until a
fix lands elsewhere, applied as strict xfails (so a fix is noticed)."""

from __future__ import annotations

__all__ = ["KNOWN_FAILURES"]

#: Test name -> the reason it is expected to fail; each becomes a strict xfail.
KNOWN_FAILURES: dict[str, str] = {}
