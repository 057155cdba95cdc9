"""Queues (Q-1..Q-19, C-5..C-8)."""

from __future__ import annotations

from ._base import ContractBase


class QueueContract(ContractBase):
    """Queues (Q-1..Q-19, C-5..C-8)."""
