"""Notifications on SQLite (SPEC §10).

A notification is a row in ``__alkstore_notifications``, inserted in the
writer's transaction, so it exists only after commit (T-3). The wake watcher
sees the commit and hands new rows to the listeners of their channel (N-1).
The table is pruned to the ``notifications_cap`` newest rows each time a
store opens (N-3).
"""

from __future__ import annotations

from typing import Any

from alkstore.engine import QueueListener, check_channels
from alkstore.names import MAX_NOTIFICATION_BYTES, encode_payload, validate_name
from alkstore.protocols import Listener

from . import _sql
from ._core import StoreCore
from ._time import now_us

__all__ = ["NotifyMixin"]


class NotifyMixin(StoreCore):
    """``store.notify`` and ``store.listen``."""

    def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        """Send *payload* to the listeners of *channel* when the write commits."""
        self._check_open()
        name = validate_name(channel, "channel")
        text = encode_payload(payload, limit=MAX_NOTIFICATION_BYTES, what="notification payload")
        with self._write(tx) as conn:
            conn.execute(_sql.NOTIFY, {"channel": name, "payload": text, "now": now_us()})

    def listen(self, *channels: str) -> Listener:
        """A listener for *channels*, listening from this call on (N-2)."""
        self._check_open()
        listener = QueueListener(check_channels(channels), self._remove_listener)
        self._add_listener(listener)
        return listener
