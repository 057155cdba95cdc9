"""The retry curve every engine uses (B-1).

Exponential with equal jitter: for attempt ``a`` and base ``b`` the ceiling is
``t = min(b * 2 ** (a - 1), 3600)`` and the delay is uniform in ``[t/2, t]``.
The randomness is an argument, so the function is pure and testable.

>>> delay(1, 5.0, rng=lambda: 0.0)
2.5
>>> delay(3, 5.0, rng=lambda: 0.5)
15.0
>>> delay(30, 5.0, rng=lambda: 0.999999) <= MAX_DELAY_S
True
>>> delay(4, 0.0)
0.0
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from .errors import InvalidArgument

__all__ = ["MAX_DELAY_S", "delay"]

#: The curve's ceiling in seconds: a pinned constant, not a knob.
MAX_DELAY_S = 3600.0


def delay(attempt: int, base_s: float, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before the next try after *attempt* tries (B-1).

    *attempt* is the job's ``attempts`` count when the retry is scheduled
    (``>= 1``); *base_s* is the row's ``backoff_base_s`` (``>= 0``); *rng*
    returns a float in ``[0, 1)``.
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidArgument(f"attempt must be an int >= 1, got {attempt!r}")
    if isinstance(base_s, bool) or not isinstance(base_s, (int, float)):
        raise InvalidArgument(f"base_s must be a finite number >= 0, got {base_s!r}")
    try:
        base = float(base_s)
    except OverflowError as exc:  # an int beyond any float
        raise InvalidArgument(f"base_s must be a finite number >= 0, got {base_s!r}") from exc
    if not math.isfinite(base) or base < 0:
        raise InvalidArgument(f"base_s must be a finite number >= 0, got {base_s!r}")
    if base == 0:
        return 0.0
    # Compare exponents rather than computing 2 ** (attempt - 1) for huge attempts.
    ceiling = MAX_DELAY_S if attempt - 1 >= 64 else min(base * 2.0 ** (attempt - 1), MAX_DELAY_S)
    draw = rng()
    if isinstance(draw, bool) or not isinstance(draw, (int, float)) or not 0 <= draw < 1:
        raise InvalidArgument(f"rng() must return a float in [0, 1), got {draw!r}")
    return ceiling / 2 + draw * ceiling / 2
