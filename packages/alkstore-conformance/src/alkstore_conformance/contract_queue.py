"""Queues (Q-1..Q-19, C-5..C-8): one mixin per operation, and
:class:`QueueContract`, which holds them all.

An engine author who runs ``-k QueueContract`` gets every queue test; ``-k
QueueClaimContract`` (or ``QueueEnqueueContract``, ``QueueSettleContract``,
``QueueInspectContract``, ``QueueSweepContract``, ``QueueWaitContract``) gets
the tests of one operation. The helpers the modules share are in
:mod:`alkstore_conformance._queue_helpers`.
"""

from __future__ import annotations

from .contract_queue_claim import QueueClaimContract
from .contract_queue_enqueue import QueueEnqueueContract
from .contract_queue_inspect import QueueInspectContract
from .contract_queue_settle import QueueSettleContract
from .contract_queue_sweep import QueueSweepContract
from .contract_queue_wait import QueueWaitContract

__all__ = [
    "QueueClaimContract",
    "QueueContract",
    "QueueEnqueueContract",
    "QueueInspectContract",
    "QueueSettleContract",
    "QueueSweepContract",
    "QueueWaitContract",
]


class QueueContract(
    QueueEnqueueContract,
    QueueClaimContract,
    QueueSettleContract,
    QueueInspectContract,
    QueueSweepContract,
    QueueWaitContract,
):
    """Queues (Q-1..Q-19, C-5..C-8): every operation."""
