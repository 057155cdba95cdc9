"""The contract as typed Protocols: what every engine implements (SPEC §3-§10).

Each method's docstring names the rules it must honour. None of these classes
is ``runtime_checkable``: an engine proves it conforms statically (a typed
assignment ``store: alkstore.Store = MyStore(...)`` checked by mypy) and
dynamically by passing the published conformance suite.

``tx`` arguments accept the store's own :class:`Tx` or the driver's native
handle (T-2), hence their type ``object | None``.

The async faces (SPEC §14) have the same names with an ``Async`` prefix: the
same operations, arguments, results, errors and rules, with coroutines where
the sync face does I/O (A-1). They are written once, in
``_protocols_async.py``, which makes the sync ones (``_protocols.py``, by
``scripts/async_to_sync.py``); this module is where both are imported from.
"""

from __future__ import annotations

# Each private module's __all__ says what it gives; this one gives them all.
from . import _protocols, _protocols_async, _protocols_base
from ._protocols import *  # noqa: F403
from ._protocols_async import *  # noqa: F403
from ._protocols_base import *  # noqa: F403

__all__ = sorted([*_protocols_base.__all__, *_protocols.__all__, *_protocols_async.__all__])

# Public under this module's name, as before they moved: in reprs and pickles.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
