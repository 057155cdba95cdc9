"""The worker runtime (W-1..W-5)."""

from __future__ import annotations

from ._base import ContractBase


class WorkerContract(ContractBase):
    """The worker runtime (W-1..W-5)."""
