"""O-4 and O-6 without a browser: the dashboard's pages, numbers, actions
and access rules, over real HTTP against a dashboard serving a real store on
each engine.

The browser tests (``test_dashboard_browser.py``) drive the same pages in
headless Chromium.
"""

from __future__ import annotations

import html
import http.client
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlencode, urlsplit
from wsgiref.util import setup_testing_defaults

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, QueueStats, Store
from alkstore.cli import main
from alkstore.observability import record_finished, serve_worker_metrics
from alkstore.observability.dashboard import DashboardServer, serve_dashboard
from alkstore.observability.dashboard._app import DashboardApp
from alkstore.observability.dashboard._auth import Guard
from alkstore.observability.dashboard._sampler import (
    History,
    Sample,
    Sampler,
    backlog_series,
    depth_series,
    finished_series,
)
from alkstore.observability.dashboard._svg import Series, line_chart, nice_ceiling

from .conftest import Running, eventually, state_counts

EVIL = "<script>alert(1)</script>"

pytestmark = pytest.mark.clause("O-4")


class Response:
    def __init__(self, raw: http.client.HTTPResponse) -> None:
        self.status = raw.status
        self.headers = raw.headers
        self.text = raw.read().decode("utf-8")


class Client:
    """A browser's worth of HTTP: one cookie jar, no redirects followed."""

    def __init__(self, server: DashboardServer) -> None:
        parts = urlsplit(server.url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        fields: dict[str, str | list[str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=20)
        all_headers = {"Host": f"{self.host}:{self.port}", **(headers or {})}
        if self.cookies:
            all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if fields is not None:
            body = urlencode(fields, doseq=True)
            all_headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=all_headers)
            response = Response(conn.getresponse())
        finally:
            conn.close()
        for value in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            cookie_value = rest.split(";", 1)[0]
            if "Max-Age=0" in value:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = cookie_value
        return response

    def get(self, path: str, **headers: str) -> Response:
        return self.request("GET", path, headers=headers)

    def post(
        self, path: str, fields: dict[str, str | list[str]], headers: dict[str, str] | None = None
    ) -> Response:
        return self.request("POST", path, fields, headers)

    def login(self, server: DashboardServer) -> None:
        answer = self.get(f"/?token={server.token}")
        assert answer.status == 303, answer.text


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page offers no form"
    return html.unescape(found.group(1))


def signed_in_csrf(client: Client, dashboard: DashboardServer) -> str:
    """Sign *client* in and return the CSRF token of the emails queue's page."""
    client.login(dashboard)
    return csrf_of(client.get("/queue?name=emails").text)


#: What :func:`signed_in` gives: the dead emails' ids and the CSRF token.
SignedIn = tuple[list[int], str]


@pytest.fixture
def signed_in(store: Store, dashboard: DashboardServer, client: Client) -> SignedIn:
    """*store* seeded (:func:`seed`) and *client* signed in: the ids of the
    three dead emails and the CSRF token of the emails queue's page."""
    dead = seed(store)
    return dead, signed_in_csrf(client, dashboard)


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def queue_rows(page: str) -> dict[str, dict[str, int]]:
    """The overview table: ``{queue: {state: count}}``."""
    rows: dict[str, dict[str, int]] = {}
    for name, row in re.findall(r'<tr data-queue="([^"]*)">(.*?)</tr>', page):
        cells = re.findall(r'data-state="(\w+)">(.*?)</td>', row)
        rows[html.unescape(name)] = {s: int(text_of(v).replace(",", "")) for s, v in cells}
    return rows


def dead_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page)]


def seed(store: Store) -> list[int]:
    """Two queues with jobs in every state (a waiting one in reports); the
    ids of three dead emails."""
    emails = store.queue("emails", QueueOpts(max_attempts=1))
    emails.enqueue_many([{"to": f"u{i}@example.com"} for i in range(8)])
    dead = []
    for i in range(3):
        job = emails.claim("w1")
        assert job is not None
        job.fail(f"SMTP 550: mailbox {i} unavailable")
        dead.append(job.id)
    assert emails.claim("w1") is not None
    from alkstore import EnqueueOpts

    emails.enqueue({"later": True}, EnqueueOpts(delay_s=3600))
    reports = store.queue("reports")
    daily = reports.enqueue({"kind": "daily"})
    reports.enqueue({"kind": "summary"}, EnqueueOpts(after=[daily]))  # waiting (WF-1)
    return dead


@pytest.fixture
def dashboard(store: Store) -> Iterator[DashboardServer]:
    with serve_dashboard(store, "127.0.0.1:0", sample_every_s=0.1) as server:
        yield server


@pytest.fixture
def client(dashboard: DashboardServer) -> Client:
    return Client(dashboard)


# --------------------------------------------------------------- the numbers


def test_overview_counts_are_queue_stats(store: Store, client: Client) -> None:
    seed(store)
    page = client.get("/")
    assert page.status == 200
    assert queue_rows(page.text) == state_counts(store)
    assert '<meta http-equiv="refresh"' in page.text


def test_queue_page_lists_dead_letters_with_their_errors(store: Store, client: Client) -> None:
    dead = seed(store)
    page = client.get("/queue?" + urlencode({"name": "emails"}))
    assert page.status == 200
    assert dead_ids(page.text) == dead
    for i in range(3):
        assert f"SMTP 550: mailbox {i} unavailable" in page.text
    assert "u0@example.com" in page.text  # the payload, shortened


def test_dead_letters_page_through(store: Store, client: Client) -> None:
    q = store.queue("many", QueueOpts(max_attempts=1))
    q.enqueue_many([{"n": i} for i in range(60)])
    for job in q.claim_batch("w", 60):
        job.fail("no")
    first = client.get("/queue?name=many")
    ids = dead_ids(first.text)
    assert len(ids) == 50
    nxt = re.search(r'href="(/queue\?name=many&amp;state=dead&amp;after=\d+)">next', first.text)
    assert nxt is not None
    second = client.get(html.unescape(nxt.group(1)))
    assert len(dead_ids(second.text)) == 10
    assert set(ids).isdisjoint(dead_ids(second.text))


def test_schedules_page_shows_next_fires(store: Store, client: Client) -> None:
    sched = store.schedule("nightly", "0 3 * * *", "reports", {"kind": "nightly"})
    page = client.get("/schedules")
    assert page.status == 200
    assert 'data-schedule="nightly"' in page.text
    assert sched.next_fire_at.strftime("%Y-%m-%d %H:%M:%S") in page.text


def test_charts_draw_the_samples_taken_in_memory(store: Store, dashboard: DashboardServer) -> None:
    seed(store)
    client = Client(dashboard)
    page = eventually(
        lambda: (p := client.get("/")).text.count("<polyline") >= 4 and p,
        what="samples drawn as lines",
    )
    assert 'id="depth-chart"' in page.text and 'id="backlog-chart"' in page.text
    assert "backlog change/s" in page.text


# ------------------------------------------------------------ access rules


def test_reading_is_open_on_localhost_but_shows_no_forms(store: Store, client: Client) -> None:
    seed(store)
    page = client.get("/queue?name=emails")
    assert page.status == 200
    assert 'name="csrf"' not in page.text
    assert "need the dashboard&#x27;s token" in page.text


def test_a_change_without_a_session_is_refused(store: Store, client: Client) -> None:
    dead = seed(store)
    answer = client.post("/queue/redrive", {"name": "emails", "ids": str(dead[0]), "csrf": "x"})
    assert answer.status == 403
    assert store.queue("emails").stats().dead == 3


def test_the_token_link_starts_a_session_and_leaves_the_address(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    seed(store)
    answer = client.get(f"/queue?name=emails&token={dashboard.token}")
    assert answer.status == 303
    assert answer.headers["Location"] == "/queue?name=emails"
    cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert dashboard.token not in cookie
    page = client.get("/queue?name=emails")
    assert csrf_of(page.text)
    assert dashboard.token not in page.text


def test_a_wrong_token_starts_nothing(client: Client) -> None:
    answer = client.get("/?token=guess")
    assert answer.status == 403
    assert not client.cookies


def test_the_login_form_takes_the_token(dashboard: DashboardServer, client: Client) -> None:
    assert client.post("/login", {"token": "nope"}).status == 403
    answer = client.post("/login", {"token": dashboard.token, "next": "/schedules"})
    assert answer.status == 303 and answer.headers["Location"] == "/schedules"
    assert client.cookies


def test_a_change_needs_this_sessions_csrf_token(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    dead = seed(store)
    client.login(dashboard)
    for csrf in ("", "forged"):
        answer = client.post(
            "/queue/redrive", {"name": "emails", "ids": str(dead[0]), "csrf": csrf}
        )
        assert answer.status == 403
    other = Client(dashboard)
    stolen = signed_in_csrf(other, dashboard)
    answer = client.post("/queue/redrive", {"name": "emails", "ids": str(dead[0]), "csrf": stolen})
    assert answer.status == 403
    assert store.queue("emails").stats().dead == 3


def test_a_cross_site_post_is_refused(store: Store, client: Client, signed_in: SignedIn) -> None:
    dead, csrf = signed_in
    fields: dict[str, str | list[str]] = {"name": "emails", "ids": str(dead[0]), "csrf": csrf}
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "null"},  # a sandboxed frame, or a page that hides its origin
        {"Sec-Fetch-Site": "cross-site"},
    ):
        assert client.post("/queue/redrive", fields, headers).status == 403
    assert store.queue("emails").stats().dead == 3


def test_a_get_never_changes_anything(client: Client) -> None:
    assert client.get("/queue/redrive?name=emails&all=1").status == 405
    assert client.get("/queue/purge?name=emails&all=1").status == 405


def test_the_host_header_must_name_this_dashboard(dashboard: DashboardServer) -> None:
    client = Client(dashboard)
    port = dashboard.port
    assert client.get("/", Host=f"localhost:{port}").status == 200
    assert client.get("/", Host=f"[::1]:{port}").status == 200
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}"):
        answer = client.get("/", Host=host)
        assert answer.status == 421, host
        assert "alkstore" not in answer.text


def test_read_only_shows_no_forms_and_refuses_changes(store: Store) -> None:
    dead = seed(store)
    with serve_dashboard(store, "127.0.0.1:0", read_only=True) as server:
        client = Client(server)
        client.login(server)
        page = client.get("/queue?name=emails")
        assert 'name="csrf"' not in page.text and "read-only" in page.text
        answer = client.post(
            "/queue/purge", {"name": "emails", "ids": str(dead[0]), "csrf": "x", "confirm": "1"}
        )
        assert answer.status == 403
    assert store.queue("emails").stats().dead == 3


def _call(app: DashboardApp, path: str, **environ: str) -> tuple[str, dict[str, str], str]:
    env: dict[str, object] = {"PATH_INFO": path, **environ}
    setup_testing_defaults(env)
    env["HTTP_HOST"] = environ.get("HTTP_HOST", "dash.internal:8765")
    got: dict[str, object] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = status, dict(headers)

    body = b"".join(app(env, start_response)).decode()
    return str(got["status"]), got["headers"], body  # type: ignore[return-value]


def test_bound_beyond_localhost_every_page_needs_the_token(store: Store) -> None:
    dead = seed(store)
    guard = Guard(host="0.0.0.0", token="s3cret-token", read_only=False)
    guard.port = 8765
    history = History(10)
    app = DashboardApp(
        store, guard, history, Sampler(store, history, 1.0), every_s=1.0, refresh_s=None
    )
    for path in ("/", "/queue", "/job", "/schedules", "/streams", "/locks"):
        status, _, body = _call(app, path, QUERY_STRING=f"name=emails&queue=emails&id={dead[0]}")
        assert status.startswith("401"), path
        assert "SMTP 550" not in body and "emails" not in body
    status, headers, _ = _call(app, "/", QUERY_STRING="token=s3cret-token")
    assert status.startswith("303")
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    status, _, body = _call(app, "/", HTTP_COOKIE=cookie)
    assert status.startswith("200") and "emails" in body
    # A wildcard bind with names to answer to checks the Host against them.
    named = Guard(host="0.0.0.0", token="t", read_only=False, allowed_hosts=["dash.internal"])
    named.port = 8765
    assert named.host_ok({"HTTP_HOST": "dash.internal:8765"})
    assert not named.host_ok({"HTTP_HOST": "evil.example:8765"})


def test_store_text_is_escaped_and_no_script_may_run(store: Store, client: Client) -> None:
    q = store.queue(EVIL, QueueOpts(max_attempts=1))
    q.enqueue({"html": "<img src=x onerror=alert(2)>"})
    job = q.claim("w")
    assert job is not None
    job.fail('<img src=x onerror=alert(3)> "quoted"')
    store.schedule(EVIL, "@every 1h", EVIL)
    for path in ("/", "/queue?" + urlencode({"name": EVIL}), "/schedules"):
        page = client.get(path)
        assert page.status == 200, path
        assert "<script" not in page.text and "<img" not in page.text, path
        csp = page.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script" not in csp
        assert page.headers["X-Frame-Options"] == "DENY"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in client.get("/").text


# --------------------------------------------------------- redrive and purge


def test_a_redrive_of_all_asks_first(store: Store, client: Client, signed_in: SignedIn) -> None:
    _, csrf = signed_in
    page = client.post("/queue/redrive", {"name": "emails", "all": "1", "csrf": csrf})
    assert page.status == 200
    assert "Redrive all 3 dead jobs of queue emails?" in text_of(page.text)
    assert 'name="confirm" value="1"' in page.text
    assert store.queue("emails").stats().dead == 3


def test_a_purge_always_asks_first(store: Store, client: Client, signed_in: SignedIn) -> None:
    dead, csrf = signed_in
    page = client.post(
        "/queue/purge", {"name": "emails", "ids": [str(dead[0]), str(dead[1])], "csrf": csrf}
    )
    assert page.status == 200
    assert "Purge 2 selected dead job(s) of queue emails?" in text_of(page.text)
    assert store.queue("emails").stats().dead == 3


def test_nothing_selected_is_said_so(client: Client, signed_in: SignedIn) -> None:
    _, csrf = signed_in
    answer = client.post("/queue/redrive", {"name": "emails", "csrf": csrf})
    assert answer.status == 303
    assert "No job was selected." in client.get(answer.headers["Location"]).text


def test_a_redrive_through_the_form_moves_the_job_back(
    store: Store, client: Client, signed_in: SignedIn
) -> None:
    dead, csrf = signed_in
    answer = client.post("/queue/redrive", {"name": "emails", "ids": str(dead[0]), "csrf": csrf})
    assert answer.status == 303
    page = client.get(answer.headers["Location"])
    assert "Redrove 1 job(s) to pending." in page.text
    assert dead_ids(page.text) == dead[1:]
    info = store.queue("emails").get_job(dead[0])
    assert info is not None and info.state is JobState.PENDING


def test_confirmed_redrive_of_all_and_purge(
    store: Store, client: Client, signed_in: SignedIn
) -> None:
    dead, csrf = signed_in
    purged = client.post(
        "/queue/purge", {"name": "emails", "ids": str(dead[0]), "csrf": csrf, "confirm": "1"}
    )
    assert purged.status == 303
    assert store.queue("emails").get_job(dead[0]) is None
    answer = client.post(
        "/queue/redrive", {"name": "emails", "all": "1", "csrf": csrf, "confirm": "1"}
    )
    assert "Redrove 2 job(s)" in client.get(answer.headers["Location"]).text
    assert store.queue("emails").stats().dead == 0


def test_streams_page_shows_each_consumers_lag(store: Store, client: Client) -> None:
    s = store.stream("orders")
    for i in range(5):
        s.publish({"n": i})
    s.commit("mailer", 2)
    page = client.get("/streams")
    assert page.status == 200
    assert 'data-stream="orders"' in page.text
    assert re.search(r'data-consumer="mailer">.*?data-lag="3"', page.text, re.S)


def test_locks_page_shows_holders_and_tokens(store: Store, client: Client) -> None:
    lock = store.lock("backup", ttl_s=60, owner="host-a")
    assert lock is not None
    page = client.get("/locks")
    assert page.status == 200
    row = re.search(r'<tr data-lock="backup">(.*?)</tr>', page.text)
    assert row is not None
    assert "host-a" in row.group(1) and f">{lock.token}<" in row.group(1)


# ------------------------------------------------------------------ samples


def _sample(t: float, live: int, counters: dict[str, dict[tuple[str, str], float]]) -> Sample:
    return Sample(
        at=datetime.now(timezone.utc) + timedelta(seconds=t),
        mono=t,
        stats={"q": QueueStats("q", live, 0, 0, 1)},
        counters=counters,
    )


def test_throughput_comes_from_counter_deltas_per_endpoint() -> None:
    a, b = "http://a/metrics", "http://b/metrics"
    samples = [
        _sample(0, 10, {a: {("q", "acked"): 100}}),
        _sample(2, 6, {a: {("q", "acked"): 110}, b: {("q", "dead"): 1}}),
        _sample(4, 6, {a: {("q", "acked"): 4}, b: {("q", "dead"): 3}}),  # a restarted
        _sample(6, 8, {b: {("q", "dead"): 3, ("q", "retried"): 2}}),  # a did not answer
    ]
    rates = finished_series(samples, "q")
    assert rates["acked/s"] == [None, 5.0, 2.0, 0.0]
    assert rates["dead/s"] == [None, 0.0, 1.0, 0.0]
    assert rates["retried/s"] == [None, 0.0, 0.0, 1.0]
    assert backlog_series(samples, "q") == {"backlog change/s": [None, -2.0, 0.0, 1.0]}
    assert depth_series(samples, "q")["pending"] == [10, 6, 6, 8]
    assert depth_series(samples, "absent")["dead"] == [0, 0, 0, 0]


def test_the_dashboard_charts_finished_jobs_from_a_workers_endpoint(store: Store) -> None:
    store.queue("q").enqueue(1)
    with serve_worker_metrics("127.0.0.1:0") as worker:
        with serve_dashboard(
            store, "127.0.0.1:0", sample_every_s=0.1, scrape=[worker.url]
        ) as server:
            client = Client(server)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                record_finished("q", "acked")
                page = client.get("/")
                legend = re.search(r"acked/s ([0-9.k]+)<", page.text)
                if legend and float(legend.group(1).rstrip("k")) > 0:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("no acked/s rate charted")
    assert "from the workers&#x27; metrics endpoints" in page.text


def test_chart_scales_round_up() -> None:
    assert [nice_ceiling(v) for v in (0, 0.3, 1, 7, 11, 240, 251)] == [1, 0.5, 1, 10, 20, 250, 500]
    svg = line_chart("t", [4.0, 2.0, 0.0], [Series("s", "#000", [1.0, None, -3.0])])
    assert svg.startswith("<svg") and "<circle" in svg and svg.count("<polyline") == 0
    assert "collecting samples" in line_chart("t", [], [Series("s", "#000", [])])


# ------------------------------------------------------------------ the command


def test_dashboard_command_opens_no_missing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.db"
    assert main(["--url", f"sqlite:///{missing}", "dashboard", "--bind", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("alkstore: error: no store at") and "`alkstore migrate`" in err
    assert not missing.exists()


def test_dashboard_command_serves_until_sigterm(
    engine_url: str, store: Store, background: Callable[..., Running]
) -> None:
    seed(store)
    running = background("--url", engine_url, "dashboard", "--bind", "127.0.0.1:0")
    login = running.wait_for(r"sign in with: (http://\S+)").group(1)
    parts = urlsplit(login)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
    conn.request("GET", "/")
    answer = conn.getresponse()
    page = answer.read().decode()
    conn.close()
    assert answer.status == 200
    assert queue_rows(page) == state_counts(store)
    assert running.stop() == 0


# ------------------------------------------------------ live work (O-6)
#
# These prove SPEC O-6, the dashboard of live work, through the public API
# (the engine half, run now, is the suite's: contract_operate.py).


def listed_ids(page: str, state: str) -> list[int]:
    """The ids of the listing of *state* on a queue's page."""
    found = re.search(rf'<table id="{state}" class="jobs".*?</table>', page, re.S)
    return [] if found is None else dead_ids(found.group(0))


def tab_counts(page: str) -> dict[str, str]:
    """The count each state's tab shows on a queue's page."""
    return dict(re.findall(r'<a class="kpi[^"]*" data-state="(\w+)"[^>]*><b>([^<]*)</b>', page))


def seed_live(store: Store) -> dict[str, list[int]]:
    """The jobs of queue ``live`` in every state, by state: two pending, one
    scheduled, one processing (claimed by ``w-7``), one waiting on it, one
    dead, one done."""
    from alkstore import EnqueueOpts

    q = store.queue("live", QueueOpts(max_attempts=2, result_ttl_s=3600))
    done_id = q.enqueue({"step": "done"})
    done = q.claim("w-1")
    assert done is not None and done.id == done_id
    assert done.ack(result={"sent": 3, "note": "<b>bold</b>"})
    dead_id = q.enqueue({"step": "dead"})
    dying = q.claim("w-2")
    assert dying is not None and dying.id == dead_id
    dying.fail("ValueError: no such template\nTraceback line 2")
    running_id = q.enqueue({"step": "running"})
    running = q.claim("w-7")
    assert running is not None and running.id == running_id
    pending = q.enqueue_many([{"step": "pending", "n": n} for n in range(2)])
    scheduled = q.enqueue({"step": "later"}, EnqueueOpts(delay_s=3600))
    waiting = q.enqueue({"step": "after running"}, EnqueueOpts(after=(running_id,)))
    return {
        "waiting": [waiting],
        "pending": list(pending),
        "scheduled": [scheduled],
        "processing": [running_id],
        "dead": [dead_id],
        "done": [done_id],
    }


@pytest.mark.clause("O-6")
def test_the_queue_page_offers_every_state_of_the_contract(store: Store, client: Client) -> None:
    """O-6: the states are JobState's, waiting first, with scheduled after
    pending; each tab counts its jobs and lists exactly them."""
    from alkstore.observability.dashboard._live import job_states

    states = job_states()
    assert states == ("waiting", "pending", "scheduled", "processing", "dead", "done")
    assert {s.value for s in JobState} <= set(states)
    jobs = seed_live(store)
    for state in states:
        page = client.get("/queue?" + urlencode({"name": "live", "state": state}))
        assert page.status == 200, state
        assert listed_ids(page.text, state) == jobs[state], state
        assert tab_counts(page.text) == {s: str(len(jobs[s])) for s in states}
        assert f'data-state="{state}" href' in page.text and 'aria-current="page"' in page.text
    processing = client.get("/queue?name=live&state=processing").text
    assert "w-7" in processing
    done = client.get("/queue?name=live&state=done").text
    assert "&quot;sent&quot;: 3" in done and "<b>bold</b>" not in done
    assert client.get("/queue?name=live&state=nonsense").status == 404


@pytest.mark.clause("O-6")
def test_the_default_state_is_dead_and_the_overview_links_each_count(
    store: Store, client: Client
) -> None:
    """O-6: a queue's page without a state shows its dead letters; each
    overview count links to its state."""
    jobs = seed_live(store)
    assert listed_ids(client.get("/queue?name=live").text, "dead") == jobs["dead"]
    overview = client.get("/").text
    for state in ("pending", "scheduled", "processing", "dead"):
        assert f'href="/queue?name=live&amp;state={state}"' in overview


@pytest.mark.clause("O-6")
def test_pending_and_scheduled_jobs_page_through(store: Store, client: Client) -> None:
    """O-6: ready and scheduled jobs are listed apart, fifty a page."""
    from alkstore import EnqueueOpts

    q = store.queue("paged")
    ready = q.enqueue_many([{"n": i} for i in range(60)])
    later = [q.enqueue({"late": i}, EnqueueOpts(delay_s=600)) for i in range(3)]
    first = client.get("/queue?name=paged&state=pending")
    assert listed_ids(first.text, "pending") == list(ready[:50])
    nxt = re.search(r'href="(/queue\?name=paged&amp;state=pending&amp;after=\d+)">next', first.text)
    assert nxt is not None
    second = client.get(html.unescape(nxt.group(1))).text
    assert listed_ids(second, "pending") == list(ready[50:])
    assert "next page" not in second and "first page" in second
    scheduled = client.get("/queue?name=paged&state=scheduled").text
    assert listed_ids(scheduled, "scheduled") == later


@pytest.mark.clause("O-6")
def test_the_job_page_shows_stamps_claim_error_payload_and_result(
    store: Store, client: Client
) -> None:
    """O-6: a job's page shows its state, stamps, claim, error, payload, kept result
    and the parents a waiting job still waits on."""
    jobs = seed_live(store)
    dead = client.get(f"/job?queue=live&id={jobs['dead'][0]}")
    assert dead.status == 200
    assert re.search(r'data-field="state">dead<', dead.text)
    assert 'data-field="attempts">1 of 2<' in dead.text
    assert "ValueError: no such template\nTraceback line 2" in html.unescape(dead.text)
    assert "&quot;step&quot;: &quot;dead&quot;" in dead.text
    assert "3600 s" in dead.text  # the result_ttl_s stamp
    assert 'data-field="result"' not in dead.text

    done = client.get(f"/job?queue=live&id={jobs['done'][0]}").text
    info = store.queue("live").get_job(jobs["done"][0])
    assert info is not None and info.finished_at is not None
    assert re.search(r'data-field="state">done<', done)
    assert info.finished_at.strftime("%Y-%m-%d %H:%M:%S") in done
    result = re.search(r'<pre class="" data-field="result">(.*?)</pre>', done, re.S)
    assert result is not None
    assert html.unescape(result.group(1)) == '{\n  "sent": 3,\n  "note": "<b>bold</b>"\n}'

    running = client.get(f"/job?queue=live&id={jobs['processing'][0]}").text
    assert "w-7" in running and re.search(r'data-field="state">processing<', running)
    later = client.get(f"/job?queue=live&id={jobs['scheduled'][0]}").text
    assert re.search(r'data-field="state">scheduled<', later) and "Runs at" in later

    # WF-1: a waiting job names the parents it still waits on; others have no such row.
    waiting = client.get(f"/job?queue=live&id={jobs['waiting'][0]}").text
    assert re.search(r'data-field="state">waiting<', waiting)
    assert f'data-field="waiting-on">{jobs["processing"][0]}<' in waiting
    assert 'data-field="waiting-on"' not in later


@pytest.mark.clause("O-6")
def test_the_job_page_shows_the_trace_id_of_the_enqueue(store: Store, client: Client) -> None:
    """O-6: the job page shows the trace id of the span the job was enqueued in (O-2)."""
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    try:
        with provider.get_tracer("app").start_as_current_span("request") as span:
            job_id = store.queue("traced").enqueue({"n": 1})
    finally:
        provider.shutdown()
    page = client.get(f"/job?queue=traced&id={job_id}").text
    trace_id = f"{span.get_span_context().trace_id:032x}"
    assert f'data-field="trace-id">{trace_id}<' in page
    untraced = store.queue("traced").enqueue({"n": 2})
    assert 'data-field="trace-id"' not in client.get(f"/job?queue=traced&id={untraced}").text


@pytest.mark.clause("Q-28", "O-6")
def test_the_job_page_shows_the_progress_checkpoint(store: Store, client: Client) -> None:
    """O-6, Q-28: a job's page shows its last checkpoint as a named Progress block (not
    among the unknown fields), escaped, on the running and on the dead job; a job without
    one has no such block."""
    q = store.queue("progressed", QueueOpts(max_attempts=1))
    running_id, dead_id, plain_id = q.enqueue_many(["running", "dead", "plain"])
    jobs = {j.payload: j for j in q.claim_batch("w", 3)}
    assert jobs["running"].progress({"page": 3, "note": "<i>x</i>"})
    assert jobs["dead"].progress({"page": 9}) and jobs["dead"].fail("boom")
    running = client.get(f"/job?queue=progressed&id={running_id}").text
    block = re.search(r'<pre class="" data-field="progress">(.*?)</pre>', running, re.S)
    assert block is not None and "<h2>Progress</h2>" in running
    assert html.unescape(block.group(1)) == '{\n  "page": 3,\n  "note": "<i>x</i>"\n}'
    assert "<i>x</i>" not in running  # escaped
    assert "<th>Progress</th>" not in running  # not the unknown-field row
    dead = client.get(f"/job?queue=progressed&id={dead_id}").text
    assert re.search(r'data-field="state">dead<', dead)
    assert 'data-field="progress">' in dead and "&quot;page&quot;: 9" in dead
    plain = client.get(f"/job?queue=progressed&id={plain_id}").text
    assert 'data-field="progress"' not in plain and "<h2>Progress</h2>" not in plain


@pytest.mark.clause("O-6")
def test_an_unknown_job_has_a_clear_page(store: Store, client: Client) -> None:
    """O-6: an id the queue does not have answers 404 with a page that says why."""
    seed_live(store)
    for query in ("queue=live&id=999999", "queue=live&id=x", "queue=live"):
        page = client.get(f"/job?{query}")
        assert page.status == 404, query
        assert 'id="no-job"' in page.text and "result_ttl_s" in page.text
    assert "No job 999999 in this queue." in client.get("/job?queue=live&id=999999").text


@pytest.mark.clause("O-6")
def test_a_cancel_asks_first_then_deletes_pending_and_processing_jobs(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """O-6: cancel is confirmed, then deletes the job (Q-13); its holder's ack fails."""
    jobs = seed_live(store)
    csrf = signed_in_csrf(client, dashboard)
    page = client.get("/queue?name=live&state=pending").text
    assert f'data-cancel="{jobs["pending"][0]}"' in page
    target = jobs["pending"][0]
    fields: dict[str, str | list[str]] = {
        "name": "live", "ids": str(target), "csrf": csrf, "state": "pending",
    }  # fmt: skip
    confirm = client.post("/queue/cancel", fields)
    assert confirm.status == 200
    assert "Cancel 1 selected job(s) of queue live?" in text_of(confirm.text)
    assert store.queue("live").get_job(target) is not None
    done = client.post("/queue/cancel", {**fields, "confirm": "1"})
    assert done.status == 303 and done.headers["Location"] == "/queue?name=live&state=pending"
    after = client.get(done.headers["Location"]).text
    assert "Cancelled 1 job(s)." in after
    assert listed_ids(after, "pending") == jobs["pending"][1:]
    assert store.queue("live").get_job(target) is None

    # A processing job, from its own page: its holder finds its claim gone (Q-13).
    holder = store.queue("live").claim("w-8")
    assert holder is not None and holder.id == jobs["pending"][1]
    job_page = client.get(f"/job?queue=live&id={holder.id}").text
    assert 'id="job-cancel"' in job_page
    answer = client.post(
        "/queue/cancel",
        {"name": "live", "ids": str(holder.id), "csrf": csrf, "state": "processing",
         "from": "job", "confirm": "1"},
    )  # fmt: skip
    assert answer.headers["Location"] == "/queue?name=live&state=processing"
    assert not holder.ack()
    # A dead job is not cancelled: the count says so.
    again = client.post(
        "/queue/cancel",
        {"name": "live", "ids": str(jobs["dead"][0]), "csrf": csrf, "confirm": "1"},
    )
    assert "1 of those selected were no longer pending or processing." in (
        client.get(again.headers["Location"]).text
    )
    assert store.queue("live").stats().dead == 1


@pytest.mark.clause("O-6")
def test_a_redrive_from_the_job_page_returns_to_it(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """O-6: a dead job's page redrives it and shows it pending."""
    jobs = seed_live(store)
    client.login(dashboard)
    dead_id = jobs["dead"][0]
    page = client.get(f"/job?queue=live&id={dead_id}").text
    assert 'id="job-redrive"' in page and 'id="job-purge"' in page
    assert 'id="job-cancel"' not in page
    answer = client.post(
        "/queue/redrive",
        {"name": "live", "ids": str(dead_id), "csrf": csrf_of(page), "from": "job"},
    )
    assert answer.status == 303 and answer.headers["Location"] == f"/job?queue=live&id={dead_id}"
    back = client.get(answer.headers["Location"]).text
    assert "Redrove 1 job(s) to pending." in back
    assert re.search(r'data-field="state">pending<', back)
    assert 'data-field="attempts">0 of 2<' in back
    # A done job offers no change.
    done_page = client.get(f"/job?queue=live&id={jobs['done'][0]}").text
    assert 'name="csrf"' not in done_page


@pytest.mark.clause("O-6")
def test_cancel_follows_the_access_rules(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """O-6: cancel needs the token's session, its CSRF token, this site's
    Origin, and no --read-only."""
    jobs = seed_live(store)
    target = str(jobs["pending"][0])
    anonymous = client.get(f"/job?queue=live&id={target}").text
    assert 'name="csrf"' not in anonymous and "need the dashboard&#x27;s token" in anonymous
    fields: dict[str, str | list[str]] = {"name": "live", "ids": target, "confirm": "1"}
    assert client.post("/queue/cancel", {**fields, "csrf": "x"}).status == 403
    client.login(dashboard)
    assert client.post("/queue/cancel", {**fields, "csrf": "forged"}).status == 403
    csrf = csrf_of(client.get("/queue?name=live&state=pending").text)
    assert (
        client.post(
            "/queue/cancel", {**fields, "csrf": csrf}, {"Origin": "http://evil.example"}
        ).status
        == 403
    )
    assert client.get(f"/queue/cancel?name=live&ids={target}").status == 405
    with serve_dashboard(store, "127.0.0.1:0", read_only=True) as server:
        ro = Client(server)
        ro.login(server)
        page = ro.get(f"/job?queue=live&id={target}").text
        assert 'name="csrf"' not in page and "read-only" in page
        assert ro.post("/queue/cancel", {**fields, "csrf": "x"}).status == 403
    assert store.queue("live").get_job(int(target)) is not None


@pytest.mark.clause("O-6")
def test_healthz_says_ok_while_the_store_answers(engine_url: str, store: Store) -> None:
    """O-6: /healthz is 200 ok while the store answers and 503 once it does not."""
    import alkstore

    seed(store)
    own = alkstore.open(engine_url, migrate=False)
    with serve_dashboard(own, "127.0.0.1:0", sample_every_s=60) as server:
        client = Client(server)
        answer = client.get("/healthz")
        assert (answer.status, answer.text) == (200, "ok\n")
        # Probes may name the address as they like, and need no token.
        assert client.get("/healthz", Host="10.1.2.3:8765").status == 200
        assert "emails" not in answer.text
        own.close()
        failing = client.get("/healthz")
        assert failing.status == 503 and failing.text == "store unavailable\n"


@pytest.mark.clause("O-6")
def test_healthz_needs_no_token_beyond_localhost(store: Store) -> None:
    """O-6: /healthz answers without the token even where every page needs it."""
    guard = Guard(host="0.0.0.0", token="s3cret-token", read_only=False)
    guard.port = 8765
    history = History(10)
    app = DashboardApp(
        store, guard, history, Sampler(store, history, 1.0), every_s=1.0, refresh_s=None
    )
    status, headers, body = _call(app, "/healthz")
    assert status.startswith("200") and body == "ok\n"
    assert headers["Content-Type"].startswith("text/plain")
    assert _call(app, "/", QUERY_STRING="")[0].startswith("401")


@pytest.mark.clause("O-6")
def test_without_scrape_the_chart_is_the_backlog_change_not_a_throughput(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """O-6: the chart drawn from samples alone is named for what it plots
    (the backlog's change, below zero while draining); "finished jobs" is
    charted only from the workers' counters."""
    q = store.queue("drain")
    q.enqueue_many([{"n": i} for i in range(40)])
    eventually(lambda: "drain" in client.get("/").text, what="the queue sampled")
    time.sleep(0.3)
    for job in q.claim_batch("w", 40):
        job.ack()

    def drained_sample() -> str | None:
        page = client.get("/queue?name=drain").text
        chart = re.search(r'<div class="card" id="backlog-chart">(.*?)</svg>', page, re.S)
        return page if chart and re.search(r">-\d", chart.group(1)) else None

    page = eventually(drained_sample, what="a negative backlog change charted")
    assert "Backlog change, drain" in page
    assert 'id="throughput-chart"' not in page and "Finished jobs," not in page
    assert "Throughput" not in page
    assert "it is not a throughput" in page
    assert "need the workers&#x27; metrics" in page


@pytest.mark.clause("O-6")
def test_a_sparse_state_is_read_in_bounded_steps(
    store: Store, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O-6: scheduled jobs are found by reading pages of pending ones: a request
    reads at most SCAN_CAP rows, and the next page reads on from there."""
    from alkstore import EnqueueOpts
    from alkstore.observability.dashboard import _live

    monkeypatch.setattr(_live, "SCAN_CAP", 4)
    monkeypatch.setattr(_live, "_SCAN_PAGE", 2)
    q = store.queue("sparse")
    q.enqueue_many([{"n": i} for i in range(9)])
    later = [q.enqueue({"late": i}, EnqueueOpts(delay_s=600)) for i in range(2)]
    path = "/queue?name=sparse&state=scheduled"
    seen: list[int] = []
    for _ in range(5):
        page = client.get(path).text
        seen += listed_ids(page, "scheduled")
        nxt = re.search(r'href="([^"]*after=\d+)">next page', page)
        if nxt is None:
            break
        assert "Read pending jobs up to id" in page
        path = html.unescape(nxt.group(1))
    assert seen == later


@pytest.mark.clause("O-6")
def test_a_state_queue_stats_does_not_count_is_counted_up_to_a_cap(
    store: Store, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O-6: a state queue_stats() does not count (done) is counted by listing, up to a cap."""
    from alkstore.observability.dashboard import _live

    monkeypatch.setattr(_live, "COUNT_CAP", 2)
    q = store.queue("kept", QueueOpts(result_ttl_s=600))
    q.enqueue_many([{"n": i} for i in range(3)])
    for job in q.claim_batch("w", 3):
        assert job.ack(result=job.id)
    page = client.get("/queue?name=kept&state=done").text
    assert tab_counts(page)["done"] == "2+"
    assert tab_counts(page)["pending"] == "0"
    assert len(listed_ids(page, "done")) == 3


# ------------------------------------------------ Q-27 pause, O-6 run now


@pytest.mark.clause("Q-27", "O-6")
def test_pause_asks_first_and_resume_undoes_it(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """Q-27: the queue page shows whether the queue runs; Pause asks first, then pauses
    (the overview and the page say so, claims find nothing); Resume needs no confirmation."""
    jobs = seed_live(store)
    csrf = signed_in_csrf(client, dashboard)
    page = client.get("/queue?name=live&state=pending").text
    assert 'data-paused="0"' in page and 'id="queue-pause"' in page
    fields: dict[str, str | list[str]] = {"name": "live", "csrf": csrf, "state": "pending"}
    confirm = client.post("/queue/pause", fields)
    assert confirm.status == 200 and "Pause queue live?" in text_of(confirm.text)
    assert not store.queue("live").is_paused()
    done = client.post("/queue/pause", {**fields, "confirm": "1"})
    assert done.status == 303 and done.headers["Location"] == "/queue?name=live&state=pending"
    after = client.get(done.headers["Location"]).text
    assert "Paused queue live" in after and 'data-paused="1"' in after
    assert 'id="queue-resume"' in after
    assert store.queue("live").is_paused() and store.queue("live").claim("w") is None
    overview = client.get("/").text
    row = re.search(r'<tr data-queue="live">.*?</tr>', overview, re.S)
    assert row is not None and 'class="badge paused"' in row.group(0)
    resumed = client.post("/queue/resume", fields)
    assert resumed.status == 303
    assert "Resumed queue live." in client.get(resumed.headers["Location"]).text
    assert not store.queue("live").is_paused()
    job = store.queue("live").claim("w")
    assert job is not None and job.id == jobs["pending"][0]


@pytest.mark.clause("O-6")
def test_run_now_from_a_row_and_from_the_job_page(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """O-6: each scheduled and pending row offers Run now, which makes the job ready at
    once without asking; the job page offers it too and returns to the job."""
    jobs = seed_live(store)
    csrf = signed_in_csrf(client, dashboard)
    scheduled = jobs["scheduled"][0]
    page = client.get("/queue?name=live&state=scheduled").text
    assert f'data-run-now="{scheduled}"' in page
    assert f'data-run-now="{jobs["pending"][0]}"' in (
        client.get("/queue?name=live&state=pending").text
    )
    assert "data-run-now" not in client.get("/queue?name=live&state=processing").text
    answer = client.post(
        "/queue/run-now",
        {"name": "live", "ids": str(scheduled), "csrf": csrf, "state": "scheduled"},
    )
    assert answer.status == 303 and answer.headers["Location"] == "/queue?name=live&state=scheduled"
    back = client.get(answer.headers["Location"]).text
    assert "Made 1 job(s) ready to run now." in back
    assert listed_ids(back, "scheduled") == []
    assert scheduled in listed_ids(client.get("/queue?name=live&state=pending").text, "pending")

    later = store.queue("live").enqueue({"step": "later again"}, EnqueueOpts(delay_s=3600))
    job_page = client.get(f"/job?queue=live&id={later}").text
    assert 'id="job-run-now"' in job_page and 'id="job-cancel"' in job_page
    answer = client.post(
        "/queue/run-now",
        {"name": "live", "ids": str(later), "csrf": csrf, "state": "scheduled", "from": "job"},
    )
    assert answer.headers["Location"] == f"/job?queue=live&id={later}"
    shown = client.get(answer.headers["Location"]).text
    assert re.search(r'data-field="state">pending<', shown)
    # A processing job is not made ready: the count says so.
    again = client.post(
        "/queue/run-now",
        {"name": "live", "ids": str(jobs["processing"][0]), "csrf": csrf},
    )
    assert "1 of those selected were no longer pending." in (
        client.get(again.headers["Location"]).text
    )
    assert 'id="job-run-now"' not in client.get(f"/job?queue=live&id={jobs['dead'][0]}").text


@pytest.mark.clause("Q-27", "O-6")
def test_pause_and_run_now_follow_the_access_rules(
    store: Store, dashboard: DashboardServer, client: Client
) -> None:
    """Q-27, O-6: pause, resume and run now need the token's session and its CSRF token,
    are never GETs, and are refused (with no buttons) in --read-only."""
    jobs = seed_live(store)
    scheduled = str(jobs["scheduled"][0])
    anonymous = client.get("/queue?name=live&state=scheduled").text
    assert "data-run-now" not in anonymous and 'id="queue-pause"' not in anonymous
    assert 'data-paused="0"' in anonymous  # the state is shown to readers too
    pause: dict[str, str | list[str]] = {"name": "live", "confirm": "1", "csrf": "x"}
    run: dict[str, str | list[str]] = {"name": "live", "ids": scheduled, "csrf": "x"}
    for path, fields in (("/queue/pause", pause), ("/queue/run-now", run)):
        assert client.post(path, fields).status == 403
    client.login(dashboard)
    for path, fields in (("/queue/pause", pause), ("/queue/run-now", run)):
        assert client.post(path, {**fields, "csrf": "forged"}).status == 403
        assert client.get(f"{path}?name=live&ids={scheduled}").status == 405
    store.queue("live").pause()
    with serve_dashboard(store, "127.0.0.1:0", read_only=True) as server:
        ro = Client(server)
        ro.login(server)
        page = ro.get("/queue?name=live&state=scheduled").text
        assert 'name="csrf"' not in page and 'data-paused="1"' in page
        assert 'id="queue-resume"' not in page and "data-run-now" not in page
        assert ro.post("/queue/resume", {"name": "live", "csrf": "x"}).status == 403
        assert ro.post("/queue/run-now", run).status == 403
    assert store.queue("live").is_paused()
    assert store.queue("live").stats().scheduled == 1


# ------------------------------------------------------------------ workers


def _report(store: Store, wid: str, counts: dict[str, int], *, gone: bool = False) -> None:
    """Register (or, *gone*, unregister) worker *wid* with *counts* by outcome
    in the current minute, as a worker's refresh does (O-5)."""
    from alkstore.types import WorkerCount, WorkerInfo

    now = datetime.now(timezone.utc)
    info = WorkerInfo(wid, "host-a", 4242, ("emails", "sms"), 4, now, "0.1.0")
    rows = [WorkerCount(now, wid, "emails", o, n) for o, n in counts.items()]
    store.report_worker(info, rows, gone=gone)


@pytest.mark.clause("O-5")
def test_the_workers_page_lists_registered_workers_with_last_seen_and_counts(
    store: Store, client: Client
) -> None:
    """O-6: /workers, linked from the top bar, shows every registered worker with its
    host, pid, queues, concurrency, last seen, and its finished jobs of the hour."""
    empty = client.get("/workers")
    assert empty.status == 200 and "No worker is registered" in empty.text
    _report(store, "w-1", {"acked": 3, "dead": 1})
    page = client.get("/workers")
    assert page.status == 200
    assert 'href="/workers"' in client.get("/").text
    row = re.search(r'<tr data-worker="w-1">(.*?)</tr>', page.text, re.S)
    assert row is not None
    cells = text_of(row.group(1))
    for needle in ("host-a", "4242", "emails", "sms", "acked 3", "dead 1"):
        assert needle in cells, (needle, cells)
    assert 'data-finished="4"' in row.group(1)
    seen = re.search(r'data-last-seen="([^"]+)"', row.group(1))
    assert seen is not None
    assert (
        abs((datetime.fromisoformat(seen.group(1)) - datetime.now(timezone.utc)).total_seconds())
        < 60
    )
    assert "silent" not in cells
    assert 'id="finished-chart"' in page.text


@pytest.mark.clause("O-5")
def test_finished_jobs_per_minute_come_from_the_workers_counts_and_outlive_the_dashboard(
    store: Store,
) -> None:
    """O-6: the overview's "Finished jobs per minute" chart is drawn from the workers'
    per-minute counts in the store (a worker that stopped included), so a dashboard
    started afterwards shows the same history."""
    _report(store, "w-gone", {"acked": 5, "retried": 2})
    _report(store, "w-gone", {}, gone=True)
    _report(store, "w-live", {"acked": 1})
    for _ in range(2):  # a first dashboard, then a restarted one
        with serve_dashboard(store, "127.0.0.1:0", sample_every_s=60) as server:
            page = Client(server).get("/").text
        chart = re.search(r'<div class="card" id="finished-chart">(.*?)</div>', page, re.S)
        assert chart is not None
        assert "Finished jobs per minute, all queues" in chart.group(1)
        assert "8 jobs" in chart.group(1)
        assert "<polyline" in chart.group(1)
        assert "acked" in chart.group(1) and "retried" in chart.group(1)


def test_the_finished_chart_counts_by_minute_and_queue() -> None:
    """The chart's series: one value per minute of the last hour, by outcome."""
    from alkstore.observability.dashboard._workers import finished_chart
    from alkstore.types import WorkerCount

    now = datetime(2026, 1, 1, 12, 30, 10, tzinfo=timezone.utc)
    counts = [
        WorkerCount(now.replace(second=0), "a", "q", "acked", 4),
        WorkerCount(now.replace(second=0), "b", "q", "acked", 3),
        WorkerCount(now.replace(second=0) - timedelta(minutes=2), "a", "r", "dead", 1),
        WorkerCount(now - timedelta(hours=2), "a", "q", "acked", 100),  # out of the window
    ]
    assert "8 jobs" in finished_chart(counts, now)
    assert "7 jobs" in finished_chart(counts, now, queue="q")
    assert "need the workers' registry" in finished_chart(None, now)


@pytest.mark.clause("O-5")
def test_a_queue_page_charts_its_own_finished_jobs_per_minute(store: Store, client: Client) -> None:
    """O-6: a queue's page draws the finished jobs per minute of that queue only."""
    from alkstore.types import WorkerCount, WorkerInfo

    now = datetime.now(timezone.utc)
    info = WorkerInfo("w-q", "host-a", 1, ("emails", "sms"), 1, now, "0.1.0")
    store.report_worker(
        info,
        [
            WorkerCount(now, "w-q", "emails", "acked", 4),
            WorkerCount(now, "w-q", "sms", "acked", 9),
        ],
    )
    store.queue("emails").enqueue("x")
    page = client.get("/queue?name=emails").text
    chart = re.search(r'<div class="card" id="finished-chart">(.*?)</div>', page, re.S)
    assert chart is not None
    assert "Finished jobs per minute, emails" in chart.group(1) and "4 jobs" in chart.group(1)
