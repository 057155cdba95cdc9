"""Notifications on PostgreSQL (SPEC §10): ``pg_notify`` in the writer's
transaction, delivered by the server at commit, never for a rollback (N-1,
T-3), received by the store's listener connection.

A channel name of up to 200 characters maps to the PostgreSQL channel
``alkn_`` + a hash of (schema, name), which fits the 63-byte identifier
limit and keeps stores on other schemas apart (C-7). PostgreSQL folds
identical notifications of one transaction into one; every notification
is its own (N-1), so the payload travels behind a random tag:
``<tag>:<json>``.
"""

from __future__ import annotations

import secrets
from typing import Any

from alkstore.engine import QueueListener, check_channels
from alkstore.names import MAX_NOTIFICATION_BYTES, encode_payload, validate_name
from alkstore.protocols import Listener

from ._core import StoreCore, run, user_channel

__all__ = ["NotifyMixin"]


class NotifyMixin(StoreCore):
    """``store.notify`` and ``store.listen``."""

    def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        """Send *payload* to the listeners of *channel* when the write commits
        (N-1, T-3); at most 7,900 bytes encoded (C-3)."""
        self._check_open()
        name = validate_name(channel, "channel")
        text = encode_payload(payload, limit=MAX_NOTIFICATION_BYTES, what="notification payload")
        params = {
            "channel": user_channel(self._schema, name),
            "payload": f"{secrets.token_hex(6)}:{text}",
        }
        with self._conn(tx) as conn:
            run(conn, self._sql.notify, params)

    def listen(self, *channels: str) -> Listener:
        """A listener for *channels*, listening when this returns (N-2)."""
        self._check_open()
        listener = QueueListener(check_channels(channels), self._remove_listener)
        self._add_listener(listener)
        return listener
