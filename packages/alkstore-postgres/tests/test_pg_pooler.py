"""Pooler mode (EN-4) behind a real PgBouncer in transaction mode with one
server connection, so that whatever a store left in the session would be
found by the next client: the whole suite runs in this mode in
``contract_tests/test_postgres_pooler.py``; these are the engine's own
checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fix_server import Opener, blocked_claim, found_url, opener

from alkstore import Capability, UnsupportedOperation
from alkstore_postgres.testing import HOOKS, provide_pgbouncer


@pytest.fixture(scope="module")
def bouncer(pg_url: str) -> Iterator[str]:
    with provide_pgbouncer(pg_url, pool_size=1) as found:
        yield found_url(found, "PgBouncer")


@pytest.fixture
def pooled(bouncer: str, request: pytest.FixtureRequest) -> Iterator[Opener]:
    """Opens pooler-mode stores through the bouncer on a fresh schema."""
    with (
        HOOKS.isolated(bouncer, {"pooler": True}, request.node.name) as (url, opts),
        opener(url, dict(opts)) as factory,
    ):
        yield factory


def _session(bouncer: str) -> tuple[Any, ...]:
    """What the (only) server connection carries in its session."""
    with psycopg.connect(bouncer, autocommit=True, prepare_threshold=None) as conn:
        row = conn.execute(
            "SELECT current_setting('lock_timeout'), "
            "(SELECT count(*) FROM pg_prepared_statements), "
            "(SELECT count(*) FROM pg_listening_channels())"
        ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.clause("EN-4")
def test_a_pooler_store_leaves_nothing_in_the_session(pooled: Opener, bouncer: str) -> None:
    store = pooled(lock_timeout_s=3)
    q = store.queue("q")
    for i in range(12):  # past psycopg's prepare threshold
        q.enqueue(i)
    for job in q.claim_batch("w", 12):
        assert job.ack()
    assert q.claim("w", wait_s=0.2) is None  # the poller, not a LISTEN
    with store.transaction() as tx:
        q.enqueue("in tx", tx=tx)
    assert _session(bouncer) == ("0", 0, 0)


@pytest.mark.clause("EN-4")
def test_a_callers_connection_through_the_pooler_gets_nothing_prepared(
    pooled: Opener, bouncer: str
) -> None:
    q = pooled().queue("q")
    with psycopg.connect(bouncer, autocommit=True) as conn:  # default prepare threshold
        for i in range(12):
            q.enqueue(i, tx=conn)
    assert q.stats().pending == 12
    assert _session(bouncer)[1] == 0


@pytest.mark.clause("EN-4")
def test_without_listen_url_notifications_are_refused(pooled: Opener) -> None:
    store = pooled()
    assert Capability.NOTIFICATIONS not in store.capabilities
    with pytest.raises(UnsupportedOperation):
        store.listen("c")
    with pytest.raises(UnsupportedOperation):
        store.notify("c", 1)


@pytest.mark.clause("EN-4")
def test_with_listen_url_notifications_and_wakes_come_by_listen(
    pooled: Opener, pg_url: str
) -> None:
    store = pooled(listen_url=pg_url)
    assert Capability.NOTIFICATIONS in store.capabilities
    with store.listen("c") as listener:
        store.notify("c", {"x": 1})
        note = listener.get(5)
    assert note is not None and note.payload == {"x": 1}


@pytest.mark.clause("EN-4")
def test_the_poller_wakes_a_blocked_claim_soon(pooled: Opener) -> None:
    waiting, producer = pooled(), pooled()
    q = waiting.queue("q")
    woken = blocked_claim(q, lambda: producer.queue("q").enqueue("late"), wait_s=20, pause_s=0.5)
    assert woken.result is not None
    assert woken.from_meanwhile < 1.5  # a poll (50 ms), not the 5 s fallback
