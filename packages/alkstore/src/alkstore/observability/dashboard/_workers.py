"""The dashboard's view of the workers' registry (O-5, O-6): the workers
page, and the "Finished jobs per minute" chart drawn from the workers'
per-minute counts, a history kept in the store that survives a restart of
the dashboard (docs/adr/0024). Rendered from plain values; no I/O here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from alkstore.types import WorkerCount, WorkerInfo

from ._html import esc, href, table, when
from ._svg import Series, line_chart

__all__ = ["MINUTES", "SILENT_S", "finished_chart", "workers_body"]

#: How many minutes the chart shows.
MINUTES = 60
#: A worker not seen for this long is marked silent (three default refreshes).
SILENT_S = 30.0

_OUTCOME_COLORS = {
    "acked": "#2e9d57",
    "retried": "#e09b2d",
    "failed": "#8e6bd1",
    "dead": "#c0392b",
    "timeout": "#3b7dd8",
    "lost": "#5d6677",
}


def _minute(value: datetime) -> datetime:
    return value.astimezone(timezone.utc).replace(second=0, microsecond=0)


def finished_chart(
    counts: Sequence[WorkerCount] | None, now: datetime, queue: str | None = None
) -> str:
    """The card ``#finished-chart``: jobs finished per minute over the last
    hour, one series per outcome seen (acked always), from the workers'
    counts (of *queue* only, when given). ``None`` for counts: the engine
    keeps no registry, said in place of the chart."""
    if counts is None:
        return (
            '<div class="card" id="finished-chart"><p class="muted">Finished jobs per minute '
            "need the workers' registry, which this engine does not keep.</p></div>"
        )
    last = _minute(now)
    first = last - timedelta(minutes=MINUTES - 1)
    slots = [first + timedelta(minutes=i) for i in range(MINUTES)]
    index = {m: i for i, m in enumerate(slots)}
    by_outcome: dict[str, list[float | None]] = {"acked": [0.0] * MINUTES}
    for c in counts:
        if queue is not None and c.queue != queue:
            continue
        i = index.get(_minute(c.minute))
        if i is None:
            continue
        values = by_outcome.setdefault(c.outcome, [0.0] * MINUTES)
        values[i] = (values[i] or 0.0) + c.n
    ages = [(now - m).total_seconds() for m in slots]
    order = [o for o in _OUTCOME_COLORS if o in by_outcome]
    series = [Series(o, _OUTCOME_COLORS[o], by_outcome[o]) for o in order]
    scope = "all queues" if queue is None else queue
    total = sum(int(v or 0) for values in by_outcome.values() for v in values)
    svg = line_chart(f"Finished jobs per minute, {scope}", ages, series)
    caption = (
        f'<p class="muted">From the workers\' per-minute counts in the store (the last '
        f"{MINUTES} minutes, {total:,} jobs); a worker flushes its counts every few seconds, "
        "so the current minute fills in as it goes. This history outlives the "
        "dashboard.</p>"
    )
    return f'<div class="card" id="finished-chart">{svg}{caption}</div>'


def workers_body(
    workers: Sequence[WorkerInfo], counts: Sequence[WorkerCount], now: datetime
) -> str:
    """The workers page: each registered worker with when it was last seen
    and its finished jobs of the last hour by outcome, then the chart."""
    totals: dict[str, dict[str, int]] = {}
    for c in counts:
        mine = totals.setdefault(c.worker_id, {})
        mine[c.outcome] = mine.get(c.outcome, 0) + c.n
    rows = []
    for w in workers:
        seen = w.last_seen
        silent = seen is not None and (now - seen).total_seconds() > SILENT_S
        mark = ' <span class="dead">silent</span>' if silent else ""
        done = totals.get(w.id, {})
        finished = ", ".join(f"{esc(o)} {done[o]:,}" for o in _OUTCOME_COLORS if o in done) or "-"
        queues = ", ".join(f'<a href="{href("/queue", name=q)}">{esc(q)}</a>' for q in w.queues)
        rows.append(
            f'<tr data-worker="{esc(w.id)}"{" data-silent" if silent else ""}>'
            f"<td><code>{esc(w.id)}</code></td><td>{esc(w.host)}</td>"
            f'<td class="n">{w.pid}</td><td>{queues}</td>'
            f'<td class="n">{w.concurrency}</td><td>{esc(w.version)}</td>'
            f"<td>{when(w.started_at, now)}</td>"
            f'<td data-last-seen="{esc(seen.isoformat() if seen else "")}">'
            f"{when(seen, now)}{mark}</td>"
            f'<td data-finished="{sum(done.values())}">{finished}</td></tr>'
        )
    listing = table(
        [
            ("Worker", ""),
            ("Host", ""),
            ("PID", "n"),
            ("Queues", ""),
            ("Concurrency", "n"),
            ("Version", ""),
            ("Started", ""),
            ("Last seen", ""),
            ("Finished, last hour", ""),
        ],
        rows,
        empty="No worker is registered: workers register while Worker.run runs.",
        attrs=' id="workers"',
    )
    note = (
        '<p class="muted">Each running worker refreshes its row every 10 s; one not seen '
        f"for {SILENT_S:g} s is marked silent (stopped hard, or cut off), and its row is "
        "deleted after an hour.</p>"
    )
    return (
        f'<h1>Workers</h1><div class="card">{listing}{note}</div>'
        f'<div class="charts">{finished_chart(counts, now)}</div>'
    )
