"""Notifications: fire-and-forget messages to whoever listens, after commit."""

from __future__ import annotations

import alkstore

store = alkstore.open()

with store.listen("cache-invalidation") as listener:
    with store.transaction() as tx:
        store.notify("cache-invalidation", {"key": "user:42"}, tx=tx)
        # Not delivered yet: notifications follow the commit.
    note = listener.get(timeout_s=5)
    print("received", note)
    assert note is not None and note.payload == {"key": "user:42"}
store.close()
