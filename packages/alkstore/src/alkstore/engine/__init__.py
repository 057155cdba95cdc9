"""The engine kit: the public API implemented once, above an engine's I/O.

An engine implements :class:`Executor` (see :mod:`alkstore.engine.seam`) and
hands it to :class:`KitStore`; :class:`AsyncKitStore` over an
:class:`AsyncExecutor` (native, or :class:`ThreadedAsyncExecutor` around the
sync one) is its async face. Everything else — argument checks, payload
encoding, claim order, handles, blocking loops, listeners, the scheduler, the
outbox — is here and the same for every engine (docs/adr/0010,
docs/implementing-an-engine.md).

Modules, one concern each: :mod:`~alkstore.engine.rows` (the named rows of
the seam), :mod:`~alkstore.engine.seam` (the executor protocols),
:mod:`~alkstore.engine.prepare` (argument checks),
:mod:`~alkstore.engine.wakes`, :mod:`~alkstore.engine.jobs`,
:mod:`~alkstore.engine.queue`, :mod:`~alkstore.engine.stream`,
:mod:`~alkstore.engine.locks`, :mod:`~alkstore.engine.listener`,
:mod:`~alkstore.engine.schedules`, :mod:`~alkstore.engine.outbox`,
:mod:`~alkstore.engine.store`, :mod:`~alkstore.engine.threaded`,
:mod:`~alkstore.engine.native`, :mod:`~alkstore.engine.txowner`.
"""

from __future__ import annotations

from alkstore.protocols import Capability

from . import rows
from .codec import UNDECODABLE_ERROR
from .jobs import KitJob
from .jobs_async import AsyncKitJob
from .listener import QueueListener
from .listener_async import AsyncQueueListener
from .native import unwrap
from .outbox_base import OUTBOX_OPTS, OUTBOX_PREFIX, outbox_queue_name
from .prepare import (
    check_bool_option,
    check_sql_args,
    check_url_text,
    parse_bool_option,
    parse_option,
)
from .results import result_wake_key
from .rows import *  # noqa: F403  (its __all__: the seam's named rows)
from .runners import run_plan
from .runners_async import run_plan_async
from .schedules import SCHEDULER_LOCK, SCHEDULES_WAKE_KEY
from .seam import Executor, NoteSink
from .seam_async import AsyncExecutor
from .store import KitStore
from .store_async import AsyncKitStore
from .threaded import ThreadedAsyncCursor, ThreadedAsyncExecutor, ThreadedAsyncTx
from .wakes import FALLBACK_POLL_S, Step, WakeBoard

__all__ = [
    "ALL_CAPABILITIES",
    "FALLBACK_POLL_S",
    "OUTBOX_OPTS",
    "OUTBOX_PREFIX",
    "SCHEDULER_LOCK",
    "SCHEDULES_WAKE_KEY",
    "UNDECODABLE_ERROR",
    "AsyncExecutor",
    "AsyncKitJob",
    "AsyncKitStore",
    "AsyncQueueListener",
    "Executor",
    "KitJob",
    "KitStore",
    "NoteSink",
    "QueueListener",
    "Step",
    "ThreadedAsyncCursor",
    "ThreadedAsyncExecutor",
    "ThreadedAsyncTx",
    "WakeBoard",
    "check_bool_option",
    "check_sql_args",
    "check_url_text",
    "outbox_queue_name",
    "parse_bool_option",
    "parse_option",
    "result_wake_key",
    "run_plan",
    "run_plan_async",
    "unwrap",
]
# And every named row of the seam, as rows.__all__ lists them.
__all__ += rows.__all__

#: Every capability; the in-repo engines declare them all.
ALL_CAPABILITIES: frozenset[Capability] = frozenset(Capability)
