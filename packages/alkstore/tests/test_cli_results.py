"""The CLI shows kept results (RS-1): ``alkstore job QUEUE ID`` of a done job
and ``alkstore jobs QUEUE --state done``; an id it does not find says that an
acked job is kept only with ``result_ttl_s``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import QueueOpts, Store


def _done_job(store: Store) -> int:
    q = store.queue("emails", QueueOpts(result_ttl_s=3600))
    job_id = q.enqueue({"to": "a@example.com"})
    job = q.claim("w")
    assert job is not None and job.ack(result={"sent": True, "id": "m-1"})
    return job_id


@pytest.mark.clause("RS-1")
def test_job_shows_a_done_jobs_result(
    run_cli: Callable[..., tuple[int, str, str]], url: str, store: Store
) -> None:
    job_id = _done_job(store)
    code, out, err = run_cli("--url", url, "job", "emails", str(job_id), "--json")
    assert (code, err) == (0, "")
    data: dict[str, Any] = json.loads(out)
    assert data["state"] == "done"
    assert data["result"] == {"sent": True, "id": "m-1"}
    assert data["finished_at"] is not None and data["result_ttl_s"] == 3600.0
    code, out, _ = run_cli("--url", url, "job", "emails", str(job_id))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["state"].split()[1] == "done"
    assert '{"sent": true, "id": "m-1"}' in lines["result"]


@pytest.mark.clause("RS-1")
def test_jobs_lists_done_jobs(
    run_cli: Callable[..., tuple[int, str, str]], url: str, store: Store
) -> None:
    job_id = _done_job(store)
    code, out, err = run_cli("--url", url, "jobs", "emails", "--state", "done", "--json")
    assert (code, err) == (0, "")
    assert [(j["id"], j["result"]) for j in json.loads(out)] == [
        (job_id, {"sent": True, "id": "m-1"})
    ]
    code, out, _ = run_cli("--url", url, "jobs", "emails", "--state", "done")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert "FINISHED_AT" in header and "RESULT" in header
    assert row.split()[:2] == [str(job_id), "done"]


@pytest.mark.clause("RS-1")
def test_job_of_an_acked_job_without_the_stamp_says_why_it_is_gone(
    run_cli: Callable[..., tuple[int, str, str]], url: str, store: Store
) -> None:
    q = store.queue("emails")
    job_id = q.enqueue(1)
    job = q.claim("w")
    assert job is not None and job.ack()
    code, out, err = run_cli("--url", url, "job", "emails", str(job_id))
    assert code == 1 and out == ""
    assert f"no job {job_id} in queue 'emails'" in err
    assert "result_ttl_s" in err
    assert len(err.strip().splitlines()) == 1
