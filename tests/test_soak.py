"""scripts/soak.py in a few seconds on SQLite: the figures it samples are
there, the load it describes ran (jobs, dead letters, the sweep, the stream,
the listener), its last line is the ``soak:`` summary, and its exit status
agrees with it. Whether the run passes is timing (never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_short_soak_reports_what_it_measured(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "soak.py"),
            "--url",
            f"sqlite:///{tmp_path / 'soak.db'}",
            "--minutes",
            "0.2",
            "--warmup-minutes",
            "0.05",
            "--sample-s",
            "2",
            "--capacity-s",
            "2",
            "--sweep-every-s",
            "1",
            "--result-ttl-s",
            "2",
            "--dead-retention-s",
            "2",
            "--concurrency",
            "4",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("soak: "), proc.stdout + proc.stderr
    assert proc.returncode == (0 if last.startswith("soak: PASS") else 1), last

    data = json.loads(out.read_text(encoding="utf-8"))
    summary, samples = data["summary"], data["samples"]
    assert summary["pass"] == (proc.returncode == 0)
    assert summary["capacity_per_s"] > 0
    # Both are rounded to 0.1 from unrounded figures: equal to within that.
    assert abs(summary["offered_per_s"] - summary["capacity_per_s"] * 0.7) <= 0.1
    assert len(samples) >= 5
    times = [s["t_s"] for s in samples]
    assert times == sorted(times)
    for s in samples:
        assert s["sizes"]["__alkstore_jobs"] > 0
        assert "__alkstore_jobs indexes" in s["sizes"]
        assert s["sizes"]["file"] > 0
        assert s["rss_bytes"] > 0
        assert s["connections"] >= 1
    assert any(s["claim_p50_ms"] is not None for s in samples)
    counts = samples[-1]["counts"]
    assert counts["completed"] > 0
    # 1 % of the jobs die, and the sweep purges them after their retention.
    assert counts["failed"] > 0
    assert counts["sweeps"] > 0
    assert counts["purged"] + counts["results_deleted"] > 0
    assert counts["events_read"] > 0 and counts["trimmed"] > 0
    assert counts["notifications"] > 0
    assert summary["worst_figure"] in {f"size of {k}" for k in samples[-1]["sizes"]} | {
        "claim p50",
        "nothing",
    }
