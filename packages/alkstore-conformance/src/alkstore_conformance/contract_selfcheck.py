"""The suite catches broken engines (CF-3)."""

from __future__ import annotations

from ._base import ContractBase


class SelfCheckContract(ContractBase):
    """The suite catches broken engines (CF-3)."""
