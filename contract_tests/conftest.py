"""Fixtures shared by the contract wirings."""

from __future__ import annotations

from .pg_server import pg_database, pg_url, scratch_database

__all__ = ["pg_database", "pg_url", "scratch_database"]
