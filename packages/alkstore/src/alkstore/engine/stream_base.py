"""What both faces of a stream handle share (SPEC §7); the handles are in
:mod:`.stream_async` (the source) and :mod:`.stream` (generated)."""

from __future__ import annotations

from typing import Any

from alkstore.names import encode_payload, validate_key, validate_name

from .prepare import check_limit, check_offset

__all__ = ["StreamBase"]


class StreamBase:
    """What both faces of a stream handle share: the name and the argument
    checks."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._keys = ("stream:" + name,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"

    @property
    def name(self) -> str:
        """The stream's name."""
        return self._name

    @staticmethod
    def _publish_args(payload: Any, key: object) -> tuple[str, str | None]:
        return encode_payload(payload), validate_key(key)

    @staticmethod
    def _read_args(after: object, limit: object) -> tuple[int, int]:
        return check_offset("after", after), check_limit(limit)

    @staticmethod
    def _commit_args(consumer: object, offset: object) -> tuple[str, int]:
        return validate_name(consumer, "consumer"), check_offset("offset", offset)
