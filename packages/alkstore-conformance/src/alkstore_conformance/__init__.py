"""The alkstore conformance suite (SPEC §12).

An engine author subclasses :class:`StoreContract` in one test file and
overrides the ``store_factory`` fixture; or runs the whole suite against a
URL with ``python -m alkstore_conformance URL [pytest args]``. See
``docs/implementing-an-engine.md``.

Names are imported lazily: pytest loads this package's plugin in every
session of an environment where it is installed, and that must not import
the suite itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ContractBase": "._base",
    "eventually": "._base",
    "spawn": "._base",
    "unique": "._base",
    "HOOKS_GROUP": "._factory",
    "EngineHooks": "._factory",
    "StoreFactory": "._factory",
    "hooks_for": "._factory",
    "StoreContract": ".contract",
    "AsyncContract": ".contract_async",
    "BasicsContract": ".contract_basics",
    "CoverageContract": ".contract_coverage",
    "DeadLetterContract": ".contract_deadletters",
    "clauses_of": ".contract_coverage",
    "rule_ids": ".contract_coverage",
    "ErrorContract": ".contract_errors",
    "FacesContract": ".contract_faces",
    "HardeningContract": ".contract_hardening",
    "JobControlContract": ".contract_jobcontrol",
    "LockContract": ".contract_lock",
    "NotificationContract": ".contract_notify",
    "OperateContract": ".contract_operate",
    "OutboxContract": ".contract_outbox",
    "ProgressContract": ".contract_progress",
    "QueueContract": ".contract_queue",
    "ReplaceContract": ".contract_replace",
    "ResultsContract": ".contract_results",
    "SchedulerContract": ".contract_scheduler",
    "ScopingContract": ".contract_scoping",
    "SeamContract": ".contract_seam",
    "SelfCheckContract": ".contract_selfcheck",
    "SettleContract": ".contract_settle",
    "LifecycleContract": ".contract_store",
    "StreamContract": ".contract_stream",
    "TracingContract": ".contract_tracing",
    "TransactionContract": ".contract_transaction",
    "WorkerContract": ".contract_worker",
    "WorkersContract": ".contract_workers",
    "WorkflowContract": ".contract_workflows",
}

__all__ = [
    "HOOKS_GROUP",
    "AsyncContract",
    "BasicsContract",
    "ContractBase",
    "CoverageContract",
    "DeadLetterContract",
    "EngineHooks",
    "ErrorContract",
    "FacesContract",
    "HardeningContract",
    "JobControlContract",
    "LifecycleContract",
    "LockContract",
    "NotificationContract",
    "OperateContract",
    "OutboxContract",
    "ProgressContract",
    "QueueContract",
    "ReplaceContract",
    "ResultsContract",
    "SchedulerContract",
    "ScopingContract",
    "SeamContract",
    "SelfCheckContract",
    "SettleContract",
    "StoreContract",
    "StoreFactory",
    "StreamContract",
    "TracingContract",
    "TransactionContract",
    "WorkerContract",
    "WorkersContract",
    "WorkflowContract",
    "__version__",
    "clauses_of",
    "eventually",
    "hooks_for",
    "rule_ids",
    "spawn",
    "unique",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'alkstore_conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from ._base import ContractBase, eventually, spawn, unique
    from ._factory import HOOKS_GROUP, EngineHooks, StoreFactory, hooks_for
    from .contract import StoreContract
    from .contract_async import AsyncContract
    from .contract_basics import BasicsContract
    from .contract_coverage import CoverageContract, clauses_of, rule_ids
    from .contract_deadletters import DeadLetterContract
    from .contract_errors import ErrorContract
    from .contract_faces import FacesContract
    from .contract_hardening import HardeningContract
    from .contract_jobcontrol import JobControlContract
    from .contract_lock import LockContract
    from .contract_notify import NotificationContract
    from .contract_operate import OperateContract
    from .contract_outbox import OutboxContract
    from .contract_progress import ProgressContract
    from .contract_queue import QueueContract
    from .contract_replace import ReplaceContract
    from .contract_results import ResultsContract
    from .contract_scheduler import SchedulerContract
    from .contract_scoping import ScopingContract
    from .contract_seam import SeamContract
    from .contract_selfcheck import SelfCheckContract
    from .contract_settle import SettleContract
    from .contract_store import LifecycleContract
    from .contract_stream import StreamContract
    from .contract_tracing import TracingContract
    from .contract_transaction import TransactionContract
    from .contract_worker import WorkerContract
    from .contract_workers import WorkersContract
    from .contract_workflows import WorkflowContract
