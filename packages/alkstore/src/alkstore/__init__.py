"""alkstore: durable jobs, streams, locks, a cron scheduler and a transactional
outbox inside the database an application already has.

>>> import alkstore
>>> store = alkstore.open("sqlite:///app.db")          # doctest: +SKIP
>>> store.queue("emails").enqueue({"to": "a@example.com"})  # doctest: +SKIP
1
"""

from __future__ import annotations

from . import backoff, specs
from ._aopen import open_async
from ._open import DEFAULT_URL, installed_schemes, open
from ._version import __version__
from .errors import (
    AlkstoreError,
    EngineError,
    InvalidArgument,
    InvalidSpec,
    QueueFull,
    ReservedName,
    SchemaVersionError,
    StoreClosed,
    TransientError,
    UnsupportedOperation,
)
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
)
from .worker import AsyncWorker, Fail, Retry, Worker

__all__ = [
    "DEFAULT_URL",
    "AlkstoreError",
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
    "EngineError",
    "EnqueueOpts",
    "Enqueued",
    "Event",
    "Fail",
    "InvalidArgument",
    "InvalidSpec",
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
    "QueueFull",
    "QueueOpts",
    "QueueStats",
    "RateLimit",
    "ReservedName",
    "Retry",
    "Schedule",
    "SchemaVersionError",
    "Store",
    "StoreClosed",
    "Stream",
    "StreamStats",
    "SweepResult",
    "TransientError",
    "Tx",
    "UnsupportedOperation",
    "Worker",
    "__version__",
    "backoff",
    "installed_schemes",
    "open",
    "open_async",
    "specs",
]
