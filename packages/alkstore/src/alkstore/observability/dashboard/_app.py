"""The dashboard as a WSGI application (O-4, O-6).

Routes (``name`` is a queue name, in the query string or a form field, so
that any queue name survives the URL):

===============================  =====  =====================================
``/``                            GET    every queue: counts, depth, backlog
``/queue?name=&state=&after=``   GET    one queue: counts by state, charts,
                                        its jobs in *state* (default dead)
``/job?queue=&id=``              GET    one job: stamps, claim, error,
                                        payload, result, trace
``/queue/redrive``               POST   ``ids`` (one or more) or ``all=1``
``/queue/purge``                 POST   ``ids`` or ``all=1``; always confirmed
``/queue/cancel``                POST   ``ids``; always confirmed
``/queue/run-now``               POST   ``ids``: pending jobs made ready (O-6)
``/queue/pause``                 POST   pause the queue (Q-27); confirmed
``/queue/resume``                POST   resume it
``/schedules``                   GET    schedules with their next fires
``/streams``                     GET    streams with each consumer's lag
``/locks``                       GET    held locks with owners and tokens
``/workers``                     GET    registered workers, last seen, counts
``/healthz``                     GET    ``ok`` while the store answers
``/login``                       GET    the token form; POST starts a session
``/logout``                      POST   ends the session
===============================  =====  =====================================

A redrive of all, every purge, every cancel and a pause answer first with a
confirmation page whose form repeats the request with ``confirm=1``. Every
change answers with a redirect (``303``) to the page it came from (the
queue's jobs in ``state``, or the job's page for ``from=job``), which shows
what happened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlencode

from alkstore.errors import AlkstoreError, UnsupportedOperation
from alkstore.names import OUTBOX_PREFIX
from alkstore.observability._http import StartResponse, WSGIEnviron
from alkstore.protocols import Capability, Queue, Store
from alkstore.types import JobState, QueueStats

from . import _jobs, _live, _pages, _workers
from ._auth import Guard, Session
from ._html import layout
from ._sampler import History, Sampler

__all__ = ["DashboardApp"]

log = logging.getLogger("alkstore.dashboard")

_MAX_FORM_BYTES = 256 * 1024
_MAX_IDS = 1000
#: The state a queue's page shows when none is asked for.
_DEFAULT_STATE = JobState.DEAD.value
_SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    # same-origin, not no-referrer: with no-referrer the browser sends
    # "Origin: null" on the dashboard's own forms, and the Origin check
    # (which refuses null) would refuse them.
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]


class _Response:
    def __init__(
        self, status: str, body: str = "", headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.status = status
        self.body = body.encode("utf-8")
        self.headers = list(headers)


#: What serves one route: the request's environ and session to a response.
_Handler = Callable[[WSGIEnviron, Session | None], _Response]


def _redirect(location: str, *headers: tuple[str, str]) -> _Response:
    return _Response("303 See Other", "", [("Location", location), *headers])


class DashboardApp:
    """The WSGI callable. *store* is read on every request (the numbers on
    a page are the store's at that moment) and sampled by *sampler* for the
    charts."""

    def __init__(
        self,
        store: Store,
        guard: Guard,
        history: History,
        sampler: Sampler,
        *,
        every_s: float,
        refresh_s: float | None,
    ) -> None:
        self._store = store
        self._guard = guard
        self._history = history
        self._sampler = sampler
        self._every_s = every_s
        self._refresh_s = refresh_s
        self._routes: dict[tuple[str, str], _Handler] = {
            ("GET", "/"): self._overview,
            ("GET", "/queue"): self._queue_page,
            ("POST", "/queue/redrive"): self._redrive,
            ("POST", "/queue/purge"): self._purge,
            ("POST", "/queue/cancel"): self._cancel,
            ("POST", "/queue/run-now"): self._run_now,
            ("POST", "/queue/pause"): self._pause,
            ("POST", "/queue/resume"): self._resume,
            ("GET", "/job"): self._job_page,
            ("GET", "/healthz"): self._healthz,
            ("GET", "/schedules"): self._listing("Schedules", self._schedules_body),
            ("GET", "/streams"): self._listing("Streams", self._streams_body),
            ("GET", "/locks"): self._listing("Locks", self._locks_body),
            ("GET", "/workers"): self._listing("Workers", self._workers_body),
            ("GET", "/login"): self._login_form,
            ("POST", "/login"): self._login,
            ("POST", "/logout"): self._logout,
        }

    # ------------------------------------------------------------------ WSGI

    def __call__(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        try:
            response = self._dispatch(environ)
        except Exception:
            log.exception("dashboard request failed")
            response = self._page(
                "500 Internal Server Error",
                "Error",
                _pages.message_body("Something failed", "See the dashboard's log."),
            )
        headers = [*response.headers, *_SECURITY_HEADERS]
        if response.body:
            headers.append(("Content-Length", str(len(response.body))))
        start_response(response.status, headers)
        if environ.get("REQUEST_METHOD") == "HEAD":
            return [b""]
        return [response.body]

    def _dispatch(self, environ: WSGIEnviron) -> _Response:
        guard = self._guard
        if environ.get("PATH_INFO") == "/healthz" and environ.get("REQUEST_METHOD") in (
            "GET",
            "HEAD",
        ):
            # For load balancers and probes, which may name the address
            # however they like: it says only whether the store answers.
            return self._healthz(environ, None)
        if not guard.host_ok(environ):
            return _Response(
                "421 Misdirected Request",
                "This dashboard does not answer to that host name.\n",
                [("Content-Type", "text/plain; charset=utf-8")],
            )
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        method = "GET" if method == "HEAD" else method
        path = str(environ.get("PATH_INFO", "/")) or "/"
        query = parse_qs(str(environ.get("QUERY_STRING", "")))
        session = guard.session(environ)
        if method == "GET" and "token" in query:
            return self._token_login(path, query)
        handler = self._routes.get((method, path))
        if handler is None:
            if any(p == path for _, p in self._routes):
                return _Response("405 Method Not Allowed", "", [("Allow", "GET, POST")])
            return self._page("404 Not Found", "Not found", _pages.message_body("Not found", path))
        if path != "/login" and not guard.may_read(session):
            return self._page(
                "401 Unauthorized",
                "Log in",
                _pages.login_body(False, guard.public, path),
            )
        if method == "POST" and not guard.same_origin(environ):
            return self._forbidden("The request came from another site.")
        return handler(environ, session)

    # --------------------------------------------------------------- helpers

    def _page(
        self,
        status: str,
        title: str,
        body: str,
        *,
        active: str | None = None,
        refresh: bool = False,
        session: Session | None = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> _Response:
        note = ""
        if session is not None:
            note = " &middot; signed in"
        html = layout(
            title,
            body,
            active=active,
            store_label=self._store.url,
            refresh_s=self._refresh_s if refresh else None,
            session_note=note,
        )
        return _Response(status, html, [("Content-Type", "text/html; charset=utf-8"), *headers])

    def _forbidden(self, why: str) -> _Response:
        return self._page("403 Forbidden", "Refused", _pages.message_body("Refused", why))

    def _actions(self, session: Session | None) -> _pages.Actions:
        caps = self._store.capabilities
        dead_admin = Capability.DEAD_LETTER_ADMIN in caps
        can = {"pause": Capability.PAUSE in caps, "run_now": Capability.RUN_NOW in caps}
        if self._guard.read_only:
            return _pages.Actions(None, "This dashboard runs read-only.", dead_admin, **can)
        if session is None:
            return _pages.Actions(
                None,
                "Changes (redrive, purge, cancel, run now, pause) need the dashboard's token: "
                "open the link printed at start, or log in.",
                dead_admin,
                **can,
            )
        return _pages.Actions(session.csrf, "", dead_admin, **can)

    def _queue_handle(self, name: str) -> Queue:
        if name.startswith(OUTBOX_PREFIX):
            return self._store.outbox(name[len(OUTBOX_PREFIX) :]).queue
        return self._store.queue(name)

    @staticmethod
    def _form(environ: WSGIEnviron) -> dict[str, list[str]]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length <= 0 or length > _MAX_FORM_BYTES:
            return {}
        raw = environ["wsgi.input"].read(length)
        return parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)

    def _read_failed(self, what: str, exc: Exception) -> str:
        if isinstance(exc, UnsupportedOperation):
            return _pages.message_body(what, "This engine does not support it.")
        log.warning("reading %s failed: %s", what, exc)
        return _pages.message_body(what, f"Reading it failed: {type(exc).__name__}: {exc}")

    # ----------------------------------------------------------------- pages

    def _overview(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        try:
            stats = self._store.queue_stats()
        except AlkstoreError as exc:
            return self._page("503 Service Unavailable", "Queues", self._read_failed("Queues", exc))
        now = datetime.now(timezone.utc)
        body = _pages.overview_body(
            stats,
            now,
            self._history.samples(),
            scraping=self._sampler.scraping,
            every_s=self._every_s,
            messages=_pop_flash(session),
        )
        body += f'<div class="charts">{self._finished_chart(now)}</div>'
        return self._page("200 OK", "Queues", body, active="/", refresh=True, session=session)

    def _queue_page(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        query = parse_qs(str(environ.get("QUERY_STRING", "")))
        name = (query.get("name") or [""])[0]
        state = (query.get("state") or [_DEFAULT_STATE])[0]
        states = _live.job_states()
        if state not in states:
            return self._page(
                "404 Not Found",
                "Queue",
                _pages.message_body("No such state", f"{state!r} is none of {', '.join(states)}."),
            )
        after = _int_arg(query, "after")
        now = datetime.now(timezone.utc)
        try:
            queue = self._queue_handle(name)
            stats = next((s for s in self._store.queue_stats() if s.queue == name), None)
            listing = _live.list_state(queue, state, after, now)
            counts = _live.state_counts(stats, queue, states)
            paused = self._paused(queue, stats)
        except AlkstoreError as exc:
            status = "404 Not Found" if not name else "503 Service Unavailable"
            return self._page(status, "Queue", self._read_failed(f"Queue {name!r}", exc))
        body = _jobs.queue_body(
            name,
            state,
            states,
            counts,
            listing,
            now=now,
            after=after,
            samples=self._history.samples(),
            scraping=self._sampler.scraping,
            every_s=self._every_s,
            actions=self._actions(session),
            messages=_pop_flash(session),
            paused=paused,
        )
        body += f'<div class="charts">{self._finished_chart(now, name)}</div>'  # O-5
        return self._page("200 OK", f"Queue {name}", body, active="/", session=session)

    def _paused(self, queue: Queue, stats: QueueStats | None) -> bool | None:
        """Q-27: whether the queue is paused; ``None`` when the engine cannot pause."""
        if Capability.PAUSE not in self._store.capabilities:
            return None
        return stats.paused if stats is not None else queue.is_paused()

    def _job_page(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        query = parse_qs(str(environ.get("QUERY_STRING", "")))
        name = (query.get("queue") or [""])[0]
        job_id = _int_arg(query, "id")
        if job_id < 1:
            return self._page("404 Not Found", "No such job", _jobs.missing_job_body(name, None))
        try:
            info = self._queue_handle(name).get_job(job_id)
        except AlkstoreError as exc:
            status = "404 Not Found" if not name else "503 Service Unavailable"
            return self._page(status, "Job", self._read_failed(f"Job {job_id}", exc))
        if info is None:
            body = _jobs.missing_job_body(name, job_id)
            return self._page("404 Not Found", "No such job", body, active="/", session=session)
        body = _jobs.job_body(
            info,
            now=datetime.now(timezone.utc),
            actions=self._actions(session),
            messages=_pop_flash(session),
        )
        return self._page("200 OK", f"Job {job_id}", body, active="/", session=session)

    def _healthz(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        """``ok`` while the store answers a read (the overview's own), else
        503; nothing else is said, so it needs no token."""
        plain = [("Content-Type", "text/plain; charset=utf-8")]
        try:
            self._store.queue_stats()
        except Exception as exc:
            log.warning("health check: the store did not answer: %s", exc)
            return _Response("503 Service Unavailable", "store unavailable\n", plain)
        return _Response("200 OK", "ok\n", plain)

    def _listing(self, title: str, render: Callable[[], str]) -> _Handler:
        """The handler of a page that only lists what *render* reads (at the
        path that is its *title* in lower case); a read that fails is said on
        the page in place of the list."""
        active = f"/{title.lower()}"

        def page(environ: WSGIEnviron, session: Session | None) -> _Response:
            try:
                body = render()
            except AlkstoreError as exc:
                body = self._read_failed(title, exc)
            return self._page("200 OK", title, body, active=active, session=session)

        return page

    def _schedules_body(self) -> str:
        return _pages.schedules_body(self._store.schedules(), datetime.now(timezone.utc))

    def _streams_body(self) -> str:
        return _pages.streams_body(self._store.stream_stats())

    def _locks_body(self) -> str:
        return _pages.locks_body(self._store.held_locks(), datetime.now(timezone.utc))

    # O-5, O-6: the workers' registry.
    def _workers_body(self) -> str:
        if Capability.WORKERS not in self._store.capabilities:
            return _pages.message_body("Workers", "This engine keeps no workers' registry.")
        now = datetime.now(timezone.utc)
        since = now - timedelta(minutes=_workers.MINUTES)
        return _workers.workers_body(
            self._store.workers(), self._store.worker_counts(since=since), now
        )

    def _finished_chart(self, now: datetime, queue: str | None = None) -> str:
        """The chart of finished jobs per minute (O-5's counts) of every
        queue or of *queue*; a read that fails is said in its place."""
        if Capability.WORKERS not in self._store.capabilities:
            return _workers.finished_chart(None, now)
        try:
            since = now - timedelta(minutes=_workers.MINUTES)
            counts = self._store.worker_counts(since=since)
            return _workers.finished_chart(counts, now, queue)
        except AlkstoreError as exc:
            log.warning("reading the workers' counts failed: %s", exc)
            return '<div class="card" id="finished-chart"><p>Reading the counts failed.</p></div>'

    # ------------------------------------------------------------ sessions

    def _token_login(self, path: str, query: dict[str, list[str]]) -> _Response:
        presented = query.pop("token")[0]
        if not self._guard.check_token(presented):
            return self._page(
                "403 Forbidden", "Log in", _pages.login_body(True, self._guard.public, path)
            )
        session = self._guard.new_session()
        rest = urlencode(query, doseq=True)
        return _redirect(path + (f"?{rest}" if rest else ""), self._guard.set_cookie(session))

    def _login_form(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._page("200 OK", "Log in", _pages.login_body(False, self._guard.public, "/"))

    def _login(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        form = self._form(environ)
        presented = (form.get("token") or [""])[0]
        next_path = (form.get("next") or ["/"])[0]
        if not next_path.startswith("/") or next_path.startswith("//"):
            next_path = "/"
        if not self._guard.check_token(presented):
            return self._page(
                "403 Forbidden", "Log in", _pages.login_body(True, self._guard.public, next_path)
            )
        fresh = self._guard.new_session()
        return _redirect(next_path, self._guard.set_cookie(fresh))

    def _logout(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        form = self._form(environ)
        if session is not None and self._guard.csrf_ok(session, (form.get("csrf") or [""])[0]):
            self._guard.end_session(session)
        return _redirect("/", self._guard.clear_cookie())

    # ------------------------------------------------------------- changes

    def _change_allowed(
        self, session: Session | None, form: dict[str, list[str]], action: str
    ) -> tuple[Session | None, _Response | None]:
        if self._guard.read_only:
            return None, self._forbidden("This dashboard runs read-only.")
        if session is None:
            return None, self._forbidden("Changes need the dashboard's token: log in first.")
        if not self._guard.csrf_ok(session, (form.get("csrf") or [""])[0]):
            return None, self._forbidden("The form was stale or not this dashboard's; reload it.")
        caps = self._store.capabilities
        if action in ("redrive", "purge") and Capability.DEAD_LETTER_ADMIN not in caps:
            return None, self._forbidden("This engine does not support redrive and purge.")
        if action == "run-now" and Capability.RUN_NOW not in caps:
            return None, self._forbidden("This engine cannot run a job now.")
        if action in ("pause", "resume") and Capability.PAUSE not in caps:
            return None, self._forbidden("This engine cannot pause queues.")
        return session, None

    @staticmethod
    def _ids(form: dict[str, list[str]]) -> list[int] | None:
        """The ``ids`` of the form, ``None`` for ``all=1``; raises ValueError."""
        if (form.get("all") or [""])[0] == "1":
            return None
        ids = sorted({int(v) for v in form.get("ids", []) if v.strip()})
        if len(ids) > _MAX_IDS:
            raise ValueError(f"at most {_MAX_IDS} jobs at once")
        if any(i < 1 for i in ids):
            raise ValueError("job ids are positive")
        return ids

    def _redrive(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._change(environ, session, "redrive")

    def _purge(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._change(environ, session, "purge")

    def _cancel(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._change(environ, session, "cancel")

    def _run_now(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._change(environ, session, "run-now")

    def _pause(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._pause_change(environ, session, True)

    def _resume(self, environ: WSGIEnviron, session: Session | None) -> _Response:
        return self._pause_change(environ, session, False)

    def _pause_change(
        self, environ: WSGIEnviron, session: Session | None, pause: bool
    ) -> _Response:
        """Q-27: pause (after its confirmation) or resume the queue ``name``."""
        form = self._form(environ)
        action = "pause" if pause else "resume"
        allowed, refusal = self._change_allowed(session, form, action)
        if refusal is not None:
            return refusal
        assert allowed is not None
        name = (form.get("name") or [""])[0]
        back = {k: v for k, v in self._back(form).items() if k == "state"}
        listing = "/queue?" + urlencode({"name": name, **back})
        if pause and (form.get("confirm") or [""])[0] != "1":
            body = _jobs.confirm_pause_page(name, allowed.csrf, back)
            return self._page("200 OK", "Confirm", body, active="/", session=allowed)
        try:
            queue = self._queue_handle(name)
            changed = queue.pause() if pause else queue.resume()
        except AlkstoreError as exc:
            log.warning("%s of queue %r failed: %s", action, name, exc)
            allowed.flash.append((f"{action.capitalize()} failed: {exc}", False))
            return _redirect(listing)
        label = _pages.queue_label(name)
        if pause:
            text = f"Paused queue {label}: no worker claims its jobs until it is resumed."
            if not changed:
                text = f"Queue {label} was paused already."
        else:
            text = f"Resumed queue {label}." if changed else f"Queue {label} was not paused."
        log.info("dashboard: %s of queue %r (changed: %s)", action, name, changed)
        allowed.flash.append((text, True))
        return _redirect(listing)

    @staticmethod
    def _back(form: dict[str, list[str]]) -> dict[str, str]:
        """The fields that say where a change returns to: the listing's
        ``state``, and ``from=job`` for the job's own page."""
        back: dict[str, str] = {}
        state = (form.get("state") or [""])[0]
        if state in _live.job_states():
            back["state"] = state
        if (form.get("from") or [""])[0] == "job":
            back["from"] = "job"
        return back

    def _change(self, environ: WSGIEnviron, session: Session | None, action: str) -> _Response:
        form = self._form(environ)
        allowed, refusal = self._change_allowed(session, form, action)
        if refusal is not None:
            return refusal
        assert allowed is not None
        name = (form.get("name") or [""])[0]
        back = self._back(form)
        listing = "/queue?" + urlencode(
            {"name": name, **{k: v for k, v in back.items() if k == "state"}}
        )
        try:
            ids = self._ids(form)
        except ValueError:
            allowed.flash.append(("Those job ids are not valid.", False))
            return _redirect(listing)
        if ids == [] or (ids is None and action in ("cancel", "run-now")):
            allowed.flash.append(("No job was selected.", False))
            return _redirect(listing)
        confirmed = (form.get("confirm") or [""])[0] == "1"
        if not confirmed and (ids is None or action not in ("redrive", "run-now")):
            try:
                dead_now = next((s.dead for s in self._store.queue_stats() if s.queue == name), 0)
            except AlkstoreError as exc:
                return self._page(
                    "503 Service Unavailable", "Confirm", self._read_failed("Queue", exc)
                )
            body = _jobs.confirm_page(action, name, ids, dead_now, allowed.csrf, back)
            return self._page("200 OK", "Confirm", body, active="/", session=allowed)
        try:
            queue = self._queue_handle(name)
            if action == "redrive":
                moved = queue.redrive(ids)
                text = f"Redrove {moved:,} job(s) to pending."
                missed = "were no longer dead"
            elif action == "purge":
                moved = queue.purge_dead(ids)
                text = f"Purged {moved:,} dead job(s)."
                missed = "were no longer dead"
            elif action == "run-now":  # O-6
                assert ids is not None
                moved = sum(queue.run_now(i) for i in ids)
                text = f"Made {moved:,} job(s) ready to run now."
                missed = "were no longer pending"
            else:
                assert ids is not None
                moved = sum(queue.cancel(i) for i in ids)
                text = f"Cancelled {moved:,} job(s)."
                missed = "were no longer pending or processing"
        except AlkstoreError as exc:
            log.warning("%s on queue %r failed: %s", action, name, exc)
            allowed.flash.append((f"{action.capitalize()} failed: {exc}", False))
            return _redirect(listing)
        if ids is not None and moved < len(ids):
            text += f" {len(ids) - moved:,} of those selected {missed}."
        log.info("dashboard: %s on queue %r: %d job(s)", action, name, moved)
        allowed.flash.append((text, True))
        again = action in ("redrive", "run-now")  # the job is still there
        if back.get("from") == "job" and again and ids is not None and len(ids) == 1:
            return _redirect("/job?" + urlencode({"queue": name, "id": ids[0]}))
        # A purged or cancelled job is gone: back to where it was listed.
        return _redirect(listing)


def _int_arg(query: dict[str, list[str]], key: str) -> int:
    """A non-negative integer argument of the query string (0 when absent or
    not one)."""
    try:
        return max(0, int((query.get(key) or ["0"])[0]))
    except ValueError:
        return 0


def _pop_flash(session: Session | None) -> list[tuple[str, bool]]:
    if session is None or not session.flash:
        return []
    messages = list(session.flash)
    session.flash.clear()
    return messages
