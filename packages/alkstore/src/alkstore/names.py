"""Names and payloads: the checks every engine makes before it writes (C-1..C-3).

Engines call these helpers rather than re-implementing them, so that a name or
payload refused by one engine is refused by every engine, with the same error.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from .errors import InvalidArgument, ReservedName

__all__ = [
    "MAX_KEY_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_NOTIFICATION_BYTES",
    "MAX_PAYLOAD_BYTES",
    "RESERVED_PREFIX",
    "decode_payload",
    "encode_payload",
    "is_reserved",
    "validate_key",
    "validate_name",
]

#: Names starting with this belong to the engine (C-2).
RESERVED_PREFIX = "__alkstore"
#: Longest accepted name, in characters (C-1).
MAX_NAME_LENGTH = 200
#: Longest accepted stream event key, in characters.
MAX_KEY_LENGTH = 1024
#: Largest accepted encoded payload, in UTF-8 bytes (C-3).
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
#: Largest accepted encoded notification payload, in UTF-8 bytes (C-3).
MAX_NOTIFICATION_BYTES = 7_900

# Control characters (Cc) cannot be typed or printed sensibly; lone surrogates
# (Cs) cannot be stored as UTF-8 by either database.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs"})


def is_reserved(name: str) -> bool:
    """True when *name* lies in the engine's namespace (C-2)."""
    return name.startswith(RESERVED_PREFIX)


def validate_name(name: object, kind: str = "name", *, allow_reserved: bool = False) -> str:
    """Return *name* if it is a valid name for a queue, stream, lock, schedule,
    outbox or channel (C-1); raise otherwise.

    Raises :class:`InvalidArgument` for a non-string, an empty or over-long
    name, or one holding a control character, and :class:`ReservedName` for a
    name in the ``__alkstore`` namespace unless *allow_reserved* (engines pass
    it for their own names).

    >>> validate_name("emails", "queue")
    'emails'
    """
    if not isinstance(name, str):
        raise InvalidArgument(f"{kind} name must be a str, not {type(name).__name__}")
    if not 1 <= len(name) <= MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"{kind} name must be 1..{MAX_NAME_LENGTH} characters, got {len(name)}"
        )
    for ch in name:
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            raise InvalidArgument(f"{kind} name holds a control character: {name!r}")
    if not allow_reserved and is_reserved(name):
        raise ReservedName(name)
    return name


def validate_key(key: object) -> str | None:
    """A stream event key: ``None``, or a string of at most
    :data:`MAX_KEY_LENGTH` characters that every database can store (no NUL,
    no lone surrogate). Raises :class:`InvalidArgument` otherwise."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidArgument(f"key must be a str or None, not {type(key).__name__}")
    if len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise InvalidArgument(f"key must be at most {MAX_KEY_LENGTH} characters without NUL")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument("key is not valid Unicode text (lone surrogate)") from exc
    return key


def encode_payload(value: Any, *, limit: int = MAX_PAYLOAD_BYTES, what: str = "payload") -> str:
    """Encode *value* as the JSON text that is stored (C-3).

    Accepts exactly what ``json.dumps(value, allow_nan=False)`` accepts; the
    value read back is ``json.loads`` of the returned text. Raises
    :class:`InvalidArgument` for anything that does not serialize, for text
    that is not valid UTF-8 (lone surrogates), and above *limit* bytes.

    >>> encode_payload({"to": "a@example.com", "n": [1, 2.5, None]})
    '{"to":"a@example.com","n":[1,2.5,null]}'
    """
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        # UnicodeEncodeError is a ValueError: lone surrogates land here too.
        raise InvalidArgument(f"{what} is not JSON-serializable: {exc}") from exc
    if size > limit:
        raise InvalidArgument(f"{what} is {size} bytes encoded; the limit is {limit}")
    return text


def decode_payload(text: str) -> Any:
    """The value stored as *text* by :func:`encode_payload`."""
    return json.loads(text)
