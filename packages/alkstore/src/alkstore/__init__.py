"""alkstore: durable jobs, streams, locks, a cron scheduler and a transactional
outbox inside the database an application already has.

>>> import alkstore
>>> store = alkstore.open("sqlite:///app.db")          # doctest: +SKIP
>>> store.queue("emails").enqueue({"to": "a@example.com"})  # doctest: +SKIP
1
"""

from __future__ import annotations

from . import backoff, errors, specs
from ._aopen import open_async
from ._open import DEFAULT_URL, installed_schemes, open
from ._version import __version__
from .errors import *  # noqa: F403
from .protocols import (
    AsyncCursorLike,
    AsyncJob,
    AsyncListener,
    AsyncLock,
    AsyncOutbox,
    AsyncQueue,
    AsyncRateLimit,
    AsyncStore,
    AsyncStream,
    AsyncTx,
    Capability,
    CursorLike,
    Job,
    Listener,
    Lock,
    Outbox,
    Queue,
    RateLimit,
    Store,
    Stream,
    Tx,
)
from .types import (
    ConsumerLag,
    Enqueued,
    EnqueueOpts,
    Event,
    JobInfo,
    JobResult,
    JobState,
    LockInfo,
    Notification,
    QueueOpts,
    QueueStats,
    Schedule,
    StreamStats,
    SweepResult,
    WorkerCount,
    WorkerInfo,
)
from .worker import AsyncWorker, Fail, Retry, Worker

__all__ = [
    "DEFAULT_URL",
    "AsyncCursorLike",
    "AsyncJob",
    "AsyncListener",
    "AsyncLock",
    "AsyncOutbox",
    "AsyncQueue",
    "AsyncRateLimit",
    "AsyncStore",
    "AsyncStream",
    "AsyncTx",
    "AsyncWorker",
    "Capability",
    "ConsumerLag",
    "CursorLike",
    "EnqueueOpts",
    "Enqueued",
    "Event",
    "Fail",
    "Job",
    "JobInfo",
    "JobResult",
    "JobState",
    "Listener",
    "Lock",
    "LockInfo",
    "Notification",
    "Outbox",
    "Queue",
    "QueueOpts",
    "QueueStats",
    "RateLimit",
    "Retry",
    "Schedule",
    "Store",
    "Stream",
    "StreamStats",
    "SweepResult",
    "Tx",
    "Worker",
    "WorkerCount",
    "WorkerInfo",
    "__version__",
    "backoff",
    "installed_schemes",
    "open",
    "open_async",
    "specs",
]
# And every error, as the errors module's __all__ lists them.
__all__ += errors.__all__
