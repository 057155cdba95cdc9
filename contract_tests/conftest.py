"""Fixtures shared by the contract wirings."""

from __future__ import annotations

from .pg_server import pg_url

__all__ = ["pg_url"]
