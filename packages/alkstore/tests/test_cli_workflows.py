"""The CLI shows waiting jobs (WF-1): ``alkstore job --queue Q ID`` names a
waiting job's unfinished parents, ``alkstore jobs --queue Q --state waiting``
lists them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import EnqueueOpts, Store


def _waiting_job(store: Store) -> tuple[int, int, int]:
    q = store.queue("reports")
    a, b = q.enqueue_many(["a", "b"])
    return a, b, q.enqueue({"report": 1}, EnqueueOpts(after=(a, b)))


@pytest.mark.clause("WF-1")
def test_job_shows_a_waiting_jobs_parents(
    run_cli: Callable[..., tuple[int, str, str]], url: str, store: Store
) -> None:
    a, b, child = _waiting_job(store)
    code, out, err = run_cli("--url", url, "job", "--queue", "reports", str(child), "--json")
    assert (code, err) == (0, "")
    data: dict[str, Any] = json.loads(out)
    assert (data["state"], data["waiting_on"]) == ("waiting", [a, b])
    code, out, err = run_cli("--url", url, "job", "--queue", "reports", str(child))
    assert (code, err) == (0, "")
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["state"].split()[1] == "waiting"
    assert lines["waiting_on"].split(None, 1)[1] == f"{a}, {b}"
    code, out, err = run_cli("--url", url, "job", "--queue", "reports", str(a))
    assert code == 0 and "waiting_on" not in out


@pytest.mark.clause("WF-1")
def test_jobs_lists_waiting_jobs_with_their_parents(
    run_cli: Callable[..., tuple[int, str, str]], url: str, store: Store
) -> None:
    a, b, child = _waiting_job(store)
    code, out, err = run_cli("--url", url, "jobs", "--queue", "reports", "--state", "waiting")
    assert (code, err) == (0, "")
    header, row = out.splitlines()[:2]
    assert header.split()[-1] == "WAITING_ON"
    assert row.split()[0] == str(child) and row.rstrip().endswith(f"{a}, {b}")
    code, out, err = run_cli(
        "--url", url, "jobs", "--queue", "reports", "--state", "waiting", "--json"
    )
    assert [j["id"] for j in json.loads(out)] == [child]
