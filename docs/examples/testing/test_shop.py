"""The shop's tests, written with nothing but alkstore's pytest plugin.

``store`` and ``async_store`` come from the plugin (no conftest.py needed):
a fresh store per test. ``drain`` runs the handler the way the worker would,
without waiting for any retry's backoff. Run with ``pytest``; set
``ALKSTORE_TEST_URL=postgresql://...`` to run the same tests on PostgreSQL.
"""

import time

import pytest
import shop

from alkstore import JobState
from alkstore.testing import adrain, drain


@pytest.fixture(autouse=True)
def mailer(monkeypatch):
    fresh = shop.Mailer()
    monkeypatch.setattr(shop, "MAILER", fresh)
    # Nothing in a drain sleeps: make sure of it.
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail(f"slept {s} s"))
    return fresh


def test_an_order_is_confirmed(store, mailer):
    shop.place_order(store, 1, "ada@example.com")

    report = drain(store.queue(shop.QUEUE), shop.send_confirmation)

    assert len(report.acked) == 1
    assert mailer.sent == ["ada@example.com: order 1 confirmed"]


def test_a_full_mailbox_is_retried_on_the_backoff_curve(store, mailer):
    mailer.busy_for = 2
    job_id = shop.place_order(store, 2, "bob@example.com")

    report = drain(store.queue(shop.QUEUE), shop.send_confirmation)

    assert [r.outcome for r in report.runs] == ["retried", "retried", "acked"]
    assert [r.error for r in report.retried] == ["ConnectionError: mailbox full"] * 2
    # The curve's ceilings for backoff_base_s=30: 30 s, then 60 s (with jitter).
    first, second = report.delays
    assert 15 <= first <= 30 and 30 <= second <= 60
    assert mailer.sent == ["bob@example.com: order 2 confirmed"]
    assert store.queue(shop.QUEUE).get_job(job_id) is None


def test_a_mailbox_that_stays_full_ends_in_the_dead_letters(store, mailer):
    mailer.busy_for = 100
    job_id = shop.place_order(store, 3, "cy@example.com")

    report = drain(store.queue(shop.QUEUE), shop.send_confirmation)

    assert report.ran == shop.OPTS.max_attempts
    assert len(report.dead) == 1
    dead = store.queue(shop.QUEUE).get_job(job_id)
    assert dead.state is JobState.DEAD
    assert dead.last_error == "ConnectionError: mailbox full"


def test_an_order_without_address_fails_at_once(store, mailer):
    shop.place_order(store, 4, None)

    report = drain(store.queue(shop.QUEUE), shop.send_confirmation)

    assert report.ran == 1
    assert report.dead[0].error == "order has no e-mail address"
    assert mailer.sent == []


def test_an_unpaid_order_waits_an_hour_each_time(store, mailer):
    shop.place_order(store, -5, "dee@example.com")

    report = drain(store.queue(shop.QUEUE), shop.send_confirmation)

    assert report.delays == [3600.0] * (shop.OPTS.max_attempts - 1)
    assert report.dead[0].error == "order not paid yet"


def test_each_test_starts_with_an_empty_store(store):
    assert store.queue_stats() == []


@pytest.mark.anyio
async def test_the_async_face(async_store, mailer):
    mailer.busy_for = 1
    await shop.place_order_async(async_store, 6, "eve@example.com")

    report = await adrain(async_store.queue(shop.QUEUE), shop.send_confirmation_async)

    assert [r.outcome for r in report.runs] == ["retried", "acked"]
    assert mailer.sent == ["eve@example.com: order 6 confirmed"]
