"""Names and payloads: the checks every engine makes before it writes (C-1..C-3).

Engines call these helpers rather than re-implementing them, so that a name or
payload refused by one engine is refused by every engine, with the same error.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
import unicodedata
import uuid
from collections.abc import Callable
from typing import Any, Final

from .errors import InvalidArgument, ReservedName

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_KEY_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_NOTIFICATION_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "OUTBOX_PREFIX",
    "RESERVED_PREFIX",
    "UNDECODABLE",
    "UNDECODABLE_ERROR",
    "check_worker_id",
    "decode_payload",
    "default_owner",
    "encode_payload",
    "is_reserved",
    "storable_text",
    "try_decode_payload",
    "validate_key",
    "validate_name",
]

#: Names starting with this belong to the engine (C-2).
RESERVED_PREFIX = "__alkstore"
#: Outbox ``name`` is backed by the queue ``OUTBOX_PREFIX + name`` (Q-20).
OUTBOX_PREFIX = "__alkstore.outbox."
#: Longest accepted name, in characters (C-1).
MAX_NAME_LENGTH = 200
#: Longest accepted stream event key, in characters.
MAX_KEY_LENGTH = 1024
#: Largest accepted encoded payload, in UTF-8 bytes (C-3).
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
#: Largest accepted encoded notification payload, in UTF-8 bytes (C-3).
MAX_NOTIFICATION_BYTES = 7_900
#: Deepest accepted payload nesting (C-3): a scalar is depth 0 and every list
#: or object around it adds one. Far below what ``json.loads`` can recurse
#: through, so that every reader, on any thread, decodes what a writer wrote.
MAX_PAYLOAD_DEPTH = 256
#: Longest accepted integer in a payload, in decimal digits (C-3): the
#: interpreter's default limit for int/str conversion, which ``json.loads``
#: in a reader with the default settings enforces.
MAX_INT_DIGITS = 4_300
#: The ``last_error`` of a job that a claim dead-letters because its stored
#: payload cannot be decoded (C-3).
UNDECODABLE_ERROR = "undecodable payload"

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
    # Printable ASCII (the common case) holds no control character; only
    # other text is looked at character by character.
    if not (name.isascii() and name.isprintable()):
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


# One encoder for every write: building it per call costs about as much as
# encoding a small payload. Cycles are not tracked (no per-call bookkeeping):
# a cyclic value recurses until RecursionError, which is refused like any
# other value that does not serialize.
_ENCODER = json.JSONEncoder(
    allow_nan=False, ensure_ascii=False, separators=(",", ":"), check_circular=False
)
_CONTAINERS = (list, tuple, dict)
# A JSON string literal as the encoder writes it: quotes inside are escaped.
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_LONG_INT = re.compile(rf"\d{{{MAX_INT_DIGITS + 1}}}")


def _too_deep(value: Any) -> bool:
    """Whether *value* nests deeper than :data:`MAX_PAYLOAD_DEPTH`; only
    containers are visited."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_PAYLOAD_DEPTH:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, _CONTAINERS))
    return False


def _int_limit_enforced() -> bool:
    """Whether this interpreter already refuses to print longer integers."""
    get_limit = getattr(sys, "get_int_max_str_digits", None)  # Python >= 3.11
    if get_limit is None:
        return False
    limit: int = get_limit()
    return 0 < limit <= MAX_INT_DIGITS


# A big payload is encoded in slices rather than in one call of the C
# encoder: that call holds the GIL for as long as it runs (17 ms for 1 MiB of
# records on a slow core), so even in a worker thread it would stall an event
# loop. Slices of about _SLICE_CHARS each keep every hold short, and are
# faster too (7 ms for the same payload: the one-shot call's output buffer
# grows by copying). Containers with at most _LEAF_FANOUT children and no
# container among them go to the encoder whole; the walk over the rest counts
# their depth, so the sliced path needs no second walk for it.
_SLICE_CHARS = 32 * 1024
_LEAF_FANOUT = 64
_SMALL_NODES = 256


def _let_others_run() -> None:
    """Hand the GIL to a thread waiting for it (an event loop), if any: a
    thread that keeps it only gives it up every switch interval (5 ms), and
    on a loaded machine the OS may stretch that several times over. Called
    between the pieces of a big payload; costs about a microsecond."""
    time.sleep(0)


class _TooDeep(Exception):
    """The sliced walk went deeper than MAX_PAYLOAD_DEPTH (or round a cycle)."""


def _is_leaf(value: Any) -> bool:
    """A container the encoder takes in one call: few children, none a
    container."""
    children = value.values() if isinstance(value, dict) else value
    return len(value) <= _LEAF_FANOUT and not any(isinstance(c, _CONTAINERS) for c in children)


def _few_nodes(value: Any) -> bool:
    """Whether *value* has at most _SMALL_NODES containers and items."""
    budget = _SMALL_NODES
    stack = [value]
    while stack:
        node = stack.pop()
        budget -= len(node)
        if budget < 0:
            return False
        children = node.values() if isinstance(node, dict) else node
        stack.extend(c for c in children if isinstance(c, _CONTAINERS))
    return True


def _encode_sliced(value: Any) -> str:
    out: list[str] = []
    _put_sliced(value, 1, out)
    return "".join(out)


def _put_sliced(value: Any, depth: int, out: list[str]) -> None:
    """Append the JSON of container *value* at nesting *depth* to *out*."""
    if depth > MAX_PAYLOAD_DEPTH:
        raise _TooDeep
    encode = _ENCODER.encode
    is_dict = isinstance(value, dict)
    items: list[Any] = list(value.items()) if is_dict else list(value)
    children = [item[1] for item in items] if is_dict else items
    big = [isinstance(c, _CONTAINERS) and not _is_leaf(c) for c in children]
    if depth == MAX_PAYLOAD_DEPTH and any(isinstance(c, _CONTAINERS) for c in children):
        raise _TooDeep
    out.append("{" if is_dict else "[")
    step = 16
    i, n = 0, len(items)
    while i < n:
        if i:
            out.append(",")
        if big[i]:
            if is_dict:
                out.append(
                    encode({items[i][0]: 0})[1:-2]
                )  # the key as the encoder writes it, and ':'
            _put_sliced(children[i], depth + 1, out)
            i += 1
            continue
        j = i + 1
        while j < n and j - i < step and not big[j]:
            j += 1
        text = encode(dict(items[i:j]) if is_dict else items[i:j])
        _let_others_run()
        out.append(text[1:-1])
        if j - i == step and len(text) < _SLICE_CHARS // 2:
            step *= 2
        elif len(text) > 2 * _SLICE_CHARS and step > 1:
            step //= 2
        i = j
    out.append("}" if is_dict else "]")


def encode_payload(value: Any, *, limit: int = MAX_PAYLOAD_BYTES, what: str = "payload") -> str:
    """Encode *value* as the JSON text that is stored (C-3).

    Accepts exactly what ``json.dumps(value, allow_nan=False)`` accepts, up to
    :data:`MAX_PAYLOAD_DEPTH` levels of nesting and integers of at most
    :data:`MAX_INT_DIGITS` digits; the value read back is ``json.loads`` of
    the returned text. Raises :class:`InvalidArgument` for anything else:
    values that do not serialize, cyclic or deeper values, text that is not
    valid UTF-8 (lone surrogates), and above *limit* bytes.

    >>> encode_payload({"to": "a@example.com", "n": [1, 2.5, None]})
    '{"to":"a@example.com","n":[1,2.5,null]}'
    """
    try:
        if isinstance(value, _CONTAINERS) and not _is_leaf(value) and not _few_nodes(value):
            text = _encode_sliced(value)  # depth checked on the way
            too_deep = False
        else:
            text = _ENCODER.encode(value)
            # Nesting needs an opening bracket per level, so a text with few
            # of them (every small payload) is shallow without a walk.
            too_deep = text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH and _too_deep(value)
        size = len(text.encode("utf-8"))
    except MemoryError:
        raise
    except (RecursionError, _TooDeep) as exc:
        raise InvalidArgument(
            f"{what} is cyclic or nests deeper than {MAX_PAYLOAD_DEPTH} levels"
        ) from exc
    except Exception as exc:
        # TypeError and ValueError from the encoder (UnicodeEncodeError is a
        # ValueError: lone surrogates land here too), and whatever a
        # container subclass raises while it is iterated.
        raise InvalidArgument(f"{what} is not JSON-serializable: {exc}") from exc
    if too_deep:
        raise InvalidArgument(f"{what} nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    if size > limit:
        raise InvalidArgument(f"{what} is {size} bytes encoded; the limit is {limit}")
    if (
        len(text) > MAX_INT_DIGITS
        and not _int_limit_enforced()
        and _LONG_INT.search(_STRING_LITERAL.sub('""', text))
    ):
        raise InvalidArgument(f"{what} holds an integer of more than {MAX_INT_DIGITS} digits")
    return text


class _Undecodable:
    """The type of :data:`UNDECODABLE`."""

    _instance: _Undecodable | None = None

    def __new__(cls) -> _Undecodable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDECODABLE"

    def __reduce__(self) -> str:
        return "UNDECODABLE"


#: What :func:`try_decode_payload` returns for stored text that no reader can
#: decode (a row written around the contract, C-3).
UNDECODABLE: Final = _Undecodable()


# Decoding has the same trap as encoding: one json.loads of 1 MiB holds the
# GIL for 6-9 ms here, three times that on a loaded machine when the OS takes
# the CPU from the thread that holds it. A big text is therefore parsed in
# pieces, each one call of the C scanner on at most _PIECE_CHARS of text:
# a run of a container's elements is cut at a comma and parsed as a container
# of its own (the cut is right exactly when that parses and consumes the
# whole piece: a comma inside a string or a nested value leaves it
# unterminated); an element that no piece holds is walked the same way. The
# result is exactly json.loads's (tested against it).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_SCAN_STRING: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, idx: int) -> int:
    """The index of the first character at or after *idx* that is not JSON
    whitespace."""
    found = _SPACE.match(text, idx)
    return idx if found is None else found.end()


_SLICED_DECODE_CHARS = 64 * 1024
_PIECE_CHARS = 32 * 1024
_CUTS_TRIED = 3


def _decode_sliced(text: str) -> Any:
    if text.startswith("\ufeff"):
        raise ValueError("unexpected BOM")
    value, idx = _parse_value(text, _skip(text, 0))
    if _skip(text, idx) != len(text):
        raise ValueError("extra data after the value")
    return value


def _scan(text: str, idx: int) -> tuple[Any, int]:
    try:
        return _SCAN(text, idx)
    except StopIteration:
        raise ValueError(f"expected a value at {idx}") from None


def _parse_value(text: str, idx: int) -> tuple[Any, int]:
    """The value at *idx* and the index after it."""
    if not text.startswith(("[", "{"), idx):
        return _scan(text, idx)  # a scalar: strings, however long, are quick
    piece = text[idx : idx + _PIECE_CHARS]
    try:
        value, end = _scan(piece, 0)  # it ends within the piece: one call
    except ValueError:
        if len(piece) < _PIECE_CHARS:
            raise  # the piece held all the rest: malformed
        return _parse_container(text, idx)  # longer than a piece: walk it
    return value, idx + end


def _run_of(text: str, idx: int, is_object: bool) -> tuple[Any, int] | None:
    """Elements (or members) from *idx* on, as many as one piece holds, and
    the index of the comma after them; ``None`` when no cut parses."""
    piece = text[idx : idx + _PIECE_CHARS]
    opening, closing = ("{", "}") if is_object else ("[", "]")
    end = len(piece)
    for _ in range(_CUTS_TRIED):
        cut = piece.rfind(",", 0, end)
        if cut <= 0:
            return None
        wrapped = opening + piece[:cut] + closing
        try:
            value, stop = _SCAN(wrapped, 0)
        except (StopIteration, ValueError):
            value, stop = None, -1
        if stop == len(wrapped):
            return value, idx + cut
        end = cut
    return None


def _parse_container(text: str, idx: int) -> tuple[Any, int]:
    is_object = text[idx] == "{"
    closing = "}" if is_object else "]"
    idx = _skip(text, idx + 1)
    result: Any = {} if is_object else []
    if text.startswith(closing, idx):
        return result, idx + 1
    runs_from = idx  # no run is tried before this index (the last try failed)
    while True:
        run = _run_of(text, idx, is_object) if idx >= runs_from else None
        if run is not None:
            (result.update if is_object else result.extend)(run[0])
            _let_others_run()
            idx = run[1]
        elif is_object:
            runs_from = idx + _PIECE_CHARS // 2
            if not text.startswith('"', idx):
                raise ValueError(f"expected a key at {idx}")
            key, idx = _SCAN_STRING(text, idx + 1)
            idx = _skip(text, idx)
            if not text.startswith(":", idx):
                raise ValueError(f"expected ':' at {idx}")
            result[key], idx = _parse_value(text, _skip(text, idx + 1))
        else:
            runs_from = idx + _PIECE_CHARS // 2
            value, idx = _parse_value(text, idx)
            result.append(value)
        idx = _skip(text, idx)
        if text.startswith(",", idx):
            idx = _skip(text, idx + 1)
        elif text.startswith(closing, idx):
            return result, idx + 1
        else:
            raise ValueError(f"expected ',' or {closing!r} at {idx}")


def try_decode_payload(text: object) -> Any:
    """The value stored as *text*, or :data:`UNDECODABLE` when it cannot be
    decoded (not JSON, nested beyond what the decoder can recurse through,
    an integer longer than the interpreter converts, not text at all).

    A claim uses it to tell a poisoned row apart and dead-letter it with
    :data:`UNDECODABLE_ERROR` instead of failing the whole claim (C-3).
    """
    try:
        if isinstance(text, str) and len(text) > _SLICED_DECODE_CHARS:
            return _decode_sliced(text)
        return json.loads(text)  # type: ignore[arg-type]
    except MemoryError:
        raise
    except (ValueError, TypeError, RecursionError):
        return UNDECODABLE


def decode_payload(text: object) -> Any:
    """The value stored as *text* by :func:`encode_payload`; ``None`` for
    stored text that cannot be decoded, which is what listings, reads and
    listeners show for it (C-3). Claims use :func:`try_decode_payload`."""
    value = try_decode_payload(text)
    return None if value is UNDECODABLE else value


def storable_text(text: str) -> str:
    """*text* as every database can store it: NUL and lone surrogates
    replaced by U+FFFD. For texts the engine records rather than the caller's
    data (``last_error``): an exception message may hold either, and a retry
    must not fail because of its error text (E-3)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def default_owner() -> str:
    """A worker or lock owner id unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def check_worker_id(worker_id: object) -> str:
    """Worker ids and owners follow the name rules, reserved prefix allowed."""
    return validate_name(worker_id, "worker_id", allow_reserved=True)
