"""Notifications (N-1..N-3)."""

from __future__ import annotations

from ._base import ContractBase


class NotificationContract(ContractBase):
    """Notifications (N-1..N-3)."""
