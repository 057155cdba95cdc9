"""``StoreContract``: the whole suite in one class an engine subclasses."""

from __future__ import annotations

from .contract_async import AsyncContract
from .contract_basics import BasicsContract
from .contract_coverage import CoverageContract
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

__all__ = ["StoreContract"]


class StoreContract(
    LifecycleContract,
    BasicsContract,
    ErrorContract,
    QueueContract,
    SettleContract,
    DeadLetterContract,
    ResultsContract,
    WorkflowContract,
    ProgressContract,
    JobControlContract,
    ReplaceContract,
    OperateContract,
    TransactionContract,
    TracingContract,
    OutboxContract,
    StreamContract,
    LockContract,
    NotificationContract,
    SchedulerContract,
    WorkerContract,
    WorkersContract,
    ScopingContract,
    HardeningContract,
    AsyncContract,
    FacesContract,
    SeamContract,
    SelfCheckContract,
    CoverageContract,
):
    """Every area of the contract. Subclass it in one test file and override
    the ``store_factory`` fixture::

        import pytest
        from alkstore_conformance import StoreContract, StoreFactory

        class TestMyEngine(StoreContract):
            @pytest.fixture
            def store_factory(self, tmp_path):
                return StoreFactory(f"myengine:///{tmp_path}/db")
    """
