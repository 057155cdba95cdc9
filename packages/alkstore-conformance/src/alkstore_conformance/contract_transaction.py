"""Transactions (T-1..T-4)."""

from __future__ import annotations

from ._base import ContractBase


class TransactionContract(ContractBase):
    """Transactions (T-1..T-4)."""
