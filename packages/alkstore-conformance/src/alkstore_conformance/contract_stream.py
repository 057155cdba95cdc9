"""Streams (S-1..S-4)."""

from __future__ import annotations

from ._base import ContractBase


class StreamContract(ContractBase):
    """Streams (S-1..S-4)."""
