"""Streams: an append-only log with gapless offsets and consumer offsets."""

from __future__ import annotations

import alkstore

store = alkstore.open()
orders = store.stream("orders")

# Publish (inside a transaction with your own rows, if you like: tx=...).
first = orders.publish({"order": 1, "status": "created"}, key="order-1")
orders.publish({"order": 1, "status": "paid"}, key="order-1")
orders.publish({"order": 2, "status": "created"}, key="order-2")

# A consumer reads from its committed offset and commits as it goes.
after = orders.offset("billing")
for event in orders.read(after=after, limit=100):
    print(event.offset, event.key, event.payload)
    orders.commit("billing", event.offset)

print("billing is at", orders.offset("billing"))
# wait() blocks until something past the offset exists (or the timeout).
print("more events?", orders.wait(orders.offset("billing"), timeout_s=0.1))

assert orders.offset("billing") == first + 2
store.close()
