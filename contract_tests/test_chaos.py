"""The chaos drain, short, on both engines: worker processes SIGKILLed at
random while they drain two queues; the history checker proves no
overlapping claims, landed ops on the latest claim only, and every job
acked once or dead with a reason that fits (``contract_tests/chaos.py``).
The full-size run is ``scripts/chaos.py``; its figures are in
``docs/reliability.md``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from .chaos import LAPSE, MAIN, DrainConfig, DrainResult, check, run_drain
from .engines import Engine, engine

__all__ = ["engine"]


@pytest.mark.cross_process
def test_chaos_drain_under_random_kills_keeps_every_promise(engine: Engine, tmp_path: Path) -> None:
    config = DrainConfig(
        url=engine.factory.url,
        opts=dict(engine.factory.opts),
        workers=4,
        jobs=1_500,
        kill_every_s=0.4,
        max_kills=30,
        lapse_jobs=10,
        limit_s=240,
        seed=7,
    )
    result = run_drain(config, str(tmp_path / "logs"))
    report = check(result)
    assert report.ok, "\n".join(report.violations[:30]) + f"\nfigures: {report.figures}"
    assert report.figures["kills"] >= 5, report.figures
    assert report.figures["claims"] >= config.jobs, report.figures
    assert report.figures.get("dead: asked to fail", 0) > 0, report.figures
    assert report.figures.get("dead: max attempts exceeded", 0) == config.lapse_jobs


# ------------------------------------------------------- the checker itself


def _history(
    events: list[dict[str, object]],
    final: Mapping[int, tuple[str, int, str | None]],
    jobs: dict[int, tuple[str, str]] | None = None,
) -> DrainResult:
    config = DrainConfig(url="sqlite:///unused.db", timeout_s=1.0, max_attempts=3)
    for ev in events:
        ev.setdefault("w", 0)
        ev.setdefault("pid", 1)
        ev.setdefault("q", MAIN)
    return DrainResult(config, events, jobs or {1: (MAIN, "plain")}, dict(final), 0, 1.0, 1)


def _claim(a: int, at: float) -> dict[str, object]:
    return {"ev": "claim", "id": 1, "a": a, "dl": at + 1.0, "t": at}


def _op(op: str, a: int, t0: float, ok: bool, pid: int = 1) -> list[dict[str, object]]:
    return [
        {"ev": "op", "op": op, "id": 1, "a": a, "t0": t0, "pid": pid},
        {"ev": "done", "op": op, "id": 1, "a": a, "ok": ok, "t1": t0 + 0.01, "pid": pid},
    ]


def test_checker_accepts_a_clean_history() -> None:
    history = [
        _claim(1, 0.0),
        *_op("ack", 1, 2.0, False),
        _claim(2, 1.5),
        *_op("ack", 2, 1.6, True),
    ]
    assert check(_history(history, {})).ok


@pytest.mark.parametrize(
    ("what", "history", "final"),
    [
        ("overlapping claims", [_claim(1, 0.0), _claim(2, 0.5), *_op("ack", 2, 0.6, True)], {}),
        (
            "claim after a landed ack",
            [_claim(1, 0.0), *_op("ack", 1, 0.1, True), _claim(2, 1.2)],
            {},
        ),
        (
            "two landed acks",
            [_claim(1, 0.0), *_op("ack", 1, 0.1, True), *_op("ack", 1, 0.2, True)],
            {},
        ),
        (
            "refused before the deadline",
            [_claim(1, 0.0), *_op("ack", 1, 0.1, False)],
            {1: ("dead", 3, "max attempts exceeded")},
        ),
        ("gone without an ack", [_claim(1, 0.0)], {}),
        ("stranded", [_claim(1, 0.0)], {1: ("processing", 1, None)}),
        (
            "dead of the wrong reason",
            [_claim(1, 0.0), *_op("fail", 1, 0.1, True)],
            {1: ("dead", 1, "asked to fail")},
        ),
        ("exhausted too early", [_claim(1, 0.0)], {1: ("dead", 1, "max attempts exceeded")}),
        ("raw error", [{"ev": "raw", "where": "claim", "type": "TypeError", "err": "x"}], {}),
    ],
)
def test_checker_catches(
    what: str, history: list[dict[str, object]], final: dict[int, tuple[str, int, str | None]]
) -> None:
    report = check(_history(history, final))
    assert not report.ok, f"the checker missed: {what}"


def test_checker_accepts_an_ack_cut_short_by_a_kill() -> None:
    history = [_claim(1, 0.0), {"ev": "op", "op": "ack", "id": 1, "a": 1, "t0": 0.1}]
    assert check(_history(history, {})).ok


def test_checker_accepts_a_retry_then_an_early_reclaim() -> None:
    history = [
        _claim(1, 0.0),
        *_op("retry", 1, 0.1, True),
        _claim(2, 0.2),
        *_op("ack", 2, 0.3, True),
    ]
    assert check(_history(history, {}, {1: (MAIN, "retry")})).ok


def test_checker_knows_the_lapse_queue_budget() -> None:
    history = [{**_claim(1, 0.0), "q": LAPSE, "dl": 0.4}, {**_claim(2, 0.5), "q": LAPSE, "dl": 0.9}]
    final = {1: ("dead", 2, "max attempts exceeded")}
    assert check(_history(history, final, {1: (LAPSE, "lapse")})).ok
