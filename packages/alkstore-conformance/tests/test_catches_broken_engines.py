"""CF-3: the suite fails deliberately broken engines.

Each variant is the in-repo SQLite engine with one statement replaced by a
subtly wrong one: the kind of bug the peers in LESSONS.md shipped. The queue
and basics areas of the suite run against it in a fresh pytest process and
must fail. (The unbroken engine passes the whole suite in contract_tests/.)
"""

from __future__ import annotations

import textwrap

import pytest

from alkstore_sqlite import _sql

_FENCE_NO_DEADLINE = "id = :id AND claims = :claim AND state = 'processing'"

BROKEN: dict[str, dict[str, str]] = {
    # Acks land after the claim lapsed: a rescued job is completed twice.
    "ack_ignores_deadline": {
        "ACK": f"DELETE FROM __alkstore_jobs WHERE {_FENCE_NO_DEADLINE} RETURNING grp",
        "ACK_MANY": _sql.ACK_MANY.replace("AND deadline > :now", "AND :now = :now"),
    },
    # FIFO only: priorities are ignored (one walk over every level, by time).
    "claim_ignores_priority": {
        **{
            name: getattr(_sql, name)
            .replace(f"priority = ({_sql.TOP_PRIORITY}) AND ", "")
            .replace("ORDER BY priority DESC, ready_at, id", "ORDER BY ready_at, id")
            for name in ("CLAIM", "CLAIM_FLAGGED")
        },
        "NEXT_PRIORITY": _sql.NEXT_PRIORITY.replace("WHERE", "WHERE 0 AND", 1),
    },
    # A reclaim does not count as an attempt: a crashing job loops forever.
    "reclaim_does_not_count": {
        name: getattr(_sql, name).replace(
            "attempts = attempts + 1",
            "attempts = CASE WHEN state = 'processing' THEN attempts ELSE attempts + 1 END",
        )
        for name in ("CLAIM", "CLAIM_AT", "CLAIM_FLAGGED")
    },
    # honker's zombie hole: the sweep only looks at pending rows.
    "sweep_skips_processing": {
        "EXPIRED_TO_DEAD": _sql.EXPIRED_TO_DEAD + " AND state = 'pending'",
        "EXPIRED_DELETE": _sql.EXPIRED_DELETE.replace(
            "expires_at <= :now", "expires_at <= :now AND state = 'pending'"
        ),
    },
    # Retries are immediate whatever the curve says.
    "retry_ignores_curve": {
        "RETRY_PENDING": _sql.RETRY_PENDING.replace(
            "run_at = :run_at, ready_at = :run_at", "run_at = :now, ready_at = :now"
        )
    },
    # A late heartbeat takes the job back from a reclaimer.
    "heartbeat_accepts_late_calls": {
        "HEARTBEAT": (
            "UPDATE __alkstore_jobs SET deadline = :deadline, ready_at = :deadline "
            f"WHERE {_FENCE_NO_DEADLINE} AND :now = :now RETURNING deadline"
        )
    },
    # honker's get_job reads only live rows.
    "get_job_misses_dead_jobs": {"GET_JOB": _sql.GET_JOB.split("UNION ALL")[0]},
    # Handles not scoped to their queue.
    "cancel_not_scoped_to_queue": {
        "CANCEL": "DELETE FROM __alkstore_jobs WHERE id = :id RETURNING grp"
    },
}

#: Variants of the job-control statements, run against the dead-letter and
#: job-control areas only (the queue area passes them, and takes minutes).
BROKEN_JOB_CONTROL: dict[str, dict[str, str]] = {
    # A redrive restarts the claim counter: the old claim's handle fits the new one.
    "redrive_resets_the_claim_number": {
        "REDRIVE": _sql.REDRIVE.replace("created_at, 0, claims,", "created_at, 0, 0,")
    },
    # A purge by age counts from the enqueue instead of the death.
    "purge_ages_from_creation": {
        "PURGE_DEAD": _sql.PURGE_DEAD.replace("died_at <= :cutoff", "created_at <= :cutoff")
    },
    # A group's slots are never counted: every waiting row gets one.
    "group_slots_never_counted": {"GROUP_HOLDERS": "SELECT 0"},
    # The bound is never reached.
    "bound_never_counts": {"COUNT_UNFINISHED": "SELECT 0"},
    # Every acquire is granted: a limiter that never refuses.
    "rate_limit_grants_everything": {
        "ACQUIRE_RATE": _sql.ACQUIRE_RATE.replace(
            "granted = max(tat, :now) + :cost - :burst_t <= :now", "granted = 1"
        ).replace("WHEN max(tat, :now) + :cost - :burst_t <= :now", "WHEN 1")
    },
}

#: Variants of the kept-results statements (RS-1..RS-3), run against their area.
BROKEN_RESULTS: dict[str, dict[str, str]] = {
    # The ack deletes a stamped job and keeps nothing.
    "ack_keeps_no_result": {"ACK_KEEP": "SELECT 1", "ACK_MANY_KEEP": "SELECT 1"},
    # Results are shown past their time.
    "results_never_expire": {
        name: getattr(_sql, name).replace("keep_until > :now", ":now = :now")
        for name in ("GET_JOB", "GET_RESULT", "LIST_DONE")
    },
    # A result is read through any queue's handle.
    "result_not_scoped_to_queue": {
        "GET_RESULT": _sql.GET_RESULT.replace("AND queue = :queue", "AND :queue = :queue")
    },
}

#: Variants of the replace-and-debounce statements (Q-29), run against their area.
BROKEN_REPLACE: dict[str, dict[str, str]] = {
    # The cap is ignored: a key that never goes quiet never runs.
    "debounce_ignores_max_wait": {
        name: getattr(_sql, name).replace(_sql._HOLDER_RUN_AT, ":run_at")
        for name in ("DEBOUNCE_HOLDER", "REPLACE_HOLDER")
    },
    # A running job's payload and stamps change under its handler.
    "replace_touches_processing_holders": {
        name: getattr(_sql, name).replace("state = 'pending'", "state IN ('pending', 'processing')")
        for name in ("DEBOUNCE_HOLDER", "REPLACE_HOLDER")
    },
    # The replace moves the time but keeps the old payload.
    "replace_keeps_the_old_payload": {
        "REPLACE_HOLDER": _sql.REPLACE_HOLDER.replace("payload = :payload", "payload = payload")
    },
}

#: Variants of the progress checkpoint statements (Q-28), run against their area.
BROKEN_PROGRESS: dict[str, dict[str, str]] = {
    # A checkpoint lands whatever became of the claim.
    "progress_unfenced": {
        "PROGRESS": "UPDATE __alkstore_jobs SET progress = :progress "
        "WHERE id = :id AND :claim = :claim AND :now = :now"
    },
    # The claim hands out no checkpoint: the next attempt starts over.
    "claim_hides_checkpoint": {
        name: getattr(_sql, name).replace("result_ttl_s, progress", "result_ttl_s, NULL")
        for name in ("CLAIM", "CLAIM_AT", "CLAIM_FLAGGED")
    },
    # A job that dies loses its checkpoint.
    "dead_loses_progress": {
        name: getattr(_sql, name).replace(", progress, :last_error", ", NULL, :last_error")
        for name in ("FENCED_TO_DEAD", "EXHAUSTED_TO_DEAD", "EXPIRED_TO_DEAD")
    },
}

SUITE = """
import pytest

import alkstore_sqlite._sql
from alkstore_conformance import {mixins}, StoreFactory

BREAK = {replacements!r}


@pytest.fixture(autouse=True)
def _broken_engine(monkeypatch):
    for name, sql in BREAK.items():
        assert hasattr(alkstore_sqlite._sql, name), name
        monkeypatch.setattr(alkstore_sqlite._sql, name, sql)


class TestBrokenEngine({mixins}):
    @pytest.fixture
    def store_factory(self, tmp_path):
        return StoreFactory(f"sqlite:///{{tmp_path / 'broken.db'}}")
"""


def test_every_variant_replaces_a_real_statement() -> None:
    every = {**BROKEN, **BROKEN_JOB_CONTROL, **BROKEN_RESULTS, **BROKEN_PROGRESS, **BROKEN_REPLACE}
    for variant, replacements in every.items():
        for name, sql in replacements.items():
            assert getattr(_sql, name) != sql, f"{variant}: {name} is not changed"


_MIXINS = {
    **dict.fromkeys(BROKEN, "QueueContract, BasicsContract"),
    **dict.fromkeys(BROKEN_JOB_CONTROL, "DeadLetterContract, JobControlContract"),
    **dict.fromkeys(BROKEN_RESULTS, "ResultsContract"),
    **dict.fromkeys(BROKEN_PROGRESS, "ProgressContract"),
    **dict.fromkeys(BROKEN_REPLACE, "ReplaceContract"),
}


@pytest.mark.parametrize("variant", sorted(_MIXINS))
def test_suite_fails_a_broken_engine(pytester: pytest.Pytester, variant: str) -> None:
    replacements = {
        **BROKEN,
        **BROKEN_JOB_CONTROL,
        **BROKEN_RESULTS,
        **BROKEN_PROGRESS,
        **BROKEN_REPLACE,
    }[variant]
    suite = SUITE.format(replacements=replacements, mixins=_MIXINS[variant])
    pytester.makepyfile(test_broken=textwrap.dedent(suite))
    result = pytester.runpytest_subprocess(
        "-x", "-q", "-p", "no:cacheprovider", "-m", "not cross_process", timeout=600
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, f"{variant} passed the suite:\n{result.stdout.str()}"
