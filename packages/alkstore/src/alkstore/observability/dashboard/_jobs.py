"""The pages of live work (O-6): a queue's jobs by state, one job, and the
confirmation step of a change. Rendered from plain values (no I/O here)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from alkstore.types import JobInfo, JobState

from ._html import esc, hidden, href, table, when
from ._live import SCHEDULED, Listing, shown_state
from ._pages import Actions, charts, flashes, paused_badge, queue_label
from ._sampler import Sample

__all__ = ["confirm_page", "confirm_pause_page", "job_body", "missing_job_body", "queue_body"]

_PAYLOAD_CHARS = 160
_ERROR_CHARS = 400
#: Most characters of a payload, error or result the job page shows.
_FULL_CHARS = 64 * 1024
#: States whose jobs may be cancelled (Q-13: pending or processing rows).
_CANCELLABLE = frozenset({JobState.PENDING.value, SCHEDULED, JobState.PROCESSING.value})
#: States whose jobs may be run now (O-6: pending rows, ready or scheduled).
_RUNNABLE = frozenset({JobState.PENDING.value, SCHEDULED})
_HEADINGS = {
    JobState.PENDING.value: "Pending jobs (ready now)",
    SCHEDULED: "Scheduled jobs (run_at still ahead)",
    JobState.PROCESSING.value: "Processing jobs (claimed)",
    JobState.DEAD.value: "Dead letters",
    JobState.DONE.value: "Done jobs (results kept)",
}
_EMPTY = {
    JobState.DEAD.value: "No dead jobs.",
    JobState.DONE.value: "No done jobs: an ack keeps a job only when it is stamped with "
    "result_ttl_s, and only until that time is up.",
}


def _short_json(value: Any, limit: int = _PAYLOAD_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return esc(text)


def _error(text: str | None) -> str:
    text = text or ""
    if len(text) <= _ERROR_CHARS:
        return esc(text)
    return (
        f"<details><summary>{esc(text[:_ERROR_CHARS])}\u2026</summary>"
        f"{esc(text[_ERROR_CHARS:])}</details>"
    )


def _job_link(info: JobInfo) -> str:
    return f'<a href="{href("/job", queue=info.queue, id=info.id)}">{info.id}</a>'


def _columns(state: str, now: datetime) -> list[tuple[str, str, Any]]:
    """(header, css class, cell of a job) of the listing of *state*."""

    def attempts(i: JobInfo) -> str:
        return f"{i.attempts}/{i.max_attempts}"

    def payload(i: JobInfo) -> str:
        return _short_json(i.payload)

    if state == JobState.PENDING.value:
        middle = [
            ("Priority", "n", lambda i: str(i.priority)),
            ("Ready since", "", lambda i: when(i.run_at, now)),
        ]
    elif state == SCHEDULED:
        middle = [
            ("Priority", "n", lambda i: str(i.priority)),
            ("Runs", "", lambda i: when(i.run_at, now)),
        ]
    elif state == JobState.PROCESSING.value:
        middle = [
            ("Worker", "", lambda i: esc(i.worker_id or "-")),
            ("Claimed", "", lambda i: when(i.claimed_at, now)),
            ("Claim deadline", "", lambda i: when(i.deadline, now)),
        ]
    elif state == JobState.DEAD.value:
        middle = [
            ("Died", "", lambda i: when(i.died_at, now)),
            ("Last error", "err", lambda i: _error(i.last_error)),
        ]
    elif state == JobState.DONE.value:
        middle = [
            ("Finished", "", lambda i: when(i.finished_at, now)),
            ("Result", "payload", lambda i: _short_json(i.result)),
        ]
    else:  # a state the contract gained after this page was written
        middle = [("Created", "", lambda i: when(i.created_at, now))]
    return [
        ("ID", "n", _job_link),
        ("Attempts", "n", attempts),
        *middle,
        ("Payload", "payload", payload),
    ]


def _tabs(
    name: str, state: str, counts: Mapping[str, tuple[int, bool]], states: Sequence[str]
) -> str:
    tabs = []
    for s in states:
        count, exact = counts.get(s, (0, False))
        shown = "-" if s not in counts else f"{count:,}{'' if exact else '+'}"
        on = " on" if s == state else ""
        current = ' aria-current="page"' if s == state else ""
        tabs.append(
            f'<a class="kpi{on}" data-state="{esc(s)}" href="{href("/queue", name=name, state=s)}"'
            f"{current}><b>{shown}</b><span>{esc(s)}</span></a>"
        )
    return f'<nav class="kpis" aria-label="job states">{"".join(tabs)}</nav>'


def _dead_forms(name: str, csrf: str) -> str:
    common = hidden("name", name) + hidden("csrf", csrf) + hidden("state", JobState.DEAD.value)
    return (
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


def _cancel_forms(name: str, state: str, csrf: str) -> str:
    common = hidden("name", name) + hidden("csrf", csrf) + hidden("state", state)
    return (
        f'<form id="row-cancel" method="post" action="/queue/cancel">{common}</form>'
        f'<form id="selection" method="post" action="/queue/cancel">{common}</form>'
        '<div class="actions"><button form="selection" id="cancel-selected" class="danger">'
        "Cancel selected&hellip;</button></div>"
    )


def _pause_bar(name: str, state: str, paused: bool, actions: Actions) -> str:
    """Q-27: whether the queue is paused, with the button that changes it."""
    if paused:
        text = (
            "Paused: no worker claims this queue's jobs until it is resumed; enqueues, "
            "and the jobs already claimed, go on."
        )
    else:
        text = "Running: workers claim this queue's jobs."
    button = ""
    if actions.csrf is not None and actions.pause:
        common = hidden("name", name) + hidden("csrf", actions.csrf) + hidden("state", state)
        if paused:
            button = (
                f'<form method="post" action="/queue/resume">{common}'
                '<button id="queue-resume" class="primary">Resume</button></form>'
            )
        else:
            button = (
                f'<form method="post" action="/queue/pause">{common}'
                '<button id="queue-pause" class="danger">Pause&hellip;</button></form>'
            )
    return (
        f'<div class="actions" id="pause-state" data-paused="{"1" if paused else "0"}">'
        f'<span class="{"badge paused" if paused else "muted"}">'
        f"{'paused' if paused else 'running'}</span>"
        f'<span class="muted">{esc(text)}</span>{button}</div>'
    )


def queue_body(
    name: str,
    state: str,
    states: Sequence[str],
    counts: Mapping[str, tuple[int, bool]],
    listing: Listing,
    *,
    now: datetime,
    after: int,
    samples: Sequence[Sample],
    scraping: bool,
    every_s: float,
    actions: Actions,
    messages: Sequence[tuple[str, bool]] = (),
    paused: bool | None = None,
) -> str:
    """A queue's page: a tab with the count of each state, the charts, and
    the jobs of *state*, one page of them, with the changes that state
    allows (redrive and purge for dead jobs, cancel for live ones, run now
    for pending ones); with *paused* (``None``: the engine cannot pause),
    whether the queue is paused and the button that changes it (Q-27)."""
    columns = _columns(state, now)
    dead = state == JobState.DEAD.value
    row_action = ""
    forms = ""
    if actions.csrf is not None and dead and actions.dead_admin:
        forms, row_action = _dead_forms(name, actions.csrf), "redrive"
    elif actions.csrf is not None and state in _CANCELLABLE:
        forms, row_action = _cancel_forms(name, state, actions.csrf), "cancel"
    elif listing.jobs and (dead or state in _CANCELLABLE):
        reason = actions.reason or "This engine does not support redrive and purge."
        forms = f'<p class="note">{esc(reason)}</p>'
    run_now = actions.csrf is not None and actions.run_now and state in _RUNNABLE
    if run_now and actions.csrf is not None:
        common = hidden("name", name) + hidden("csrf", actions.csrf) + hidden("state", state)
        forms += f'<form id="row-run-now" method="post" action="/queue/run-now">{common}</form>'
    rows = []
    for info in listing.jobs:
        cells = "".join(f'<td class="{cls}">{cell(info)}</td>' for _, cls, cell in columns)
        select = button = ""
        if run_now:  # O-6: the row's job made ready at once
            cells += (
                f'<td><button form="row-run-now" name="ids" value="{info.id}" '
                f'data-run-now="{info.id}">Run now</button></td>'
            )
        if row_action:
            select = (
                f'<td><input type="checkbox" form="selection" name="ids" value="{info.id}" '
                f'aria-label="select job {info.id}"></td>'
            )
            label = "Redrive" if row_action == "redrive" else "Cancel&hellip;"
            button = (
                f'<td><button form="row-{row_action}" name="ids" value="{info.id}" '
                f'data-{row_action}="{info.id}">{label}</button></td>'
            )
        rows.append(f'<tr data-job="{info.id}">{select}{cells}{button}</tr>')
    headers = [(label, cls) for label, cls, _ in columns]
    if run_now:
        headers.append(("", ""))
    if row_action:
        headers = [("", ""), *headers, ("", "")]
    empty = _EMPTY.get(state, f"No {state} jobs.")
    listed = table(
        headers,
        rows,
        empty=empty,
        attrs=f' id="{esc(state)}" class="jobs" data-list="{esc(state)}"',
    )
    pager = []
    if after:
        pager.append(f'<a href="{href("/queue", name=name, state=state)}">first page</a>')
    if listing.next_after is not None:
        pager.append(
            f'<a href="{href("/queue", name=name, state=state, after=listing.next_after)}">'
            "next page</a>"
        )
    scanned = ""
    if listing.scanned_to is not None:
        scanned = (
            f'<p class="muted">Read pending jobs up to id {listing.scanned_to:,} to find these; '
            "the next page reads on from there.</p>"
        )
    heading = _HEADINGS.get(state, f"{state.capitalize()} jobs")
    pause_bar = "" if paused is None else _pause_bar(name, state, paused, actions)
    return (
        f"{flashes(messages)}<h1>Queue {esc(queue_label(name))}{paused_badge(bool(paused))}</h1>"
        f"{pause_bar}"
        f"{_tabs(name, state, counts, states)}{charts(samples, name, scraping, every_s)}"
        f'<h2>{esc(heading)}</h2><div class="card">{forms}{listed}{scanned}'
        f"<p>{' &middot; '.join(pager)}</p></div>"
    )


# ------------------------------------------------------------------ one job


def _seconds(value: float | None) -> str:
    return '<span class="muted">-</span>' if value is None else esc(f"{value:g} s")


def _text(value: object) -> str:
    return '<span class="muted">-</span>' if value is None else esc(value)


def _trace(info: JobInfo) -> list[tuple[str, str]]:
    """The trace id and parent span of the job's W3C ``traceparent`` (O-2)."""
    context = info.trace_context or {}
    parent = context.get("traceparent", "")
    parts = parent.split("-")
    rows: list[tuple[str, str]] = []
    if len(parts) == 4 and len(parts[1]) == 32 and len(parts[2]) == 16:
        rows += [
            ("Trace id", f'<code data-field="trace-id">{esc(parts[1])}</code>'),
            ("Enqueued in span", f"<code>{esc(parts[2])}</code>"),
        ]
    elif parent:
        rows.append(("Trace parent", f"<code>{esc(parent)}</code>"))
    if context.get("tracestate"):
        rows.append(("Trace state", f"<code>{esc(context['tracestate'])}</code>"))
    return rows


#: The JobInfo fields the job page places itself; any other field (one the
#: contract gained later) is listed after them by its name.
_PLACED = frozenset(
    {
        "id", "queue", "state", "payload", "attempts", "max_attempts", "priority",
        "created_at", "run_at", "claimed_at", "expires_at", "visibility_timeout_s",
        "backoff_base_s", "dead_letter_retention_s", "last_error", "died_at", "deadline",
        "worker_id", "unique_key", "group", "group_limit", "trace_context", "result_ttl_s",
        "result", "finished_at",
        "progress",  # its own block below
        "waiting_on",  # WF-1: its own row
    }
)  # fmt: skip


def _other(value: object, now: datetime) -> str:
    if value is None:
        return '<span class="muted">-</span>'
    if isinstance(value, datetime):
        return when(value, now)
    try:
        return f"<code>{_short_json(value, 400)}</code>"
    except (TypeError, ValueError):
        return esc(value)


def _block(title: str, field: str, text: str, cls: str = "") -> str:
    if len(text) > _FULL_CHARS:
        text = text[:_FULL_CHARS] + f"\n\u2026 ({len(text) - _FULL_CHARS:,} more characters)"
    return (
        f'<h2>{esc(title)}</h2><div class="card"><pre class="{cls}" data-field="{field}">'
        f"{esc(text)}</pre></div>"
    )


def job_body(
    info: JobInfo,
    *,
    now: datetime,
    actions: Actions,
    messages: Sequence[tuple[str, bool]] = (),
) -> str:
    """One job: its state, stamps, claim, error, progress, payload, result and trace,
    with cancel (pending or processing) or redrive (dead) when allowed."""
    state = shown_state(info, now)
    claimed = info.state is JobState.PROCESSING
    # (label, cell, shown): a row whose value is unset is left out unless
    # it is one every job has.
    fields: list[tuple[str, str, bool]] = [
        ("State", f'<b data-field="state">{esc(state)}</b>', True),
        ("Queue", f'<a href="{href("/queue", name=info.queue, state=state)}">'
         f"{esc(queue_label(info.queue))}</a>", True),
        ("Attempts",
         f'<span data-field="attempts">{info.attempts} of {info.max_attempts}</span>', True),
        ("Priority", str(info.priority), True),
        ("Created", when(info.created_at, now), True),
        ("Runs at" if state == SCHEDULED else "Ready since", when(info.run_at, now), True),
        ("Claimed" if claimed else "Last claimed", when(info.claimed_at, now),
         info.claimed_at is not None),
        ("Worker" if claimed else "Last worker", _text(info.worker_id),
         info.worker_id is not None),
        # A claim's deadline means something only while the claim runs.
        ("Claim deadline", when(info.deadline, now), claimed and info.deadline is not None),
        ("Expires", when(info.expires_at, now), info.expires_at is not None),
        ("Died", when(info.died_at, now), info.died_at is not None),
        ("Finished", f'<span data-field="finished-at">{when(info.finished_at, now)}</span>',
         info.finished_at is not None),
        ("Visibility timeout", _seconds(info.visibility_timeout_s), True),
        ("Backoff base", _seconds(info.backoff_base_s), True),
        ("Dead letters kept", _seconds(info.dead_letter_retention_s),
         info.dead_letter_retention_s is not None),
        ("Result kept for", _seconds(info.result_ttl_s), info.result_ttl_s is not None),
        # WF-1: the parents still unfinished (of any queue: ids, not links).
        ("Waiting on", f'<span data-field="waiting-on">'
         f"{esc(', '.join(str(i) for i in info.waiting_on))}</span>", bool(info.waiting_on)),
        ("Unique key", _text(info.unique_key), info.unique_key is not None),
        ("Group", _text(info.group) if info.group_limit is None
         else f"{esc(info.group)} (at most {info.group_limit} at once)", info.group is not None),
        *((label, cell, True) for label, cell in _trace(info)),
    ]  # fmt: skip
    for f in dataclasses.fields(info):
        if f.name not in _PLACED:
            value = getattr(info, f.name)
            label = f.name.replace("_", " ").capitalize()
            fields.append((label, _other(value, now), value is not None))
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v, shown in fields if shown)
    details = f'<table class="fields" id="job-fields">{rows}</table>'
    parts = [
        flashes(messages),
        f"<h1>Job {info.id} of queue {esc(queue_label(info.queue))}</h1>",
        _job_actions(info, state, actions),
        f'<div class="card">{details}</div>',
    ]
    if info.last_error is not None:
        parts.append(_block("Last error", "last-error", info.last_error, "err"))
    if info.progress is not None:  # the job's last checkpoint
        parts.append(
            _block("Progress", "progress", json.dumps(info.progress, ensure_ascii=False, indent=2))
        )
    parts.append(
        _block("Payload", "payload", json.dumps(info.payload, ensure_ascii=False, indent=2))
    )
    if info.state is JobState.DONE:
        parts.append(
            _block("Result", "result", json.dumps(info.result, ensure_ascii=False, indent=2))
        )
    return "".join(parts)


def _job_actions(info: JobInfo, state: str, actions: Actions) -> str:
    dead = info.state is JobState.DEAD
    if not dead and state not in _CANCELLABLE:
        return ""
    if actions.csrf is None or (dead and not actions.dead_admin):
        reason = actions.reason or "This engine does not support redrive and purge."
        return f'<p class="note">{esc(reason)}</p>'
    common = (
        hidden("name", info.queue)
        + hidden("ids", info.id)
        + hidden("csrf", actions.csrf)
        + hidden("state", state)
        + hidden("from", "job")
    )
    if dead:
        buttons = (
            f'<form method="post" action="/queue/redrive">{common}'
            '<button id="job-redrive" class="primary">Redrive</button></form>'
            f'<form method="post" action="/queue/purge">{common}'
            '<button id="job-purge" class="danger">Purge&hellip;</button></form>'
        )
    else:
        buttons = (
            f'<form method="post" action="/queue/cancel">{common}'
            '<button id="job-cancel" class="danger">Cancel&hellip;</button></form>'
        )
        if actions.run_now and state in _RUNNABLE:  # O-6
            buttons = (
                f'<form method="post" action="/queue/run-now">{common}'
                '<button id="job-run-now" class="primary">Run now</button></form>'
            ) + buttons
    return f'<div class="actions">{buttons}</div>'


def missing_job_body(queue: str, job_id: int | None) -> str:
    """The page for an id the queue does not have (or no id at all)."""
    what = "That is not a job id." if job_id is None else f"No job {job_id} in this queue."
    return (
        f'<h1>No such job</h1><div class="card" id="no-job"><p>{esc(what)} A job that was '
        "acked or cancelled is gone: an ack keeps a job (as done) only when it is stamped "
        "with result_ttl_s, and only until that time is up; a purge deletes dead ones.</p>"
        f'<p><a href="{href("/queue", name=queue)}">Queue {esc(queue_label(queue))}</a></p>'
        "</div>"
    )


# -------------------------------------------------------------- confirming

_VERBS = {"redrive": "Redrive", "purge": "Purge", "cancel": "Cancel"}
#: The confirming button's label ("Cancel" beside "Back" would read both ways).
_CONFIRM_LABELS = {"redrive": "Redrive", "purge": "Purge", "cancel": "Yes, cancel"}
_EFFECTS = {
    "redrive": "They go back to pending with a fresh attempt budget.",
    "purge": "They are deleted for good.",
    "cancel": "They are deleted for good. A worker running one loses it: its next heartbeat "
    "or ack returns false, and its work is not acked.",
}


def confirm_page(
    action: str,
    name: str,
    ids: Sequence[int] | None,
    dead_now: int,
    csrf: str,
    back: Mapping[str, str],
) -> str:
    """The confirmation step of a redrive of all, any purge and any cancel;
    *back* holds the fields that say where the change returns to."""
    verb = _VERBS[action]
    kind = "dead job(s)" if action != "cancel" else "job(s)"
    what = f"all {dead_now:,} dead jobs" if ids is None else f"{len(ids):,} selected {kind}"
    fields = hidden("name", name) + hidden("csrf", csrf) + hidden("confirm", "1")
    fields += "".join(hidden(k, v) for k, v in back.items())
    fields += hidden("all", "1") if ids is None else "".join(hidden("ids", i) for i in ids)
    listed = (
        ""
        if ids is None
        else f'<p class="muted">Jobs {esc(", ".join(str(i) for i in ids[:50]))}'
        f"{' ...' if len(ids) > 50 else ''}</p>"
    )
    cls = "primary" if action == "redrive" else "danger"
    if back.get("from") == "job" and ids:
        cancel_link = href("/job", queue=name, id=ids[0])
    else:
        cancel_link = href("/queue", name=name, state=back.get("state"))
    return (
        f'<h1>{verb} {esc(what)} of queue {esc(queue_label(name))}?</h1><div class="card">'
        f"<p>{esc(_EFFECTS[action])}</p>{listed}"
        f'<form method="post" action="/queue/{action}" class="actions">{fields}'
        f'<button id="confirm" class="{cls}">{_CONFIRM_LABELS[action]}</button>'
        f'<a href="{cancel_link}">Back</a></form></div>'
    )


def confirm_pause_page(name: str, csrf: str, back: Mapping[str, str]) -> str:
    """Q-27: the confirmation step of a pause, which stops every worker of
    the queue, in every process, until a resume."""
    fields = hidden("name", name) + hidden("csrf", csrf) + hidden("confirm", "1")
    fields += "".join(hidden(k, v) for k, v in back.items())
    cancel_link = href("/queue", name=name, state=back.get("state"))
    return (
        f'<h1>Pause queue {esc(queue_label(name))}?</h1><div class="card">'
        "<p>No worker, in any process, claims its jobs until it is resumed. Enqueues go on, "
        "and jobs already claimed finish (ack, retry, heartbeat) as usual.</p>"
        f'<form method="post" action="/queue/pause" class="actions">{fields}'
        '<button id="confirm" class="danger">Pause</button>'
        f'<a href="{cancel_link}">Back</a></form></div>'
    )
