"""The transactional outbox: record a message with your data, deliver it later."""

from __future__ import annotations

import threading

import alkstore

store = alkstore.open()
webhooks = store.outbox("webhooks")

with store.transaction() as tx:
    tx.execute("CREATE TABLE IF NOT EXISTS payments (amount INTEGER NOT NULL)")
    tx.execute("INSERT INTO payments (amount) VALUES (1200)")
    webhooks.put({"event": "payment.succeeded", "amount": 1200}, tx=tx)

delivered: list[object] = []
stop = threading.Event()


def deliver(payload: object) -> None:
    # POST it somewhere; an exception here retries with backoff (5 attempts).
    delivered.append(payload)
    stop.set()


webhooks.run(deliver, stop=stop)  # usually in its own thread or process
print("delivered", delivered)
assert delivered == [{"event": "payment.succeeded", "amount": 1200}]
store.close()
