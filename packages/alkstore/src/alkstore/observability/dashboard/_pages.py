"""The dashboard's pages, rendered from plain values (no I/O here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from alkstore.names import OUTBOX_PREFIX
from alkstore.observability.metrics import oldest_ready_age_s
from alkstore.types import JobInfo, LockInfo, QueueStats, Schedule, StreamStats

from ._html import duration, esc, hidden, href, table, when
from ._sampler import Sample, ages, depth_series, throughput_series
from ._svg import Series, line_chart, sparkline

__all__ = [
    "Actions",
    "confirm_page",
    "locks_body",
    "login_body",
    "overview_body",
    "queue_body",
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
    "backlog change/s": "#5d6677",
}
_PAYLOAD_CHARS = 160
_ERROR_CHARS = 400


@dataclass(frozen=True)
class Actions:
    """Whether this page may offer changes: a CSRF token when it may, else
    the reason it may not (shown instead of the buttons)."""

    csrf: str | None
    reason: str = ""


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


def _charts(samples: Sequence[Sample], queue: str | None, scraping: bool, every_s: float) -> str:
    x = ages(samples)
    depth = depth_series(samples, queue)
    rates = throughput_series(samples, queue, scraping=scraping)
    scope = "all queues" if queue is None else queue_label(queue)
    depth_chart = line_chart(
        f"Depth, {scope}",
        x,
        [Series(state, _STATE_COLORS[state], values) for state, values in depth.items()],
    )
    rate_chart = line_chart(
        f"Throughput, {scope}",
        x,
        [Series(label, _RATE_COLORS[label], values) for label, values in rates.items()],
        unit="",
    )
    source = (
        "finished rates from the workers' metrics endpoints"
        if scraping
        else "finished rates need the workers' metrics: run workers with --metrics-port "
        "and the dashboard with --scrape URL"
    )
    caption = (
        f'<p class="muted">Sampled every {every_s:g} s while this dashboard runs '
        f"({len(samples)} samples, kept in memory); {esc(source)}.</p>"
    )
    return (
        f'<div class="charts"><div class="card" id="depth-chart">{depth_chart}</div>'
        f'<div class="card" id="throughput-chart">{rate_chart}</div></div>{caption}'
    )


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
            f'<td><a href="{href("/queue", name=s.queue)}">{esc(queue_label(s.queue))}</a></td>'
            f'<td class="n" data-state="pending">{_num(s.pending)}</td>'
            f'<td class="n" data-state="scheduled">{_num(s.scheduled)}</td>'
            f'<td class="n" data-state="processing">{_num(s.processing)}</td>'
            f'<td class="n" data-state="dead">{_num(s.dead, "dead")}</td>'
            f'<td class="n">{esc(duration(age)) if s.oldest_ready_at else "-"}</td>'
            f"<td>{sparkline(trend)}</td></tr>"
        )
    queues = table(
        [
            ("Queue", ""),
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
        f"{_charts(samples, None, scraping, every_s)}"
        f'<div class="card">{queues}</div>'
    )


def _payload(info: JobInfo) -> str:
    text = json.dumps(info.payload, ensure_ascii=False)
    if len(text) > _PAYLOAD_CHARS:
        text = text[: _PAYLOAD_CHARS - 1] + "\u2026"
    return esc(text)


def _error(info: JobInfo) -> str:
    text = info.last_error or ""
    if len(text) <= _ERROR_CHARS:
        return esc(text)
    return (
        f"<details><summary>{esc(text[:_ERROR_CHARS])}\u2026</summary>"
        f"{esc(text[_ERROR_CHARS:])}</details>"
    )


def queue_body(
    name: str,
    stats: QueueStats | None,
    dead: Sequence[JobInfo],
    *,
    now: datetime,
    after: int,
    more: bool,
    samples: Sequence[Sample],
    scraping: bool,
    every_s: float,
    actions: Actions,
    messages: Sequence[tuple[str, bool]] = (),
) -> str:
    counts = stats or QueueStats(name, 0, 0, 0, 0)
    kpis = "".join(
        f'<div class="kpi" data-state="{state}"><b>{value:,}</b><span>{state}</span></div>'
        for state, value in (
            ("pending", counts.pending),
            ("scheduled", counts.scheduled),
            ("processing", counts.processing),
            ("dead", counts.dead),
        )
    )
    can_act = actions.csrf is not None
    rows = []
    for info in dead:
        select = (
            f'<td><input type="checkbox" form="selection" name="ids" value="{info.id}" '
            f'aria-label="select job {info.id}"></td>'
            if can_act
            else ""
        )
        redrive_one = (
            f'<td><button form="row-redrive" name="ids" value="{info.id}" '
            f'data-redrive="{info.id}">Redrive</button></td>'
            if can_act
            else ""
        )
        rows.append(
            f'<tr data-job="{info.id}">{select}<td class="n">{info.id}</td>'
            f'<td class="n">{info.attempts}/{info.max_attempts}</td>'
            f"<td>{when(info.died_at, now)}</td>"
            f'<td class="err">{_error(info)}</td>'
            f'<td class="payload">{_payload(info)}</td>{redrive_one}</tr>'
        )
    headers = [
        ("ID", "n"),
        ("Attempts", "n"),
        ("Died", ""),
        ("Last error", ""),
        ("Payload", ""),
    ]
    if can_act:
        headers = [("", ""), *headers, ("", "")]
    listing = table(headers, rows, empty="No dead jobs.", attrs=' id="dead"')
    pager = []
    if after:
        pager.append(f'<a href="{href("/queue", name=name)}">first page</a>')
    if more and dead:
        pager.append(f'<a href="{href("/queue", name=name, after=dead[-1].id)}">next page</a>')
    forms = ""
    if can_act:
        assert actions.csrf is not None
        common = hidden("name", name) + hidden("csrf", actions.csrf)
        forms = (
            f'<form id="row-redrive" method="post" action="/queue/redrive">{common}</form>'
            f'<form id="selection" method="post" action="/queue/redrive">{common}</form>'
            '<div class="actions">'
            '<button form="selection" class="primary">Redrive selected</button>'
            '<button form="selection" formaction="/queue/purge" class="danger">'
            "Purge selected</button>"
            f'<form method="post" action="/queue/redrive">{common}{hidden("all", "1")}'
            '<button id="redrive-all">Redrive all&hellip;</button></form>'
            f'<form method="post" action="/queue/purge">{common}{hidden("all", "1")}'
            '<button id="purge-all" class="danger">Purge all&hellip;</button></form></div>'
        )
    elif dead and actions.reason:
        forms = f'<p class="note">{esc(actions.reason)}</p>'
    return (
        f"{flashes(messages)}<h1>Queue {esc(queue_label(name))}</h1>"
        f'<div class="kpis">{kpis}</div>{_charts(samples, name, scraping, every_s)}'
        f'<h2>Dead letters</h2><div class="card">{forms}{listing}'
        f"<p>{' &middot; '.join(pager)}</p></div>"
    )


def confirm_page(
    action: str, name: str, ids: Sequence[int] | None, dead_now: int, csrf: str
) -> str:
    """The confirmation step of a redrive of all, or any purge."""
    verb = "Redrive" if action == "redrive" else "Purge"
    what = f"all {dead_now:,} dead jobs" if ids is None else f"{len(ids):,} selected dead job(s)"
    effect = (
        "They go back to pending with a fresh attempt budget."
        if action == "redrive"
        else "They are deleted for good."
    )
    fields = hidden("name", name) + hidden("csrf", csrf) + hidden("confirm", "1")
    fields += hidden("all", "1") if ids is None else "".join(hidden("ids", i) for i in ids)
    listed = (
        ""
        if ids is None
        else f'<p class="muted">Jobs {esc(", ".join(str(i) for i in ids[:50]))}'
        f"{' ...' if len(ids) > 50 else ''}</p>"
    )
    cls = "primary" if action == "redrive" else "danger"
    return (
        f'<h1>{verb} {esc(what)} of queue {esc(queue_label(name))}?</h1><div class="card">'
        f"<p>{esc(effect)}</p>{listed}"
        f'<form method="post" action="/queue/{action}" class="actions">{fields}'
        f'<button id="confirm" class="{cls}">{verb}</button>'
        f'<a href="{href("/queue", name=name)}">Cancel</a></form></div>'
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
        else "Reading is open on localhost; redrive and purge need the dashboard's token."
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
