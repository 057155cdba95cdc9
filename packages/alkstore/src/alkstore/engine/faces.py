"""Which face a handle or a transaction belongs to (A-7).

Each face takes its own: a job claimed from an async store is settled
through the async store, a sync transaction joins sync calls. A handle of
the other face is refused when it is handed over, with the class to use,
rather than failing later with a ``coroutine was never awaited``. Faces are
told apart without I/O: the async face's methods are coroutine functions.
"""

from __future__ import annotations

import inspect

from alkstore.errors import InvalidArgument

__all__ = ["check_face", "is_async", "wrong_face"]

#: What each face's store is called, for the refusals.
_STORES = {True: "the async store (alkstore.open_async)", False: "the sync store (alkstore.open)"}


def is_async(obj: object, method: str) -> bool:
    """Whether *obj*'s (or, for a class, its own) *method* is a coroutine
    function: the async face's mark."""
    owner = obj if isinstance(obj, type) else type(obj)
    return inspect.iscoroutinefunction(getattr(owner, method, None))


def wrong_face(what: str, obj: object, async_face: bool) -> InvalidArgument:
    """The refusal of *obj*, which belongs to the other face than *async_face*."""
    theirs, mine = ("sync", "async") if async_face else ("async", "sync")
    return InvalidArgument(
        f"{what} is a {type(obj).__name__}, which belongs to the {theirs} face; this is the "
        f"{mine} face: use it with {_STORES[not async_face]}, or take one from "
        f"{_STORES[async_face]}"
    )


def check_face(what: str, obj: object, method: str, async_face: bool) -> None:
    """Refuse *obj* unless its *method* matches *async_face* (A-7)."""
    if is_async(obj, method) != async_face:
        raise wrong_face(what, obj, async_face)
