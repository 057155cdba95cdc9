"""The CLI shows a job's progress checkpoint (Q-28): ``alkstore job --queue Q
ID`` prints it as JSON, like the payload, and ``--json`` carries it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import QueueOpts, Store


@pytest.mark.clause("Q-28")
def test_job_shows_the_progress_checkpoint(
    run_cli: Callable[..., tuple[int, str, str]], url: str, store: Store
) -> None:
    q = store.queue("imports", QueueOpts(max_attempts=1))
    job_id, plain_id = q.enqueue_many(["file.csv", "other.csv"])
    jobs = {j.payload: j for j in q.claim_batch("w", 2)}
    assert jobs["file.csv"].progress({"rows": 1200, "file": "file.csv"})
    assert jobs["file.csv"].fail("disk full")
    code, out, err = run_cli("--url", url, "job", "--queue", "imports", str(job_id), "--json")
    assert (code, err) == (0, "")
    data: dict[str, Any] = json.loads(out)
    assert (data["state"], data["progress"]) == ("dead", {"rows": 1200, "file": "file.csv"})
    code, out, err = run_cli("--url", url, "job", "--queue", "imports", str(job_id))
    assert (code, err) == (0, "")
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["progress"].split(None, 1)[1] == '{"rows": 1200, "file": "file.csv"}'
    code, out, err = run_cli("--url", url, "job", "--queue", "imports", str(plain_id))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["progress"].split(None, 1)[1] == "-"
