"""A chaos drain with a history checker, for any engine reachable by URL.

``run_drain`` enqueues jobs on two queues, starts worker processes that
drain them while a killer SIGKILLs a random working worker every
``kill_every_s`` (and starts a fresh one) until no job is left waiting to be
claimed (or it has killed ``max_kills`` times), and returns every worker's
log with the final state of the database. The killer then stops, so the
jobs still in flight (a slow job outlives several kill periods) finish
however loaded the machine is.
``check`` then proves, from that history alone:

1. **No overlapping claims.** Claims of one job follow each other: claim
   *k+1* starts no earlier than claim *k* ended (its deadline, extended by
   every heartbeat that returned ``True``; or the moment a retry of it was
   sent). Engine timestamps (the claim's deadline) and the workers' clocks
   are both the host's clock.
2. **Landed ops match the latest claim.** An ack or fail that returned
   ``True`` ends the job: no later claim of it exists. A refused op came
   after its claim's deadline.
3. **Every job ends acked once or dead with a reason that fits**: no job is
   left pending or processing; a job that is gone was acked exactly once (or
   its only ack was cut short by the kill); a dead job died of what it was
   built to die of (``asked to fail``, or ``max attempts exceeded`` on the
   queue whose jobs outlive their timeout), and was never also acked.

Workers log one JSON line per event with ``os.write`` on an ``O_APPEND``
file, so a SIGKILL loses at most the event in flight: a claim that
committed but was not logged, or an op whose result is unknown. The checker
treats those as unknown, never as evidence.

Used by ``contract_tests/test_chaos.py`` (short, in CI) and by
``scripts/chaos.py`` (full size, figures in ``docs/reliability.md``).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DrainConfig", "DrainResult", "Report", "check", "run_drain"]

MAIN, LAPSE = "chaos-main", "chaos-lapse"
#: Clock tolerance between the engine's timestamps and the workers' clocks.
TOLERANCE_S = 0.05


@dataclass(frozen=True)
class DrainConfig:
    url: str
    opts: dict[str, Any] = field(default_factory=dict)
    workers: int = 8
    jobs: int = 20_000
    kill_every_s: float = 0.5
    #: Visibility timeout of the main queue: a killed worker's claims lapse after it.
    timeout_s: float = 1.0
    #: Share of jobs that fail on purpose, retry once, or run long with heartbeats.
    fail_share: float = 0.02
    retry_share: float = 0.03
    slow_share: float = 0.005
    #: Jobs on the second queue, whose handler outlives its timeout (0.4 s).
    lapse_jobs: int = 50
    max_attempts: int = 1000
    #: Kills after which the killer stops (None: no cap). Each kill starts a
    #: fresh worker process, so on a loaded machine the cap bounds what the
    #: drain costs the rest of it.
    max_kills: int | None = None
    limit_s: float = 600.0
    seed: int = 1


@dataclass
class DrainResult:
    config: DrainConfig
    events: list[dict[str, Any]]
    #: id -> (queue, kind) of every enqueued job.
    jobs: dict[int, tuple[str, str]]
    #: id -> (state, attempts, last_error) of every job still in the database.
    final: dict[int, tuple[str, int, str | None]]
    kills: int
    elapsed_s: float
    spawned: int


@dataclass
class Report:
    violations: list[str]
    figures: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.violations


# ------------------------------------------------------------------ worker


def _worker(config: DrainConfig, log_path: str, stop_path: str, index: int) -> None:
    """Drain both queues until the stop file exists; log every event."""
    import alkstore
    from alkstore import AlkstoreError, QueueOpts, TransientError

    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pid = os.getpid()

    def log(**event: Any) -> None:
        event["w"], event["pid"] = index, pid
        os.write(fd, (json.dumps(event) + "\n").encode())

    rng = random.Random(config.seed * 1000 + pid)
    try:
        store = alkstore.open(config.url, **config.opts)
    except TransientError as exc:
        log(ev="transient", where="open", err=str(exc))
        return
    main = store.queue(
        MAIN, QueueOpts(visibility_timeout_s=config.timeout_s, max_attempts=config.max_attempts)
    )
    lapse = store.queue(LAPSE, QueueOpts(visibility_timeout_s=0.4, max_attempts=2))
    worker_id = f"w{index}-{pid}"

    def guarded(what: str, call: Any) -> Any:
        while True:
            try:
                return call()
            except TransientError as exc:
                log(ev="transient", where=what, err=str(exc)[:200])
                time.sleep(rng.uniform(0.005, 0.05))
            except AlkstoreError as exc:
                log(ev="error", where=what, type=type(exc).__name__, err=str(exc)[:300])
                raise
            except Exception as exc:
                log(ev="raw", where=what, type=type(exc).__name__, err=str(exc)[:300])
                raise

    def settle(queue: str, job: Any, op: str, *args: Any) -> bool:
        log(ev="op", op=op, q=queue, id=job.id, a=job.attempts, t0=time.time())
        ok = guarded(op, lambda: getattr(job, op)(*args))
        log(ev="done", op=op, q=queue, id=job.id, a=job.attempts, ok=bool(ok), t1=time.time())
        return bool(ok)

    while not os.path.exists(stop_path):
        q, name = (lapse, LAPSE) if rng.random() < 0.05 else (main, MAIN)
        jobs = guarded("claim", lambda q=q: q.claim_batch(worker_id, rng.randint(1, 8), wait_s=0.2))
        now = time.time()
        for job in jobs:
            log(ev="claim", q=name, id=job.id, a=job.attempts, dl=job.deadline.timestamp(), t=now)
        for job in jobs:
            kind = (job.payload or {}).get("kind", "plain")
            if name == LAPSE:
                time.sleep(0.5)  # past the 0.4 s timeout: the ack is refused
                settle(name, job, "ack")
            elif kind == "fail":
                settle(name, job, "fail", "asked to fail")
            elif kind == "retry" and job.attempts == 1:
                settle(name, job, "retry", "asked to retry", 0)
            elif kind == "slow":
                for _ in range(6):
                    time.sleep(config.timeout_s / 3)
                    t0 = time.time()
                    ok = guarded("heartbeat", job.heartbeat)
                    log(
                        ev="hb",
                        q=name,
                        id=job.id,
                        a=job.attempts,
                        ok=bool(ok),
                        t0=t0,
                        dl=job.deadline.timestamp(),
                    )
                    if not ok:
                        break
                settle(name, job, "ack")
            else:
                time.sleep(rng.uniform(0, 0.002))
                settle(name, job, "ack")
    store.close()
    log(ev="exit")


# ------------------------------------------------------------------- drain


def run_drain(config: DrainConfig, workdir: str | None = None) -> DrainResult:
    """Enqueue, drain under kills, and collect the history."""
    import alkstore
    from alkstore import EnqueueOpts, JobState, QueueOpts, TransientError

    ctx = multiprocessing.get_context("spawn")
    root = Path(workdir or tempfile.mkdtemp(prefix="alkstore-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    stop_path = str(root / "stop")
    rng = random.Random(config.seed)
    store = alkstore.open(config.url, **config.opts)
    main = store.queue(
        MAIN, QueueOpts(visibility_timeout_s=config.timeout_s, max_attempts=config.max_attempts)
    )
    lapse = store.queue(LAPSE, QueueOpts(visibility_timeout_s=0.4, max_attempts=2))
    kinds = []
    for _ in range(config.jobs):
        r = rng.random()
        if r < config.fail_share:
            kinds.append("fail")
        elif r < config.fail_share + config.retry_share:
            kinds.append("retry")
        elif r < config.fail_share + config.retry_share + config.slow_share:
            kinds.append("slow")
        else:
            kinds.append("plain")
    jobs: dict[int, tuple[str, str]] = {}
    for start in range(0, len(kinds), 1000):
        chunk = kinds[start : start + 1000]
        ids = main.enqueue_many([{"kind": k, "n": start + i} for i, k in enumerate(chunk)])
        jobs.update({job_id: (MAIN, k) for job_id, k in zip(ids, chunk, strict=True)})
    for job_id in lapse.enqueue_many([{"kind": "lapse"}] * config.lapse_jobs, EnqueueOpts()):
        jobs[job_id] = (LAPSE, "lapse")

    procs: dict[int, Any] = {}
    logs: dict[int, str] = {}
    spawned = 0

    def spawn(index: int) -> None:
        nonlocal spawned
        log_path = str(root / f"worker-{index}-{spawned}.jsonl")
        proc = ctx.Process(target=_worker, args=(config, log_path, stop_path, index), daemon=True)
        proc.start()
        procs[index] = proc
        logs[index] = log_path
        spawned += 1

    def working(index: int) -> bool:
        """Whether the worker has logged anything since it started: only those
        are killed, so a loaded machine's slow process starts cannot keep every
        worker from ever getting to work."""
        try:
            return os.path.getsize(logs[index]) > 0
        except FileNotFoundError:
            return False

    for index in range(config.workers):
        spawn(index)
    started = time.monotonic()
    kills = 0
    next_kill = started + config.kill_every_s
    next_check = started
    calm = False  # the killer has stopped: every job was claimed, or max_kills reached
    try:
        while True:
            now = time.monotonic()
            if now - started > config.limit_s:
                raise TimeoutError(f"the drain did not finish within {config.limit_s} s")
            if config.max_kills is not None and kills >= config.max_kills:
                calm = True
            if not calm and now >= next_kill:
                victim = rng.randrange(config.workers)
                proc = procs[victim]
                if not proc.is_alive() or working(victim):
                    if proc.is_alive():
                        os.kill(proc.pid, signal.SIGKILL)
                        kills += 1
                    proc.join(5)
                    spawn(victim)
                    next_kill = now + config.kill_every_s
            if now >= next_check:
                next_check = now + 0.5
                try:
                    lapse.sweep_expired()  # lapsed, budget spent -> dead
                    main.sweep_expired()
                    stats = main.stats(), lapse.stats()
                    if all(s.live == 0 for s in stats):
                        break
                    calm = calm or all(s.pending + s.scheduled == 0 for s in stats)
                except TransientError:
                    pass
            time.sleep(0.02)
    finally:
        Path(stop_path).touch()
        for proc in procs.values():
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    elapsed = time.monotonic() - started
    final: dict[int, tuple[str, int, str | None]] = {}
    for queue in (main, lapse):
        for state in JobState:
            after = 0
            while page := queue.list_jobs(state, limit=1000, after_id=after):
                for info in page:
                    final[info.id] = (info.state.value, info.attempts, info.last_error)
                after = page[-1].id
    store.close()
    events: list[dict[str, Any]] = []
    for path in sorted(root.glob("worker-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the kill
    return DrainResult(config, events, jobs, final, kills, elapsed, spawned)


# ----------------------------------------------------------------- checker


@dataclass
class _Claim:
    attempt: int
    start: float  # engine time of the claim: deadline - timeout
    end: float  # deadline, extended by heartbeats that landed
    retried_at: float | None = None
    landed: str | None = None  # "ack" or "fail" that returned True
    unknown_ops: int = 0


def check(result: DrainResult) -> Report:
    """The three properties of the module docstring, with figures."""
    config = result.config
    timeouts = {MAIN: config.timeout_s, LAPSE: 0.4}
    budgets = {MAIN: config.max_attempts, LAPSE: 2}
    violations: list[str] = []
    figures: Counter[str] = Counter()
    claims: dict[int, dict[int, _Claim]] = defaultdict(dict)
    open_ops: dict[tuple[int, int, int, str], dict[str, Any]] = {}
    refused: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for ev in result.events:
        kind = ev["ev"]
        if kind in ("raw", "error"):
            violations.append(f"worker {ev['w']} met {ev['type']} in {ev['where']}: {ev['err']}")
        elif kind == "transient":
            figures["transient errors"] += 1
        elif kind == "claim":
            job, attempt = ev["id"], ev["a"]
            if attempt in claims[job]:
                violations.append(f"job {job}: claim number {attempt} handed out twice")
            start = ev["dl"] - timeouts[ev["q"]]
            claims[job][attempt] = _Claim(attempt, start, ev["dl"])
            figures["claims"] += 1
            if attempt > 1:
                figures["reclaims and retries"] += 1
        elif kind == "hb":
            figures["heartbeats"] += 1
            claim = claims[ev["id"]].get(ev["a"])
            if claim is not None and ev["ok"]:
                claim.end = max(claim.end, ev["dl"])
        elif kind == "op":
            open_ops[(ev["pid"], ev["id"], ev["a"], ev["op"])] = ev
        elif kind == "done":
            begun = open_ops.pop((ev["pid"], ev["id"], ev["a"], ev["op"]), None)
            claim = claims[ev["id"]].get(ev["a"])
            if begun is None or claim is None:
                continue
            figures[f"{ev['op']} {'landed' if ev['ok'] else 'refused'}"] += 1
            if not ev["ok"]:
                refused.append((ev, begun))
            elif claim.landed is not None or claim.retried_at is not None:
                violations.append(f"job {ev['id']}: two ops of claim {ev['a']} landed")
            elif ev["op"] == "retry":
                claim.retried_at = begun["t0"]
            else:
                claim.landed = ev["op"]
    for (_, job, attempt, _op), _ev in open_ops.items():  # cut short by a kill
        figures["ops cut by a kill"] += 1
        claim = claims[job].get(attempt)
        if claim is not None:
            claim.unknown_ops += 1

    # 1 and 2: claims of a job follow each other; a landed ack or fail is last.
    for job, by_attempt in claims.items():
        ordered = [by_attempt[a] for a in sorted(by_attempt)]
        for earlier, later in itertools.pairwise(ordered):
            end = earlier.retried_at if earlier.retried_at is not None else earlier.end
            if later.start < end - TOLERANCE_S:
                violations.append(
                    f"job {job}: claim {later.attempt} began {end - later.start:.3f} s before "
                    f"claim {earlier.attempt} ended"
                )
            if earlier.landed is not None:
                violations.append(
                    f"job {job}: claim {later.attempt} after a landed {earlier.landed} of "
                    f"claim {earlier.attempt}"
                )
    for done, _ in refused:
        claim = claims[done["id"]][done["a"]]
        if done["t1"] + TOLERANCE_S < claim.end and claim.retried_at is None:
            violations.append(
                f"job {done['id']}: {done['op']} of claim {done['a']} refused "
                f"{claim.end - done['t1']:.3f} s before its deadline"
            )

    # 3: every job ends acked once or dead with a reason that fits.
    for job, (queue, kind) in result.jobs.items():
        landed = [c.landed for c in claims.get(job, {}).values() if c.landed]
        unknown = sum(c.unknown_ops for c in claims.get(job, {}).values())
        state = result.final.get(job)
        if state is None:
            if landed.count("ack") > 1:
                violations.append(f"job {job}: acked {landed.count('ack')} times")
            elif "ack" not in landed and not unknown:
                violations.append(f"job {job}: gone without an ack")
            if "fail" in landed:
                violations.append(f"job {job}: gone although a fail landed")
            figures["acked"] += 1
            continue
        status, attempts, error = state
        if status != "dead":
            violations.append(f"job {job}: stranded {status} after the drain")
            continue
        figures[f"dead: {error}"] += 1
        if "ack" in landed:
            violations.append(f"job {job}: dead although an ack landed")
        if error == "asked to fail":
            if kind != "fail":
                violations.append(f"job {job} ({kind}): died 'asked to fail'")
        elif error == "max attempts exceeded":
            if attempts < budgets[queue]:
                violations.append(f"job {job}: 'max attempts exceeded' after {attempts} attempts")
        elif error == "asked to retry":
            if kind != "retry" or attempts < budgets[queue]:
                violations.append(f"job {job} ({kind}): died of a retry with budget left")
        else:
            violations.append(f"job {job}: dead with an unexpected reason {error!r}")
    figures["jobs"] = len(result.jobs)
    figures["kills"] = result.kills
    figures["workers started"] = result.spawned
    summary: dict[str, Any] = dict(sorted(figures.items()))
    summary["elapsed s"] = round(result.elapsed_s, 1)
    summary["jobs per s"] = round(len(result.jobs) / result.elapsed_s, 1)
    return Report(violations, summary)
