"""Decoding stored payloads in the kit (C-3).

Every payload a write accepts decodes (``alkstore.names.encode_payload``
refuses the rest), so a failure here means a row written around the
contract. It must never break a claim, a listing or a listener: listings and
listeners show such a payload as ``None``, and a claim dead-letters the row
with ``last_error = "undecodable payload"`` (:data:`UNDECODABLE_ERROR`).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["UNDECODABLE", "UNDECODABLE_ERROR", "decode_or_none", "try_decode"]

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
