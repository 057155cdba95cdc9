"""The outbox (Q-20)."""

from __future__ import annotations

from ._base import ContractBase


class OutboxContract(ContractBase):
    """The outbox (Q-20)."""
