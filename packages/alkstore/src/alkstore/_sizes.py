"""A cheap guess whether a payload is small (A-2).

The async face encodes and decodes payloads over 64 KiB in a thread, so that
a big payload never stalls the event loop. Knowing the size exactly would
mean encoding it; :func:`surely_small` looks at no more than a few hundred
nodes and answers ``True`` only when the encoded text cannot exceed the
bound.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BIG_PAYLOAD_BYTES", "surely_small"]

#: Payloads whose encoded text may exceed this are handled off the loop.
BIG_PAYLOAD_BYTES = 64 * 1024
_NODE_BUDGET = 256


def surely_small(value: Any, bound: int = BIG_PAYLOAD_BYTES) -> bool:
    """``True`` only when ``encode_payload(value)`` is surely under *bound*
    bytes; ``False`` when it may not be (or when looking would cost too much)."""
    size = 0
    nodes = 0
    stack = [value]
    while stack:
        item = stack.pop()
        nodes += 1
        if nodes > _NODE_BUDGET:
            return False
        if isinstance(item, str):
            size += 4 * len(item) + 8  # escapes and UTF-8 at worst, plus quotes
        elif isinstance(item, dict):
            size += 2 + 2 * len(item)
            for key, val in item.items():
                stack.append(key)
                stack.append(val)
        elif isinstance(item, (list, tuple)):
            size += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            size += item.bit_length() // 3 + 2  # decimal digits, at most
        else:
            size += 32  # floats, booleans, None; anything else fails to encode
        if size >= bound:
            return False
    return True
