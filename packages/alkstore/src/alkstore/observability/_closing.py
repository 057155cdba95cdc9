"""What the observability objects that run until closed share: ``with``."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["Closing"]

_C = TypeVar("_C", bound="Closing")


class Closing:
    """Something that runs until :meth:`close`; ``with`` closes it on the
    way out, whether or not the block raised."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
