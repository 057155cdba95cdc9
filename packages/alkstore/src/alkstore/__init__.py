"""alkstore: durable jobs, streams, locks, a cron scheduler and a transactional
outbox inside the database an application already has.

>>> import alkstore
>>> store = alkstore.open("sqlite:///app.db")          # doctest: +SKIP
>>> store.queue("emails").enqueue({"to": "a@example.com"})  # doctest: +SKIP
1
"""

from __future__ import annotations

from . import backoff, specs
from ._open import DEFAULT_URL, installed_schemes, open
from .errors import (
    AlkstoreError,
    EngineError,
    InvalidArgument,
    InvalidSpec,
    ReservedName,
    SchemaVersionError,
    StoreClosed,
    TransientError,
    UnsupportedOperation,
)
from .protocols import Capability, Job, Listener, Lock, Outbox, Queue, Store, Stream, Tx
from .types import (
    EnqueueOpts,
    Event,
    JobInfo,
    JobState,
    Notification,
    QueueOpts,
    QueueStats,
    Schedule,
    SweepResult,
)
from .worker import Fail, Retry, Worker

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL",
    "AlkstoreError",
    "Capability",
    "EngineError",
    "EnqueueOpts",
    "Event",
    "Fail",
    "InvalidArgument",
    "InvalidSpec",
    "Job",
    "JobInfo",
    "JobState",
    "Listener",
    "Lock",
    "Notification",
    "Outbox",
    "Queue",
    "QueueOpts",
    "QueueStats",
    "ReservedName",
    "Retry",
    "Schedule",
    "SchemaVersionError",
    "Store",
    "StoreClosed",
    "Stream",
    "SweepResult",
    "TransientError",
    "Tx",
    "UnsupportedOperation",
    "Worker",
    "__version__",
    "backoff",
    "installed_schemes",
    "open",
    "specs",
]
