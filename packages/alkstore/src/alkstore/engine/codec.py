"""Decoding stored payloads in the kit (C-3).

Every payload a write accepts decodes (``alkstore.names.encode_payload``
refuses the rest), so a failure here means a row written around the
contract. It must never break a claim, a listing or a listener: listings and
listeners show such a payload as ``None``, and a claim dead-letters the row
with ``last_error = "undecodable payload"`` (:data:`UNDECODABLE_ERROR`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from alkstore._sizes import BIG_PAYLOAD_BYTES

__all__ = ["UNDECODABLE", "UNDECODABLE_ERROR", "decode_or_none", "let_the_loop_run", "try_decode"]

#: ``last_error`` of a job whose payload could not be decoded at claim time.
UNDECODABLE_ERROR = "undecodable payload"

#: What :func:`try_decode` returns for text that does not decode.
UNDECODABLE: Any = object()

_decode = json.JSONDecoder().decode


def try_decode(text: str) -> Any:
    """The value stored as *text*, or :data:`UNDECODABLE`."""
    try:
        return _decode(text)
    except (ValueError, RecursionError, TypeError):
        return UNDECODABLE


def decode_or_none(text: str | None) -> Any:
    """The value stored as *text*; ``None`` when it does not decode."""
    if text is None:
        return None
    value = try_decode(text)
    return None if value is UNDECODABLE else value


def let_the_loop_run(text: str) -> None:
    """After encoding or decoding *text*, give the GIL up for a moment when
    *text* is big (A-2).

    The async face runs big payloads' JSON work in a thread, but CPython's
    JSON codec holds the GIL for the whole of one value, and a thread keeps
    the GIL across values until the loop has waited the switch interval
    (5 ms) for it: two 1 MiB values in a row kept the loop waiting for both.
    ``time.sleep(0)`` hands the GIL over at once, so the loop waits for one
    value at most. Small values skip it: it costs a system call."""
    if len(text) > BIG_PAYLOAD_BYTES:
        time.sleep(0)
