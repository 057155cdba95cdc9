"""The dashboard's pages, rendered from plain values (no I/O here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from alkstore.names import OUTBOX_PREFIX
from alkstore.observability.metrics import oldest_ready_age_s
from alkstore.types import LockInfo, QueueStats, Schedule, StreamStats

from ._html import duration, esc, hidden, href, table, when
from ._sampler import BACKLOG_LABEL, Sample, ages, backlog_series, depth_series, finished_series
from ._svg import Series, line_chart, sparkline

__all__ = [
    "Actions",
    "charts",
    "flashes",
    "locks_body",
    "login_body",
    "message_body",
    "overview_body",
    "paused_badge",
    "queue_label",
    "schedules_body",
    "streams_body",
]

_STATE_COLORS = {
    "pending": "#3b7dd8",
    "scheduled": "#8e6bd1",
    "processing": "#e09b2d",
    "dead": "#c0392b",
}
_RATE_COLORS = {
    "acked/s": "#2e9d57",
    "retried/s": "#e09b2d",
    "dead/s": "#c0392b",
    BACKLOG_LABEL: "#5d6677",
}


@dataclass(frozen=True)
class Actions:
    """Whether this page may offer changes: a CSRF token when it may, else
    the reason it may not (shown instead of the buttons); *dead_admin* when
    the engine can redrive and purge (Q-21, Q-22); *pause* and *run_now*
    when it can pause queues (Q-27) and run jobs now (O-6)."""

    csrf: str | None
    reason: str = ""
    dead_admin: bool = True
    #: Q-27 and O-6: whether the engine can pause queues and run jobs now.
    pause: bool = False
    run_now: bool = False


def queue_label(name: str) -> str:
    """A queue's name as shown: an outbox's backing queue says so."""
    if name.startswith(OUTBOX_PREFIX):
        return f"{name[len(OUTBOX_PREFIX) :]} (outbox)"
    return name


def flashes(messages: Sequence[tuple[str, bool]]) -> str:
    return "".join(
        f'<div class="flash{"" if ok else " bad"}" role="status">{esc(text)}</div>'
        for text, ok in messages
    )


def _num(value: int, cls: str = "") -> str:
    style = "zero" if value == 0 else cls
    return f'<span class="{style}">{value:,}</span>' if style else f"{value:,}"


def charts(samples: Sequence[Sample], queue: str | None, scraping: bool, every_s: float) -> str:
    """The depth chart, the backlog-change chart, and with *scraping* the
    finished-jobs chart: each titled by what it plots."""
    x = ages(samples)
    scope = "all queues" if queue is None else queue_label(queue)
    depth = depth_series(samples, queue)
    cards = [
        (
            "depth-chart",
            line_chart(
                f"Depth, {scope}",
                x,
                [Series(state, _STATE_COLORS[state], values) for state, values in depth.items()],
            ),
        ),
        (
            "backlog-chart",
            line_chart(
                f"Backlog change, {scope}",
                x,
                [
                    Series(label, _RATE_COLORS[label], values)
                    for label, values in backlog_series(samples, queue).items()
                ],
            ),
        ),
    ]
    if scraping:
        cards.append(
            (
                "throughput-chart",
                line_chart(
                    f"Finished jobs, {scope}",
                    x,
                    [
                        Series(label, _RATE_COLORS[label], values)
                        for label, values in finished_series(samples, queue).items()
                    ],
                ),
            )
        )
    finished = (
        "finished jobs per second come from the workers' metrics endpoints"
        if scraping
        else "finished jobs per second need the workers' metrics: run workers with "
        "--metrics-port and the dashboard with --scrape URL"
    )
    caption = (
        f'<p class="muted">Sampled every {every_s:g} s while this dashboard runs '
        f"({len(samples)} samples, kept in memory). Backlog change is how fast the "
        "pending, scheduled and processing jobs grew: below zero while the queue drains; "
        "it is not a throughput, since a job enqueued and finished between two samples "
        f"leaves no trace. {esc(finished[0].upper() + finished[1:])}.</p>"
    )
    body = "".join(f'<div class="card" id="{cid}">{svg}</div>' for cid, svg in cards)
    return f'<div class="charts">{body}</div>{caption}'


def _count_cell(queue: str, state: str, value: int, cls: str = "") -> str:
    """A count of the overview, linked to the queue's jobs in that state."""
    return (
        f'<td class="n" data-state="{state}">'
        f'<a class="count" href="{href("/queue", name=queue, state=state)}">'
        f"{_num(value, cls)}</a></td>"
    )


def paused_badge(paused: bool) -> str:
    """Q-27: the mark of a paused queue beside its name."""
    if not paused:
        return ""
    return '<span class="badge paused" data-paused="1" title="paused: no claims">paused</span>'


def overview_body(
    stats: Sequence[QueueStats],
    now: datetime,
    samples: Sequence[Sample],
    *,
    scraping: bool,
    every_s: float,
    messages: Sequence[tuple[str, bool]] = (),
) -> str:
    totals = {
        "waiting": sum(s.waiting for s in stats),
        "pending": sum(s.pending for s in stats),
        "scheduled": sum(s.scheduled for s in stats),
        "processing": sum(s.processing for s in stats),
        "dead": sum(s.dead for s in stats),
    }
    kpis = "".join(
        f'<div class="kpi" data-total="{k}"><b>{v:,}</b><span>{esc(k)}</span></div>'
        for k, v in totals.items()
    )
    rows = []
    for s in stats:
        trend = [float(x.stats[s.queue].live) for x in samples[-60:] if s.queue in x.stats]
        age = oldest_ready_age_s(s, now)
        rows.append(
            f'<tr data-queue="{esc(s.queue)}">'
            f'<td><a href="{href("/queue", name=s.queue)}">{esc(queue_label(s.queue))}</a>'
            f"{paused_badge(s.paused)}</td>"
            f"{_count_cell(s.queue, 'waiting', s.waiting)}"
            f"{_count_cell(s.queue, 'pending', s.pending)}"
            f"{_count_cell(s.queue, 'scheduled', s.scheduled)}"
            f"{_count_cell(s.queue, 'processing', s.processing)}"
            f"{_count_cell(s.queue, 'dead', s.dead, 'dead')}"
            f'<td class="n">{esc(duration(age)) if s.oldest_ready_at else "-"}</td>'
            f"<td>{sparkline(trend)}</td></tr>"
        )
    queues = table(
        [
            ("Queue", ""),
            ("Waiting", "n"),
            ("Pending", "n"),
            ("Scheduled", "n"),
            ("Processing", "n"),
            ("Dead", "n"),
            ("Oldest ready", "n"),
            ("Live jobs, trend", ""),
        ],
        rows,
        empty="No queue has any jobs.",
        attrs=' id="queues"',
    )
    return (
        f"{flashes(messages)}<h1>Queues</h1><div class=kpis>{kpis}</div>"
        f"{charts(samples, None, scraping, every_s)}"
        f'<div class="card">{queues}</div>'
    )


def schedules_body(schedules: Sequence[Schedule], now: datetime) -> str:
    rows = [
        f'<tr data-schedule="{esc(s.name)}"><td>{esc(s.name)}</td><td><code>{esc(s.spec)}</code>'
        f"</td><td>{esc(s.tz)}</td>"
        f'<td><a href="{href("/queue", name=s.queue)}">{esc(queue_label(s.queue))}</a></td>'
        f"<td>{when(s.next_fire_at, now)}</td><td>{when(s.last_fire_at, now)}</td></tr>"
        for s in sorted(schedules, key=lambda s: (s.next_fire_at, s.name))
    ]
    listing = table(
        [
            ("Name", ""),
            ("Spec", ""),
            ("Zone", ""),
            ("Queue", ""),
            ("Next fire", ""),
            ("Last fire", ""),
        ],
        rows,
        empty="No schedules.",
        attrs=' id="schedules"',
    )
    return f'<h1>Schedules</h1><div class="card">{listing}</div>'


def streams_body(streams: Sequence[StreamStats]) -> str:
    cards = []
    for s in streams:
        rows = [
            f'<tr data-consumer="{esc(c.consumer)}"><td>{esc(c.consumer)}</td>'
            f'<td class="n">{c.offset:,}</td>'
            f'<td class="n" data-lag="{c.lag}">{_num(c.lag)}</td></tr>'
            for c in s.consumers
        ]
        consumers = table(
            [("Consumer", ""), ("Offset", "n"), ("Lag", "n")], rows, empty="No consumers."
        )
        cards.append(
            f'<div class="card" data-stream="{esc(s.stream)}"><h2>{esc(s.stream)}</h2>'
            f'<p class="muted">last offset {s.last_offset:,} &middot; {s.events:,} events '
            f"stored</p>{consumers}</div>"
        )
    body = "".join(cards) or '<p class="muted">No streams.</p>'
    return f"<h1>Streams</h1>{body}"


def locks_body(locks: Sequence[LockInfo], now: datetime) -> str:
    rows = [
        f'<tr data-lock="{esc(lk.name)}"><td>{esc(lk.name)}</td><td>{esc(lk.owner)}</td>'
        f'<td class="n">{lk.token}</td><td>{when(lk.expires_at, now)}</td></tr>'
        for lk in locks
    ]
    listing = table(
        [("Name", ""), ("Owner", ""), ("Token", "n"), ("Expires", "")],
        rows,
        empty="No lock is held.",
        attrs=' id="locks"',
    )
    return f'<h1>Locks held</h1><div class="card">{listing}</div>'


def login_body(failed: bool, public: bool, next_path: str) -> str:
    why = (
        "This dashboard listens beyond localhost: every page needs its token."
        if public
        else "Reading is open on localhost; changes need the dashboard's token."
    )
    bad = '<div class="flash bad">That token is not right.</div>' if failed else ""
    return (
        f'{bad}<h1>Log in</h1><div class="card"><p>{esc(why)} It was printed when the '
        "dashboard started (or set with $ALKSTORE_DASHBOARD_TOKEN).</p>"
        f'<form method="post" action="/login" class="actions">{hidden("next", next_path)}'
        '<input type="password" name="token" autocomplete="current-password" '
        'aria-label="token"><button class="primary">Log in</button></form></div>'
    )


def message_body(title: str, text: str) -> str:
    return f'<h1>{esc(title)}</h1><div class="card"><p>{esc(text)}</p></div>'
