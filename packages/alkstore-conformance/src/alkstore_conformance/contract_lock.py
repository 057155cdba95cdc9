"""Locks (L-1..L-4)."""

from __future__ import annotations

from ._base import ContractBase


class LockContract(ContractBase):
    """Locks (L-1..L-4)."""
