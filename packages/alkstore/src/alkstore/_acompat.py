"""The primitives that differ between the two faces, in pairs (docs/adr/0017).

The async face is the source of the sync face (``scripts/async_to_sync.py``):
an async module uses the ``A``/``a`` name of a pair here, and the sync module
made from it uses the other name, which :data:`NAMES` of that script maps it
to. Each pair does the same thing, one on an event loop, one on threads:

=====================  ==========================  ===========================
async face             sync face                   what for
=====================  ==========================  ===========================
``AEvent``             ``Event``                   a flag to wait on
``ALock``              ``Lock``                    mutual exclusion
``ACondition``         ``Condition``               wait for a change (on a lock)
``asleep(s)``          ``sleep(s)``                pause
``acond_wait(c, s)``   ``cond_wait(c, s)``         a condition's wait, bounded
``aevent_wait(e, s)``  ``event_wait(e, s)``        an event's wait, bounded
``aspawn(fn, name)``   ``spawn(fn, name)``         run *fn* beside the caller
``ASpawned``           ``Spawned``                 what spawn returns
``ajoin(h, s)``        ``join(h, s)``              wait for what spawn started
``aoffload(fn, *a)``   ``offload(fn, *a)``         CPU work off the loop (A-2);
                                                   inline on a thread
=====================  ==========================  ===========================

Nothing here knows alkstore: it is the ground floor of the house.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = [
    "ACondition",
    "AEvent",
    "ALock",
    "ASpawned",
    "Condition",
    "Event",
    "Lock",
    "Spawned",
    "acond_wait",
    "aevent_wait",
    "ajoin",
    "aoffload",
    "asleep",
    "aspawn",
    "cond_wait",
    "event_wait",
    "join",
    "offload",
    "sleep",
    "spawn",
]

T = TypeVar("T")

# --------------------------------------------------------------- async face

AEvent = asyncio.Event
ALock = asyncio.Lock
ACondition = asyncio.Condition
asleep = asyncio.sleep
ASpawned = asyncio.Task[None]


async def acond_wait(cond: asyncio.Condition, timeout_s: float) -> bool:
    """Wait on *cond* (held) for a notify or *timeout_s*; ``True`` when notified."""
    try:
        await asyncio.wait_for(cond.wait(), timeout_s)
    except asyncio.TimeoutError:
        return False
    return True


async def aevent_wait(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait up to *timeout_s* for *event*; whether it is set."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)
    return event.is_set()


def aspawn(fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> asyncio.Task[None]:
    """Run ``fn()`` as a task of the running loop."""
    return asyncio.get_running_loop().create_task(fn(), name=name)


async def ajoin(handle: asyncio.Task[None], timeout_s: float) -> None:
    """Wait up to *timeout_s* for a task from :func:`aspawn`; cancel it after."""
    try:
        await asyncio.wait_for(asyncio.shield(handle), timeout_s)
    except asyncio.TimeoutError:
        handle.cancel()
    except asyncio.CancelledError:
        handle.cancel()
        raise


async def aoffload(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread, so CPU work does not hold up the loop (A-2)."""
    return await asyncio.to_thread(fn, *args)


# ---------------------------------------------------------------- sync face

Event = threading.Event
Lock = threading.Lock
Condition = threading.Condition
sleep = time.sleep
Spawned = threading.Thread


def cond_wait(cond: threading.Condition, timeout_s: float) -> bool:
    """Wait on *cond* (held) for a notify or *timeout_s*; ``True`` when notified."""
    return cond.wait(timeout_s)


def event_wait(event: threading.Event, timeout_s: float) -> bool:
    """Wait up to *timeout_s* for *event*; whether it is set."""
    return event.wait(timeout_s)


def spawn(fn: Callable[[], None], name: str) -> threading.Thread:
    """Run ``fn()`` on a daemon thread."""
    thread = threading.Thread(target=fn, name=name, daemon=True)
    thread.start()
    return thread


def join(handle: threading.Thread, timeout_s: float) -> None:
    """Wait up to *timeout_s* for a thread from :func:`spawn`."""
    if handle is not threading.current_thread():
        handle.join(timeout_s)


def offload(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, here: a thread has no loop to keep free."""
    return fn(*args)
