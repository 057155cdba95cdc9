"""The base of the API's enums whose members are strings."""

from __future__ import annotations

from enum import Enum

__all__ = ["StrEnum"]


class StrEnum(str, Enum):
    """An enum whose members are their string values: equal to them, and
    shown as them by ``str()`` and in f-strings (as ``enum.StrEnum`` from
    Python 3.11, which this package does not require)."""

    def __str__(self) -> str:
        return str(self.value)
