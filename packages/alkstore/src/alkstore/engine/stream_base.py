"""What both faces of a stream handle share (SPEC §7); the handles are in
:mod:`.stream_async` (the source) and :mod:`.stream` (generated)."""

from __future__ import annotations

from typing import Any

from alkstore.names import encode_payload, validate_key, validate_name

from .named import NamedHandle
from .prepare import check_limit, check_offset

__all__ = ["StreamBase"]


class StreamBase(NamedHandle):
    """What both faces of a stream handle share: the name and the argument
    checks."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._keys = ("stream:" + name,)

    @staticmethod
    def _publish_args(payload: Any, key: object) -> tuple[str, str | None]:
        return encode_payload(payload), validate_key(key)

    @staticmethod
    def _read_args(after: object, limit: object) -> tuple[int, int]:
        return check_offset("after", after), check_limit(limit)

    @staticmethod
    def _commit_args(consumer: object, offset: object) -> tuple[str, int]:
        return validate_name(consumer, "consumer"), check_offset("offset", offset)
