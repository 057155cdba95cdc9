"""HTML building blocks of the dashboard.

Every page is built from Python strings; every value that came from the
store or the request goes through :func:`esc` on its way in (queue names,
payloads and errors are anyone's text). The pages carry no script at all,
and the Content-Security-Policy forbids any, so a value that slipped past
escaping still could not run.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from urllib.parse import urlencode

__all__ = [
    "NAV",
    "esc",
    "hidden",
    "href",
    "layout",
    "table",
    "when",
]

#: The pages of the top bar: (path, label).
NAV: tuple[tuple[str, str], ...] = (
    ("/", "Queues"),
    ("/schedules", "Schedules"),
    ("/streams", "Streams"),
    ("/locks", "Locks"),
    ("/workers", "Workers"),
)

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
margin:0;color:#1d2330;background:#f3f5f8}
header{background:#1d2330;color:#fff;padding:.55rem 1.2rem;display:flex;gap:1.4rem;
align-items:center;flex-wrap:wrap}
header .brand{font-weight:700;letter-spacing:.02em}
header nav a{color:#c5cddb;text-decoration:none;margin-right:1rem;padding:.2rem 0}
header nav a.on{color:#fff;border-bottom:2px solid #5b9bff}
header .meta{margin-left:auto;color:#9aa6ba;font-size:12px}
main{padding:1rem 1.2rem 2rem;max-width:1280px}
h1{font-size:20px;margin:.2rem 0 .8rem}
h2{font-size:16px;margin:1.2rem 0 .5rem}
.card{background:#fff;border:1px solid #dde2ea;border-radius:8px;padding:.8rem 1rem;
margin-bottom:1rem}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
.charts .card{margin:0}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{padding:.38rem .6rem;border-bottom:1px solid #e6e9ef;text-align:left;vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#5d6677;
background:#f8f9fb}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.err{color:#9b2c2c;max-width:32rem;white-space:pre-wrap;word-break:break-word}
td.payload{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px;
max-width:26rem;word-break:break-all}
a{color:#245fb5}
.muted{color:#6b7385}
.zero{color:#a3aab8}
.dead{color:#b23b3b;font-weight:600}
.flash{background:#e9f6ec;border:1px solid #9fd3aa;color:#1e5b2b;padding:.5rem .8rem;
border-radius:6px;margin-bottom:1rem}
.flash.bad{background:#fdecec;border-color:#eeb0b0;color:#7d1f1f}
.note{background:#fff8e6;border:1px solid #f0d58a;padding:.5rem .8rem;border-radius:6px;
margin-bottom:1rem}
button{font:inherit;padding:.28rem .7rem;border-radius:5px;border:1px solid #9aa6ba;
background:#fff;cursor:pointer}
button.primary{background:#245fb5;border-color:#245fb5;color:#fff}
button.danger{background:#b23b3b;border-color:#b23b3b;color:#fff}
.actions{display:flex;gap:.5rem;align-items:center;margin:.6rem 0;flex-wrap:wrap}
.badge{display:inline-block;font-size:11px;text-transform:uppercase;letter-spacing:.04em;
padding:.05rem .45rem;border-radius:4px;margin-left:.4rem;vertical-align:middle}
.badge.paused{background:#fff1d6;border:1px solid #e0b35a;color:#7a4b00}
.kpis{display:flex;gap:1rem;flex-wrap:wrap;margin-bottom:1rem}
.kpi{background:#fff;border:1px solid #dde2ea;border-radius:8px;padding:.5rem 1rem;
min-width:8.5rem}
.kpi b{display:block;font-size:22px;font-variant-numeric:tabular-nums}
.kpi span{font-size:12px;color:#5d6677;text-transform:uppercase;letter-spacing:.04em}
a.kpi{color:inherit;text-decoration:none}
a.kpi:hover{border-color:#9aa6ba}
a.kpi.on{border-color:#245fb5;box-shadow:inset 0 -3px 0 #245fb5}
a.count{color:inherit;text-decoration:none}
a.count:hover{text-decoration:underline}
table.fields th{width:12rem;text-transform:none;letter-spacing:0;font-size:13px;
background:#fff}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font:12px/1.45 ui-monospace,
"DejaVu Sans Mono",monospace;max-height:32rem;overflow:auto}
pre.err{color:#9b2c2c}
input[type=password],input[type=text]{font:inherit;padding:.3rem .5rem;border:1px solid #9aa6ba;
border-radius:5px;min-width:18rem}
"""


def esc(value: object) -> str:
    """*value* as text safe inside HTML elements and quoted attributes."""
    return html.escape(str(value), quote=True)


def href(path: str, **params: object) -> str:
    """A same-site link: *path* with *params* URL-encoded, escaped for an
    attribute."""
    query = urlencode({k: str(v) for k, v in params.items() if v is not None})
    return esc(f"{path}?{query}" if query else path)


def hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">'


def when(value: datetime | None, now: datetime | None = None) -> str:
    """A UTC timestamp with how far it is from *now* (``in 3m``, ``5s ago``)."""
    if value is None:
        return '<span class="muted">-</span>'
    ref = now or datetime.now(timezone.utc)
    text = value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f'{esc(text)} <span class="muted">({esc(relative(value, ref))})</span>'


def relative(value: datetime, now: datetime) -> str:
    seconds = (value - now).total_seconds()
    text = duration(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def duration(seconds: float) -> str:
    """``42s``, ``3m 05s``, ``2h 10m``, ``3d 4h``."""
    s = int(seconds)
    if s < 60:
        return f"{seconds:.0f}s" if seconds >= 1 or seconds == 0 else f"{seconds:.1f}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def table(
    headers: Sequence[tuple[str, str]], rows: Iterable[str], *, empty: str, attrs: str = ""
) -> str:
    """A table with *headers* (label, css class) and pre-rendered ``<tr>``
    *rows*; the *empty* text when there are none."""
    body = "".join(rows)
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    head = "".join(f'<th class="{c}">{esc(label)}</th>' for label, c in headers)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def layout(
    title: str,
    body: str,
    *,
    active: str | None,
    store_label: str,
    refresh_s: float | None = None,
    session_note: str = "",
) -> str:
    """A whole page: the top bar, then *body*."""
    nav = "".join(
        f'<a href="{esc(path)}"{" class=on" if path == active else ""}>{esc(label)}</a>'
        for path, label in NAV
    )
    refresh = (
        f'<meta http-equiv="refresh" content="{max(1, round(refresh_s))}">'
        if refresh_s is not None
        else ""
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"{refresh}<title>{esc(title)} - alkstore</title><style>{_CSS}</style></head><body>"
        f'<header><span class="brand">alkstore</span><nav>{nav}</nav>'
        f'<span class="meta">{esc(store_label)}{session_note}</span></header>'
        f"<main>{body}</main></body></html>"
    )
