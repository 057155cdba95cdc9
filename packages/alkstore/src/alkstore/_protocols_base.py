"""What the protocols of both faces share: nothing here does I/O.

The protocols themselves are in :mod:`alkstore.protocols` (the public
module); this one holds what is the same on the sync and the async face.
"""

from __future__ import annotations

from ._strenum import StrEnum

__all__ = ["Capability"]


class Capability(StrEnum):
    """What an engine declares it supports (CF-1). An operation of an
    undeclared capability raises :class:`~alkstore.errors.UnsupportedOperation`."""

    QUEUES = "queues"
    STREAMS = "streams"
    LOCKS = "locks"
    SCHEDULER = "scheduler"
    NOTIFICATIONS = "notifications"
    OUTBOX = "outbox"
    NATIVE_TRANSACTIONS = "native_transactions"
    CROSS_PROCESS_WAKES = "cross_process_wakes"
    ASYNC = "async"
    DEAD_LETTER_ADMIN = "dead_letter_admin"
    UNIQUE_KEYS = "unique_keys"
    BOUNDED_QUEUES = "bounded_queues"
    GROUPS = "groups"
    RATE_LIMITS = "rate_limits"
    RESULTS = "results"
    WORKFLOWS = "workflows"
    #: Q-29: ``enqueue_unique(on_conflict="replace", debounce_s=...)``.
    REPLACE_DEBOUNCE = "replace_debounce"
    PROGRESS = "progress"
    PAUSE = "pause"
    RUN_NOW = "run_now"
    WORKERS = "workers"
