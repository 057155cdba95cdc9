"""Locks: one holder at a time, silent expiry, fencing tokens."""

from __future__ import annotations

import alkstore

store = alkstore.open()

lock = store.lock("nightly-backup", ttl_s=60, owner="host-a")
assert lock is not None
print("host-a holds it with token", lock.token)

# Another owner is refused while host-a holds it.
assert store.lock("nightly-backup", ttl_s=60, owner="host-b") is None

with lock:  # released on exit, even on an exception
    lock.renew()  # extend while working; False once it lapsed
    # Pass lock.token to what you write to: it only grows, so a store that
    # remembers the highest token seen can refuse a holder whose lock expired.

second = store.lock("nightly-backup", ttl_s=60, owner="host-b")
assert second is not None and second.token > lock.token
print("host-b took over with token", second.token)
second.release()
store.close()
