"""The alkstore conformance suite (SPEC §12).

An engine author subclasses :class:`StoreContract` in one test file and
overrides the ``store_factory`` fixture; or runs the whole suite against a
URL with ``python -m alkstore_conformance URL [pytest args]``. See
``docs/implementing-an-engine.md``.
"""

from __future__ import annotations

from ._base import ContractBase, eventually, spawn, unique
from ._factory import HOOKS_GROUP, EngineHooks, StoreFactory, hooks_for
from .contract import StoreContract
from .contract_basics import BasicsContract
from .contract_coverage import CoverageContract, clauses_of, rule_ids
from .contract_errors import ErrorContract
from .contract_lock import LockContract
from .contract_notify import NotificationContract
from .contract_outbox import OutboxContract
from .contract_queue import QueueContract
from .contract_scheduler import SchedulerContract
from .contract_selfcheck import SelfCheckContract
from .contract_store import LifecycleContract
from .contract_stream import StreamContract
from .contract_transaction import TransactionContract
from .contract_worker import WorkerContract

__version__ = "0.1.0"

__all__ = [
    "HOOKS_GROUP",
    "BasicsContract",
    "ContractBase",
    "CoverageContract",
    "EngineHooks",
    "ErrorContract",
    "LifecycleContract",
    "LockContract",
    "NotificationContract",
    "OutboxContract",
    "QueueContract",
    "SchedulerContract",
    "SelfCheckContract",
    "StoreContract",
    "StoreFactory",
    "StreamContract",
    "TransactionContract",
    "WorkerContract",
    "__version__",
    "clauses_of",
    "eventually",
    "hooks_for",
    "rule_ids",
    "spawn",
    "unique",
]
