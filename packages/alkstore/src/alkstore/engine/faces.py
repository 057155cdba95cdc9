"""Which face a handle or a transaction belongs to (A-7).

Each face takes its own: a job claimed from an async store is settled
through the async store, a sync transaction joins sync calls. A handle of
the other face is refused when it is handed over, with the class to use,
rather than failing later with a ``coroutine was never awaited``. Faces are
told apart without I/O: the async face's methods are coroutine functions.
"""

from __future__ import annotations

import functools
import inspect

from alkstore.errors import InvalidArgument

__all__ = ["FaceMark", "check_face", "is_async", "wrong_face"]

#: What each face's store is called, for the refusals.
_STORES = {True: "the async store (alkstore.open_async)", False: "the sync store (alkstore.open)"}


def is_async(obj: object, method: str) -> bool:
    """Whether *obj*'s (or, for a class, its own) *method* is a coroutine
    function: the async face's mark. Known once per class: ``tx=`` is checked
    on every call that takes one."""
    return _is_async_method(obj if isinstance(obj, type) else type(obj), method)


@functools.lru_cache(maxsize=256)
def _is_async_method(owner: type, method: str) -> bool:
    return inspect.iscoroutinefunction(getattr(owner, method, None))


class FaceMark:
    """A kit class that knows its face once, at class creation, so the checks
    on hot paths (every handle of an ``ack_batch``) cost one attribute read;
    *method* names the I/O method that tells the faces apart."""

    __slots__ = ()
    _async_face = False
    _face_method = ""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls._face_method:
            cls._async_face = is_async(cls, cls._face_method)


def wrong_face(what: str, obj: object, async_face: bool, takes: str = "") -> InvalidArgument:
    """The refusal of *obj*, which belongs to the other face than *async_face*;
    *takes* says what this face takes instead."""
    theirs, mine = ("sync", "async") if async_face else ("async", "sync")
    instead = f" ({takes})" if takes else ""
    return InvalidArgument(
        f"{what} is a {type(obj).__name__}, which belongs to the {theirs} face; the "
        f"{mine} face takes its own{instead}: use the {type(obj).__name__} with "
        f"{_STORES[not async_face]}, or take one from {_STORES[async_face]}"
    )


def check_face(what: str, obj: object, method: str, async_face: bool) -> None:
    """Refuse *obj* unless its *method* matches *async_face* (A-7), naming the
    kit class of this face that stands where *obj*'s class does."""
    face = getattr(obj, "_async_face", None)  # the kit's classes know theirs
    if face is None:
        face = is_async(obj, method)
    if face is not async_face:
        raise wrong_face(what, obj, async_face, _twin(type(obj), method, async_face))


def _twin(cls: type, method: str, async_face: bool) -> str:
    """The class of *async_face* beside *cls* under their common kit base
    (``KitJob`` for an ``AsyncKitJob``), or ``""`` when there is none."""
    for base in cls.__mro__[1:]:
        if base is object:
            break
        siblings: list[type] = base.__subclasses__()
        for sibling in siblings:
            if sibling is not cls and is_async(sibling, method) == async_face:
                return sibling.__name__
    return ""
