"""Rows no reader can decode, written around the contract (C-3).

The contract's writes refuse such payloads (``contract_hardening``); these
tests put them in the tables directly, the way a bug in another writer or a
hand-edited row would, and check that they never break delivery for anyone:
a claim moves the row to dead with ``last_error = "undecodable payload"`` and
hands out the other jobs; listings, reads and listeners show the payload as
``None``; the wake watcher / listener thread keeps running.
"""

from __future__ import annotations

import threading
import time

import pytest

from alkstore import JobState, QueueOpts
from alkstore.names import UNDECODABLE_ERROR

from .engines import Engine, engine, poison_texts

__all__ = ["engine"]

POISONS = poison_texts()
LONG_S = 300.0


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_claim_batch_dead_letters_the_undecodable_job_and_hands_out_the_rest(
    engine: Engine, poison: str
) -> None:
    with engine.factory.open() as store:
        q = store.queue("poisoned", QueueOpts(visibility_timeout_s=LONG_S, max_attempts=2))
        ids = q.enqueue_many([{"n": i} for i in range(5)])
        engine.raw.set_job_payload(ids[2], POISONS[poison])
        jobs = q.claim_batch("w", 5)
        assert sorted(j.id for j in jobs) == sorted(ids[:2] + ids[3:])
        assert all(j.attempts == 1 and j.payload is not None for j in jobs)
        info = q.get_job(ids[2])
        assert info is not None and info.state is JobState.DEAD
        assert info.last_error == UNDECODABLE_ERROR and info.payload is None
        assert q.ack_batch(jobs) == 4
        assert [(i.id, i.payload) for i in q.list_jobs(JobState.DEAD)] == [(ids[2], None)]


def test_single_claims_skip_the_undecodable_job(engine: Engine) -> None:
    with engine.factory.open() as store:
        q = store.queue("poisoned", QueueOpts(visibility_timeout_s=LONG_S))
        first, second = q.enqueue_many(["first", "second"])
        engine.raw.set_job_payload(first, POISONS["deep"])
        job = q.claim("w")
        assert job is not None and (job.id, job.payload, job.attempts) == (second, "second", 1)
        assert q.claim("w") is None
        assert q.stats().dead == 1


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_listings_show_an_undecodable_job_payload_as_none(engine: Engine, poison: str) -> None:
    with engine.factory.open() as store:
        q = store.queue("poisoned")
        job_id = q.enqueue("x")
        engine.raw.set_job_payload(job_id, POISONS[poison])
        info = q.get_job(job_id)
        assert info is not None and info.payload is None and info.state is JobState.PENDING
        assert [i.payload for i in q.list_jobs(JobState.PENDING)] == [None]
        assert q.stats().pending == 1


def test_stream_reads_and_schedules_show_undecodable_payloads_as_none(engine: Engine) -> None:
    with engine.factory.open() as store:
        s = store.stream("poisoned")
        s.publish("a")
        s.publish("b")
        engine.raw.set_event_payload("poisoned", 1, POISONS["deep"])
        assert [(e.offset, e.payload) for e in s.read()] == [(1, None), (2, "b")]
        store.schedule("poisoned", "@hourly", "q", {"ok": 1})
        engine.raw.set_schedule_payload("poisoned", POISONS["long-int"])
        assert [(x.name, x.payload) for x in store.schedules()] == [("poisoned", None)]


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_listener_survives_an_undecodable_notification(engine: Engine, poison: str) -> None:
    with engine.factory.open() as store, store.listen("ch") as listener:
        engine.raw.send_notification("ch", POISONS[poison])
        store.notify("ch", "after")
        got = [listener.get(5.0), listener.get(5.0)]
        payloads = [n.payload for n in got if n is not None]
        # The undecodable one shows as None (or is dropped); the next arrives.
        assert payloads in (["after"], [None, "after"])
        # A listener started afterwards works too.
        with store.listen("ch2") as late:
            store.notify("ch2", "late")
            note = late.get(5.0)
        assert note is not None and note.payload == "late"


def test_blocked_claims_keep_their_wakes_after_an_undecodable_notification(
    engine: Engine,
) -> None:
    """The reported failure: one poison notification killed the wake watcher
    (SQLite) or the listener thread (PostgreSQL), and blocked claims fell back
    to the 5 s poll."""
    with engine.factory.open() as store, store.listen("ch") as listener:
        engine.raw.send_notification("ch", POISONS["deep"])
        store.notify("ch", "sync")
        while (note := listener.get(5.0)) is not None and note.payload != "sync":
            pass
        q = store.queue("wakes")
        got: list[object] = []
        claimer = threading.Thread(target=lambda: got.append(q.claim("w", wait_s=10)))
        claimer.start()
        time.sleep(0.3)
        started = time.monotonic()
        q.enqueue("wake up")
        claimer.join(15)
        waited = time.monotonic() - started
        assert got and got[0] is not None
        assert waited < 2.0, f"the blocked claim waited {waited:.1f} s: wakes were lost"
