"""The scheduler (SC-1..SC-6)."""

from __future__ import annotations

from ._base import ContractBase


class SchedulerContract(ContractBase):
    """The scheduler (SC-1..SC-6)."""
