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

_FENCE_NO_DEADLINE = "id = :id AND attempts = :attempt AND state = 'processing'"

BROKEN: dict[str, dict[str, str]] = {
    # Acks land after the claim lapsed: a rescued job is completed twice.
    "ack_ignores_deadline": {"ACK": f"DELETE FROM __alkstore_jobs WHERE {_FENCE_NO_DEADLINE}"},
    # FIFO only: priorities are ignored.
    "claim_ignores_priority": {
        "CLAIM": _sql.CLAIM.replace("ORDER BY priority DESC, ready_at, id", "ORDER BY ready_at, id")
    },
    # A reclaim does not count as an attempt: a crashing job loops forever.
    "reclaim_does_not_count": {
        "CLAIM": _sql.CLAIM.replace(
            "attempts = attempts + 1",
            "attempts = CASE WHEN state = 'processing' THEN attempts ELSE attempts + 1 END",
        )
    },
    # honker's zombie hole: the sweep only looks at pending rows.
    "sweep_skips_processing": {
        "EXPIRED_TO_DEAD": _sql.EXPIRED_TO_DEAD + " AND state = 'pending'",
        "EXPIRED_DELETE": _sql.EXPIRED_DELETE + " AND state = 'pending'",
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
    "cancel_not_scoped_to_queue": {"CANCEL": "DELETE FROM __alkstore_jobs WHERE id = :id"},
}

SUITE = """
import pytest

import alkstore_sqlite._sql
from alkstore_conformance import BasicsContract, QueueContract, StoreFactory

BREAK = {replacements!r}


@pytest.fixture(autouse=True)
def _broken_engine(monkeypatch):
    for name, sql in BREAK.items():
        assert hasattr(alkstore_sqlite._sql, name), name
        monkeypatch.setattr(alkstore_sqlite._sql, name, sql)


class TestBrokenEngine(QueueContract, BasicsContract):
    @pytest.fixture
    def store_factory(self, tmp_path):
        return StoreFactory(f"sqlite:///{{tmp_path / 'broken.db'}}")
"""


def test_every_variant_replaces_a_real_statement() -> None:
    for variant, replacements in BROKEN.items():
        for name, sql in replacements.items():
            assert getattr(_sql, name) != sql, f"{variant}: {name} is not changed"


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_suite_fails_a_broken_engine(pytester: pytest.Pytester, variant: str) -> None:
    pytester.makepyfile(test_broken=textwrap.dedent(SUITE.format(replacements=BROKEN[variant])))
    result = pytester.runpytest_subprocess(
        "-x", "-q", "-p", "no:cacheprovider", "-m", "not cross_process", timeout=600
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, f"{variant} passed the suite:\n{result.stdout.str()}"
