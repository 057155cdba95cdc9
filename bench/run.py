#!/usr/bin/env python3
"""alkstore benchmarks: throughput as ratios against the raw-SQL limit and
against peers, all measured in one run.

    python3 bench/run.py                  full run (about 7 minutes on 2 cores)
    python3 bench/run.py --quick          smaller counts, fewer repetitions (under 2 minutes)
    python3 bench/run.py --only 'alkstore-*' 'raw-*' c8-sqlite
    python3 bench/run.py --workloads W1 W3b32 --reps 3

The first run creates ``bench/.venv`` with ``bench/requirements.txt`` (exact
pins, peers included) and the repository's engines installed editable, then
re-runs itself inside it; peers never become dependencies of alkstore.
Each run writes ``bench/results/<UTC time>[-quick].json`` and ``.md``.
See bench/README.md for what each workload measures.

PostgreSQL: ``--pg-url`` (default ``$ALKSTORE_BENCH_PG_URL`` or
``postgresql://postgres@127.0.0.1:5432/postgres``) is used only to create a
throwaway database for the run and to drop it at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import venv
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.runtime import RuntimePlan, RuntimeResult
    from bench.scaling import ScalingResult
    from bench.systems import Env, Sample, System

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = BENCH / ".venv"
REQUIREMENTS = BENCH / "requirements.txt"
RESULTS = BENCH / "results"
STAMP = VENV / ".bench-installed"
ENGINES = ["alkstore", "alkstore-sqlite", "alkstore-postgres"]
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclasses.dataclass(frozen=True)
class Workload:
    key: str
    title: str
    batch: int


WORKLOADS = [
    Workload("W1", "W1 enqueue, 1 job per transaction", 1),
    Workload("W2", "W2 enqueue_many, 100 per call", 100),
    Workload("W3b1", "W3 claim + ack, batch 1", 1),
    Workload("W3b32", "W3 claim + ack, batch 32", 32),
    Workload("W1c", "W1c enqueue, 16 producers at once, 1 job per call", 1),
]
WARMUP_STEPS = {"W1": 20, "W2": 2, "W3b1": 5, "W3b32": 2, "W1c": 2}
#: The worker runtime's workloads (bench/runtime.py), each with its own loop.
RUNTIME_WORKLOADS = ["Wd", "W4", "W6"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """How much of each workload one measurement does: up to ``target``
    jobs or ``cap_s`` seconds. W3 measurements start with ``target`` jobs
    (plus the warm-up's) waiting, the same backlog for every system."""

    reps: int
    targets: dict[str, int]
    cap_s: dict[str, float]
    c8_population: int
    c8_dead: int
    c8_waiting: int
    c8_claims: int
    c8_reps: int
    c8_groups: int
    c8_bound: int


FULL = Plan(
    reps=7,
    targets={"W1": 3_000, "W2": 30_000, "W3b1": 4_000, "W3b32": 40_000, "W1c": 6_000},
    cap_s={"W1": 1.5, "W2": 1.5, "W3b1": 2.0, "W3b32": 2.0, "W1c": 1.5},
    c8_population=100_000,
    c8_dead=1_000_000,
    c8_waiting=1_000,
    c8_claims=1_000,
    c8_reps=7,
    c8_groups=10_000,
    c8_bound=100,
)
QUICK = Plan(
    reps=3,
    targets={"W1": 600, "W2": 6_000, "W3b1": 800, "W3b32": 6_400, "W1c": 1_200},
    cap_s={"W1": 0.3, "W2": 0.3, "W3b1": 0.4, "W3b32": 0.4, "W1c": 0.3},
    c8_population=10_000,
    c8_dead=100_000,
    c8_waiting=1_000,
    c8_claims=200,
    c8_reps=3,
    c8_groups=1_000,
    c8_bound=100,
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ venv


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _fingerprint() -> str:
    digest = hashlib.sha256(sys.version.encode())
    digest.update(REQUIREMENTS.read_bytes())
    for name in ENGINES:
        digest.update((ROOT / "packages" / name / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def ensure_venv() -> Path:
    """``bench/.venv`` with the pinned requirements and the engines of this
    checkout (editable, so the benchmark measures the working tree)."""
    python = _venv_python()
    wanted = _fingerprint()
    if python.exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return python
    if not python.exists():
        log(f"creating {VENV.relative_to(ROOT)}")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    editable = [arg for name in ENGINES for arg in ("-e", str(ROOT / "packages" / name))]
    log(f"installing {REQUIREMENTS.relative_to(ROOT)} and the engines into the bench venv")
    subprocess.run([*pip, "-r", str(REQUIREMENTS), *editable], check=True, cwd=ROOT)
    STAMP.write_text(wanted)
    return python


def in_bench_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


# ------------------------------------------------------------------- CLI


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.py",
        description="alkstore throughput against the raw-SQL limit and against peers",
    )
    parser.add_argument("--quick", action="store_true", help="small counts, 3 repetitions")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="PATTERN",
        help=(
            "systems to run (shell patterns: 'alkstore-*', 'raw-sqlite-*', 'c8-*', "
            "'huey-full'; the runtime workloads per engine: 'wd-*', 'w4-postgres', "
            "'w6-sqlite-full')"
        ),
    )
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=[w.key for w in WORKLOADS] + RUNTIME_WORKLOADS,
        help="workloads to run (default: all)",
    )
    parser.add_argument("--reps", type=int, help="repetitions (default 7, --quick 3)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("ALKSTORE_BENCH_PG_URL", DEFAULT_PG_URL),
        help="a PostgreSQL server where the run may create and drop a database",
    )
    parser.add_argument(
        "--no-venv",
        action="store_true",
        help="run in this interpreter (peers that are not installed are reported as such)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    return parser.parse_args(argv)


def selected(name: str, patterns: list[str] | None) -> bool:
    return patterns is None or any(fnmatch.fnmatch(name, p) for p in patterns)


# --------------------------------------------------------------- running


@dataclasses.dataclass
class SystemResult:
    system: System
    samples: dict[str, list[Sample]] = dataclasses.field(default_factory=dict)
    error: str | None = None

    def rates(self, workload: str) -> list[float]:
        return [s.rate for s in self.samples.get(workload, []) if s.jobs]

    def median(self, workload: str) -> float | None:
        rates = self.rates(workload)
        return statistics.median(rates) if rates else None

    def cpu_us(self, workload: str) -> float | None:
        """This process's CPU time per job (the client's share of the work)."""
        values = [1e6 * s.cpu_s / s.jobs for s in self.samples.get(workload, []) if s.jobs]
        return statistics.median(values) if values else None

    def spread(self, workload: str) -> float | None:
        """Half the min-max range, relative to the median."""
        rates = self.rates(workload)
        if len(rates) < 2:
            return None
        return (max(rates) - min(rates)) / 2 / statistics.median(rates)


def measure_all(
    systems: list[System], workloads: list[Workload], plan: Plan, reps: int, env: Env
) -> list[SystemResult]:
    from bench.systems import Unavailable

    results = [SystemResult(s) for s in systems]
    live: list[SystemResult] = []
    for result in results:
        try:
            result.system.start(env)
        except Unavailable as exc:
            result.error = f"not run: {exc}"
            log(f"{result.system.name}: {result.error}")
            continue
        except Exception as exc:
            result.error = f"failed to start: {type(exc).__name__}: {exc}"
            log(f"{result.system.name}: {result.error}")
            traceback.print_exc()
            continue
        live.append(result)
    # Repetition-major, so that a burst of noise from other processes on the
    # machine lands on every system rather than on one system's repetitions.
    for rep in range(reps):
        for result in list(live):
            system = result.system
            line = []
            try:
                for w in workloads:
                    if w.key not in system.workloads:
                        continue
                    sample = measure_one(system, w, plan)
                    result.samples.setdefault(w.key, []).append(sample)
                    line.append(f"{w.key} {sample.rate:,.0f}/s")
            except Exception as exc:
                result.error = f"failed in rep {rep + 1}: {type(exc).__name__}: {exc}"
                traceback.print_exc()
                live.remove(result)
                line.append(result.error)
            log(f"rep {rep + 1}/{reps} {system.name}: " + ", ".join(line))
    for result in results:
        try:
            result.system.stop()
        except Exception as exc:
            log(f"{result.system.name}: stop failed: {exc}")
    return results


def measure_one(system: System, w: Workload, plan: Plan) -> Sample:
    target = plan.targets[w.key]
    warmup = WARMUP_STEPS[w.key]
    system.reset()
    if w.key.startswith("W3"):
        system.prefill(target + warmup * w.batch)
        system.after_prefill()
    return system.measure(w.key, w.batch, warmup, target, plan.cap_s[w.key])


# ------------------------------------------------------------- reporting


def fmt_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def paired_ratio(a: SystemResult, b: SystemResult, workload: str) -> float | None:
    """Median over repetitions of a/b measured in the same repetition."""
    pairs = [
        x.rate / y.rate
        for x, y in zip(a.samples.get(workload, []), b.samples.get(workload, []), strict=False)
        if x.jobs and y.jobs
    ]
    return statistics.median(pairs) if pairs else None


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except OSError:
        return {"commit": None, "dirty": None}


def environment(env: Env) -> dict[str, Any]:
    import sqlite3
    from importlib.metadata import PackageNotFoundError, version

    import psycopg

    versions: dict[str, str | None] = {}
    for dist in ["huey", "pgqueuer", "procrastinate", "litequeue", "persist-queue", "psycopg"]:
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = None
    pg_version = None
    if env.pg_url is not None:
        with psycopg.connect(env.pg_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            pg_version = None if row is None else str(row[0])
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": pg_version,
        "packages": versions,
        "git": git_state(),
    }


def build_report(
    results: list[SystemResult],
    scaling: list[ScalingResult],
    workloads: list[Workload],
    meta: dict[str, Any],
    runtime: list[RuntimeResult] | None = None,
    runtime_plan: RuntimePlan | None = None,
) -> tuple[dict[str, Any], str]:
    from bench import runtime as rt
    from bench.scaling import SCENARIOS, describe
    from bench.systems import PRODUCERS

    by_name = {r.system.name: r for r in results}
    data: dict[str, Any] = {"meta": meta, "systems": {}, "ratios": [], "scaling": []}
    for r in results:
        data["systems"][r.system.name] = {
            "engine": r.system.engine,
            "kind": r.system.kind,
            "description": r.system.description,
            "error": r.error,
            "workloads": {
                w.key: {
                    "median_jobs_per_s": r.median(w.key),
                    "median_client_cpu_us_per_job": r.cpu_us(w.key),
                    "spread": r.spread(w.key),
                    "samples": [dataclasses.asdict(s) for s in r.samples.get(w.key, [])],
                }
                for w in workloads
                if w.key in r.samples
            },
        }
    pairs: list[tuple[str, SystemResult, SystemResult]] = []
    for r in results:
        if r.system.compare_to in by_name:
            pairs.append(("raw limit", r, by_name[r.system.compare_to]))
    for r in results:
        if r.system.peer_of in by_name:
            pairs.append(("peer", by_name[r.system.peer_of], r))
            # The async face against the same peer (the peers are async).
            for a in results:
                if a.system.sync_of == r.system.peer_of:
                    pairs.append(("peer", a, r))
    for r in results:
        if r.system.sync_of in by_name:
            pairs.append(("async face", r, by_name[r.system.sync_of]))
    for r in results:
        raw = by_name.get(r.system.compare_to or "")
        if raw is not None and "W1c" in r.samples:
            # W1c's target is against the raw limit of one enqueue per
            # transaction from one thread (issue 14), i.e. raw W1.
            data["ratios"].append(
                {
                    "kind": "W1c vs raw W1",
                    "alkstore": r.system.name,
                    "other": raw.system.name,
                    "ratio_of_medians": {"W1c": ratio(r.median("W1c"), raw.median("W1"))},
                    "median_of_paired_ratios": {},
                }
            )
    for kind, a, b in pairs:
        data["ratios"].append(
            {
                "kind": kind,
                "alkstore": a.system.name,
                "other": b.system.name,
                "ratio_of_medians": {
                    w.key: ratio(a.median(w.key), b.median(w.key)) for w in workloads
                },
                "median_of_paired_ratios": {w.key: paired_ratio(a, b, w.key) for w in workloads},
            }
        )
    data["scaling"] = [describe(s) for s in scaling]
    data["runtime"] = [rt.describe(r) for r in runtime or []]
    if runtime_plan is not None:
        data["runtime_plan"] = dataclasses.asdict(runtime_plan)

    # ---- Markdown
    md: list[str] = []
    plan = meta["plan"]
    commit = meta["env"]["git"]["commit"] or "?"
    md.append(f"# alkstore benchmark, {meta['started']}")
    md.append("")
    md.append(
        f"Mode `{meta['mode']}`, {meta['reps']} repetitions, "
        f"{meta['duration_s']:.0f} s in all. Python {meta['env']['python']}, "
        f"SQLite {meta['env']['sqlite']}, PostgreSQL {meta['env']['postgresql']}, "
        f"{meta['env']['cpus']} CPUs, load average {meta['loadavg_start']} at the start "
        f"and {meta['loadavg_end']} at the end. Commit `{commit[:10]}`"
        + (" with uncommitted changes" if meta["env"]["git"]["dirty"] else "")
        + "."
    )
    md.append("")
    if results and workloads:
        md.append(
            "Jobs per second, median of the repetitions (± half the min-max spread, "
            "relative to the median). Per measurement: up to "
            + ", ".join(f"{k} {v:,} jobs" for k, v in plan["targets"].items())
            + " or "
            + ", ".join(f"{v} s" for v in plan["cap_s"].values())
            + "."
        )
        md.append("")
        header = "| system | " + " | ".join(w.title for w in workloads) + " |"
        md.append(header)
        md.append("|---|" + "---:|" * len(workloads))
        for r in results:
            if r.error and not r.samples:
                continue
            cells = []
            for w in workloads:
                med = r.median(w.key)
                spread = r.spread(w.key)
                cell = fmt_rate(med)
                if med is not None and spread is not None:
                    cell += f" ±{spread * 100:.0f}%"
                cells.append(cell)
            md.append(f"| {r.system.name} | " + " | ".join(cells) + " |")
        md.append("")
        md.append(
            "Client CPU per job (µs, median): the benchmark process's own CPU time. The "
            "machine has 2 cores, so client CPU competes with the database server's:"
        )
        md.append("")
        md.append("| system | " + " | ".join(w.key for w in workloads) + " |")
        md.append("|---|" + "---:|" * len(workloads))
        for r in results:
            if r.samples:
                cpu = [r.cpu_us(w.key) for w in workloads]
                cells = ["n/a" if c is None else f"{c:,.1f}" for c in cpu]
                md.append(f"| {r.system.name} | " + " | ".join(cells) + " |")
        md.append("")
        for title, kind in (
            (
                "alkstore against the raw-SQL limit (alkstore ÷ raw; 1.00 = as fast as raw)",
                "raw limit",
            ),
            ("alkstore against peers (alkstore ÷ peer; above 1 = alkstore faster)", "peer"),
            ("the async face against the sync face (async ÷ sync)", "async face"),
        ):
            rows = [x for x in data["ratios"] if x["kind"] == kind]
            if not rows:
                continue
            md.append(
                f"**{title}**, ratio of medians (in brackets: the median of the ratios "
                "paired within each repetition, steadier when the machine's load drifts):"
            )
            md.append("")
            md.append("| | " + " | ".join(w.title for w in workloads) + " |")
            md.append("|---|" + "---:|" * len(workloads))
            for x in rows:
                cells = []
                for w in workloads:
                    v = x["ratio_of_medians"][w.key]
                    paired = x["median_of_paired_ratios"].get(w.key)
                    cell = "n/a" if v is None else f"{v:.2f}"
                    if v is not None and paired is not None:
                        cell += f" ({paired:.2f})"
                    cells.append(cell)
                md.append(f"| {x['alkstore']} ÷ {x['other']} | " + " | ".join(cells) + " |")
            md.append("")
        w1c = [x for x in data["ratios"] if x["kind"] == "W1c vs raw W1"]
        if w1c:
            md.append(
                f"**W1c producer group commit**: {PRODUCERS} producers at once (threads; tasks "
                "on the async face), each call returning after its own commit, against the raw "
                "limit of one producer (raw W1). Target (issue 14): at least 3x on SQLite FULL "
                "and PostgreSQL."
            )
            md.append("")
            md.append("| | W1c ÷ raw W1 |")
            md.append("|---|---:|")
            for x in w1c:
                value = x["ratio_of_medians"]["W1c"]
                cell = "n/a" if value is None else f"{value:.2f}"
                md.append(f"| {x['alkstore']} W1c ÷ {x['other']} W1 | {cell} |")
            md.append("")
    if scaling:
        md.append(
            "**C-8 scaling** (with the job-control cases of Q-24 and Q-25): microseconds "
            "per timed step (median), and the ratio to the scenario it is compared with, "
            "on the same engine (should be about 1):"
        )
        md.append("")
        md.append("| engine | scenario | timed step | µs per step | ratio | to |")
        md.append("|---|---|---|---:|---:|---|")
        for sc in scaling:
            if sc.error:
                md.append(f"| {sc.engine} | failed: {sc.error} | | | | |")
            for key, scenario in SCENARIOS.items():
                if key in sc.failed:
                    md.append(f"| {sc.engine} | {key}: not built: {sc.failed[key]} | | | | |")
                if key in sc.samples:
                    md.append(
                        f"| {sc.engine} | {key}: {sc.label(key)} | {scenario.step} | "
                        f"{sc.us_per_job(key):,.0f} | {sc.ratio(key):.2f} | "
                        f"{scenario.base or '(reference)'} |"
                    )
        md.append("")
    if runtime and runtime_plan is not None:
        md.extend(rt.render(runtime, runtime_plan, meta.get("runtime_reps") or runtime_plan.reps))
    missing = [r for r in results if r.error]
    if missing:
        md.append("**Not measured, or not completely:**")
        md.append("")
        for r in missing:
            md.append(f"- {r.system.name}: {r.error}")
        md.append("")
    md.append("**Systems:**")
    md.append("")
    for r in results:
        if not (r.error and not r.samples):
            md.append(f"- {r.system.name}: {r.system.description}")
    md.append("")
    return data, "\n".join(md)


# ------------------------------------------------------------------ main


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not args.no_venv and not in_bench_venv():
        python = ensure_venv()
        os.execv(str(python), [str(python), str(Path(__file__).resolve()), *argv])
    sys.path.insert(0, str(ROOT))  # bench/ is a namespace package of the checkout
    from bench import runtime
    from bench.scaling import Sizes, run_scaling
    from bench.systems import Env, all_systems, throwaway_database

    plan = QUICK if args.quick else FULL
    reps = args.reps or plan.reps
    workloads = [w for w in WORKLOADS if args.workloads is None or w.key in args.workloads]
    systems = [s for s in all_systems() if selected(s.name, args.only)] if workloads else []
    c8_engines = [e for e in ("sqlite", "postgres") if selected(f"c8-{e}", args.only)]
    runtime_plan = runtime.QUICK_RUNTIME if args.quick else runtime.FULL_RUNTIME
    runtime_engines = {
        e: {
            w
            for w in RUNTIME_WORKLOADS
            if (args.workloads is None or w in args.workloads)
            and selected(f"{w.lower()}-{e}", args.only)
        }
        for e in runtime.ENGINES
    }
    runtime_engines = {e: ws for e, ws in runtime_engines.items() if ws}
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    loadavg_start = [round(x, 2) for x in os.getloadavg()]
    tmpdir = tempfile.mkdtemp(prefix="alkstore-bench-")
    try:
        with throwaway_database(args.pg_url) as (pg_url, pg_reason):
            env = Env(tmpdir=tmpdir, pg_url=pg_url, pg_reason=pg_reason)
            meta_env = environment(env)
            log(
                f"{'quick' if args.quick else 'full'} run, {reps} reps, "
                f"{len(systems)} systems, C-8 on {c8_engines or 'nothing'}, "
                f"runtime workloads on {sorted(runtime_engines) or 'nothing'}; "
                f"PostgreSQL: {pg_url or pg_reason}"
            )
            results = measure_all(systems, workloads, plan, reps, env)
            runtime_results = []
            if runtime_engines:
                log("runtime workloads (Wd, W4, W6)")
                runtime_results = runtime.run_runtime(
                    runtime_engines, env, runtime_plan, log, args.reps
                )
            sizes = Sizes(
                population=plan.c8_population,
                dead=plan.c8_dead,
                waiting=plan.c8_waiting,
                claims=plan.c8_claims,
                reps=args.reps or plan.c8_reps,
                groups=plan.c8_groups,
                bound=plan.c8_bound,
            )
            scaling = []
            for engine in c8_engines:
                log(f"C-8 scaling on {engine}")
                scaling.append(run_scaling(engine, env, sizes, log))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    meta = {
        "started": started.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "mode": "quick" if args.quick else "full",
        "argv": argv,
        "reps": reps,
        "runtime_reps": args.reps or runtime_plan.reps,
        "plan": dataclasses.asdict(plan),
        "duration_s": time.monotonic() - t0,
        "loadavg_start": loadavg_start,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "env": meta_env,
    }
    data, markdown = build_report(results, scaling, workloads, meta, runtime_results, runtime_plan)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = started.strftime("%Y%m%dT%H%M%SZ") + ("-quick" if args.quick else "")
    json_path = args.out / f"{stem}.json"
    md_path = args.out / f"{stem}.md"
    json_path.write_text(json.dumps(data, indent=1, allow_nan=False, default=str) + "\n")
    md_path.write_text(markdown)
    print(markdown)
    log(f"wrote {json_path} and {md_path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
