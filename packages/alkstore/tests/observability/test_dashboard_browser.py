"""O-4 and O-6 in a real browser: headless Chromium (Debian's ``chromium``,
driven by Playwright; never a downloaded browser) against ``alkstore
dashboard`` serving a store that live ``alkstore worker`` processes are
working on.

Each page's screenshot is written to the test's temporary directory; with
``ALKSTORE_UPDATE_SCREENSHOTS=1`` the SQLite pages named in
:data:`DOCS_SHOTS` also replace the pictures in ``docs/img/`` that the
README and the guide show.
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

import alkstore
from alkstore import EnqueueOpts, JobState, QueueOpts, Store

from .conftest import Running, eventually, state_counts

CHROMIUM = os.environ.get("ALKSTORE_CHROMIUM", "/usr/bin/chromium")
#: Flags for Chromium as root on a machine with no network beyond loopback.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS_IMG = Path(__file__).resolve().parents[4] / "docs" / "img"
#: The store the docs' screenshots name in the top bar.
DOCS_STORE_LABEL = "sqlite:///app.db \u00b7 signed in"
#: The screenshots the docs show.
DOCS_SHOTS = frozenset(
    {"dashboard", "dashboard-queue", "dashboard-jobs", "dashboard-job", "dashboard-workers"}
)

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI", "").lower() == "true":
        raise RuntimeError(f"CI needs Chromium at {CHROMIUM} (.ci/run installs it)")
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.clause("O-4")

#: The traced enqueue's trace id in the scene (see :func:`scene`).
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        # launch() gives every run a fresh, empty profile directory.
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    try:
        yield tab
    finally:
        context.close()


#: Saves a screenshot of a page under a name (the ``shots`` fixture).
Shots = Callable[[Page, str], Path]


@pytest.fixture
def shots(tmp_path: Path, engine_url: str) -> Shots:
    """Save a full-page screenshot as ``<name>-<engine>.png``."""
    engine = engine_url.partition(":")[0]
    folder = tmp_path / "screenshots"
    folder.mkdir()

    def shoot(tab: Page, name: str) -> Path:
        path = folder / f"{name}-{engine}.png"
        tab.screenshot(path=str(path), full_page=True)
        if (
            engine == "sqlite"
            and name in DOCS_SHOTS
            and os.environ.get("ALKSTORE_UPDATE_SCREENSHOTS") == "1"
        ):
            # The docs' copy names a store as a reader's would be, not the
            # test's temporary file (the test's own copy above is untouched).
            meta = tab.locator("header .meta")
            shown = meta.inner_text()
            meta.evaluate("(e, t) => { e.textContent = t; }", DOCS_STORE_LABEL)
            DOCS_IMG.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(DOCS_IMG / f"{name}.png"), full_page=True)
            meta.evaluate("(e, t) => { e.textContent = t; }", shown)
        return path

    return shoot


_HOLD = textwrap.dedent(
    """
    import os, time

    def hold(job):
        # Keeps its claim (heartbeated by the worker) until the test is done.
        while not os.path.exists(os.environ["RELEASE_FILE"]):
            time.sleep(0.05)
    """
)


@dataclass
class Scene:
    store: Store
    dead: list[int]
    login_url: str
    done: int


@pytest.fixture
def scene(engine_url: str, tmp_path: Path, background: Callable[..., Running]) -> Iterator[Scene]:
    """A store with queued, scheduled, running and dead jobs; two live
    workers holding claims; a dashboard sampling it every 0.25 s."""
    release = tmp_path / "release"
    (tmp_path / "hold.py").write_text(_HOLD)
    store = alkstore.open(engine_url)
    try:
        emails = store.queue("emails", QueueOpts(max_attempts=1))
        emails.enqueue_many([{"to": f"user{i}@example.com"} for i in range(24)])
        dead = []
        for i, error in enumerate(
            [
                "SMTPRecipientsRefused: <ann@example.com> mailbox unavailable",
                "TimeoutError: smtp.example.com:587 did not answer in 30 s",
                "ValueError: template 'welcome' has no field 'first_name'",
            ]
        ):
            job = emails.claim(f"setup-{i}")
            assert job is not None
            job.fail(error)
            dead.append(job.id)
        emails.enqueue({"to": "later@example.com"}, EnqueueOpts(delay_s=3600))
        reports = store.queue("reports")
        reports.enqueue_many([{"report": n} for n in ("daily", "weekly", "usage")])
        store.schedule("nightly-report", "0 3 * * *", "reports", {"report": "daily"})
        done = _done_job(store)
        store.schedule("cleanup", "@every 1h", "maintenance", {"task": "sweep"})
        env = {"RELEASE_FILE": str(release)}
        for queue, n in (("emails", "2"), ("reports", "1")):
            background(
                "--url", engine_url, "worker", "hold:hold", "--queue", queue,
                "--concurrency", n, "--grace", "0.5", "--log-level", "warning", env=env,
            )  # fmt: skip

        def workers_busy() -> bool:
            stats = {s.queue: s for s in store.queue_stats()}
            return stats["emails"].processing == 2 and stats["reports"].processing == 1

        eventually(workers_busy, what="the workers hold their claims")
        dashboard = background(
            "--url", engine_url, "dashboard", "--bind", "127.0.0.1:0", "--sample-every", "0.25",
            "--log-level", "warning",
        )  # fmt: skip
        login = dashboard.wait_for(r"sign in with: (http://\S+)").group(1)
        # Some traffic while the charts sample, then quiet for the comparisons.
        for burst in range(6):
            emails.enqueue_many([{"to": f"burst{burst}-{i}@example.com"} for i in range(3)])
            time.sleep(0.3)
        time.sleep(0.6)
        yield Scene(store, dead, login, done)
    finally:
        release.touch()
        store.close()


def _done_job(store: Store) -> int:
    """A job of queue ``thumbnails`` enqueued inside a (remote) span and acked
    with its result kept (RS-1): its page has a result and a trace id."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    span = NonRecordingSpan(SpanContext(int(TRACE_ID, 16), 0x00F067AA0BA902B7, True, TraceFlags(1)))
    thumbs = store.queue("thumbnails", QueueOpts(result_ttl_s=86_400))
    with trace.use_span(span):
        job_id = thumbs.enqueue({"image": "uploads/cat.jpg", "sizes": [128, 512]})
    job = thumbs.claim("thumbnailer-1")
    assert job is not None and job.id == job_id
    assert job.ack(result={"written": ["cat-128.jpg", "cat-512.jpg"], "bytes": 48213})
    return job_id


@pytest.fixture
def signed_in(scene: Scene, page: Page) -> Page:
    """*page*, signed in to the scene's dashboard through its login link."""
    page.goto(scene.login_url)
    return page


def table_counts(tab: Page) -> dict[str, dict[str, int]]:
    """The overview table as the browser shows it."""
    found: dict[str, dict[str, int]] = {}
    for row in tab.locator("#queues tbody tr").all():
        name = row.get_attribute("data-queue") or ""
        found[name] = {
            cell.get_attribute("data-state") or "": int(cell.inner_text().replace(",", ""))
            for cell in row.locator("td[data-state]").all()
        }
    return found


def test_the_pages_show_what_queue_stats_says(scene: Scene, signed_in: Page, shots: Shots) -> None:
    page = signed_in
    assert page.url.endswith("/") and "token=" not in page.url

    def agree() -> bool:
        page.reload()
        return table_counts(page) == state_counts(scene.store)

    eventually(agree, timeout_s=10, what="the page agrees with queue_stats()")
    expected = state_counts(scene.store)
    assert expected["emails"]["processing"] == 2 and expected["emails"]["dead"] == 3
    totals = {
        k: int(page.locator(f'[data-total="{k}"] b').inner_text().replace(",", ""))
        for k in ("pending", "scheduled", "processing", "dead")
    }
    assert totals == {k: sum(q[k] for q in expected.values()) for k in totals}
    assert page.locator("#depth-chart polyline").count() >= 4
    assert page.locator("#backlog-chart polyline").count() >= 1
    assert page.locator("#throughput-chart").count() == 0  # no --scrape: no finished rates
    shots(page, "dashboard")

    page.get_by_role("link", name="emails", exact=True).click()
    page.wait_for_url("**/queue?name=emails")
    rows = page.locator("#dead tbody tr")
    assert [int(r.get_attribute("data-job") or 0) for r in rows.all()] == scene.dead
    assert page.get_by_text("did not answer in 30 s").is_visible()
    kpi = page.locator('.kpi[data-state="processing"] b').inner_text()
    assert int(kpi) == 2
    assert page.locator("button[data-redrive]").count() == 3  # signed in: actions offered
    shots(page, "dashboard-queue")

    page.get_by_role("link", name="Schedules").click()
    page.wait_for_url("**/schedules")
    next_fire = {s.name: s.next_fire_at for s in scene.store.schedules()}
    for name, at in next_fire.items():
        row = page.locator(f'tr[data-schedule="{name}"]')
        assert at.strftime("%Y-%m-%d %H:%M:%S") in row.inner_text()
    shots(page, "dashboard-schedules")


def test_a_page_without_the_token_offers_no_changes(scene: Scene, page: Page) -> None:
    page.goto(scene.login_url.split("?", 1)[0] + "queue?name=emails")
    assert page.locator("#dead tbody tr").count() == 3
    assert page.locator("button[data-redrive]").count() == 0
    assert page.get_by_text("need the dashboard's token").is_visible()


def test_a_dead_job_redriven_through_the_page_leaves_the_dead_list(
    scene: Scene, signed_in: Page, shots: Shots
) -> None:
    page = signed_in
    page.goto(page.url + "queue?name=emails")
    target = scene.dead[1]
    with page.expect_navigation():
        page.locator(f'button[data-redrive="{target}"]').click()
    flash = page.locator(".flash")
    assert flash.count() == 1 and "Redrove 1 job(s)" in flash.inner_text(timeout=3_000)
    assert page.locator(f'tr[data-job="{target}"]').count() == 0
    assert [s.dead for s in scene.store.queue_stats() if s.queue == "emails"] == [2]
    shots(page, "dashboard-redriven")

    with page.expect_navigation():
        page.locator("#redrive-all").click()
    assert "Redrive all 2 dead jobs" in page.locator("h1").inner_text(timeout=3_000)
    with page.expect_navigation():
        page.locator("#confirm").click()
    assert page.locator("#dead tbody tr").count() == 0
    assert [s.dead for s in scene.store.queue_stats() if s.queue == "emails"] == [0]


def test_streams_and_locks_pages(scene: Scene, signed_in: Page, shots: Shots) -> None:
    page = signed_in
    orders = scene.store.stream("orders")
    for n in range(7):
        orders.publish({"order": n}, key=f"o{n}")
    orders.commit("mailer", 5)
    orders.commit("ledger", 7)
    lock = scene.store.lock("nightly-backup", ttl_s=300, owner="host-a:4242")
    assert lock is not None
    page.get_by_role("link", name="Streams").click()
    page.wait_for_url("**/streams")
    lag = page.locator('[data-stream="orders"] tr[data-consumer="mailer"] td[data-lag]')
    assert lag.inner_text(timeout=3_000) == "2"
    shots(page, "dashboard-streams")
    page.get_by_role("link", name="Locks").click()
    page.wait_for_url("**/locks")
    row = page.locator('tr[data-lock="nightly-backup"]').inner_text(timeout=3_000)
    assert "host-a:4242" in row and str(lock.token) in row
    shots(page, "dashboard-locks")


def ready_ids(store: Store, queue: str) -> list[int]:
    """The ids of *queue*'s pending jobs that are ready now."""
    now = datetime.now(timezone.utc)
    return [j.id for j in store.queue(queue).list_jobs(JobState.PENDING, 1000) if j.run_at <= now]


def listed(tab: Page, state: str) -> list[int]:
    return [int(r.get_attribute("data-job") or 0) for r in tab.locator(f"#{state} tbody tr").all()]


@pytest.mark.clause("O-6")
def test_live_jobs_by_state_and_a_dead_jobs_page(
    scene: Scene, signed_in: Page, shots: Shots
) -> None:
    """O-6: the tabs of a queue list its jobs by state as list_jobs has them;
    a dead job's page shows its error, and its redrive returns to it."""
    page = signed_in
    page.goto(page.url + "queue?name=emails")
    page.locator('a.kpi[data-state="pending"]').click()
    page.wait_for_url("**/queue?name=emails&state=pending")
    assert listed(page, "pending") == ready_ids(scene.store, "emails")
    assert page.locator("button[data-cancel]").count() == len(ready_ids(scene.store, "emails"))
    counts = {
        s: page.locator(f'a.kpi[data-state="{s}"] b').inner_text()
        for s in ("pending", "scheduled", "processing", "dead", "done")
    }
    stats = scene.store.queue("emails").stats()
    assert counts == {
        "pending": str(stats.pending),
        "scheduled": str(stats.scheduled),
        "processing": str(stats.processing),
        "dead": str(stats.dead),
        "done": "0",
    }
    shots(page, "dashboard-jobs-pending")

    page.locator('a.kpi[data-state="processing"]').click()
    page.wait_for_url("**/queue?name=emails&state=processing")
    running = scene.store.queue("emails").list_jobs(JobState.PROCESSING)
    assert listed(page, "processing") == [j.id for j in running]
    for job in running:
        assert (job.worker_id or "?") in page.locator(f'tr[data-job="{job.id}"]').inner_text()
    shots(page, "dashboard-jobs")

    page.locator('a.kpi[data-state="dead"]').click()
    page.wait_for_url("**/queue?name=emails&state=dead")
    target = scene.dead[1]
    page.locator(f'tr[data-job="{target}"] a', has_text=str(target)).click()
    page.wait_for_url(f"**/job?queue=emails&id={target}")
    assert page.locator('[data-field="state"]').inner_text() == "dead"
    assert "did not answer in 30 s" in page.locator('[data-field="last-error"]').inner_text()
    assert "user" in page.locator('[data-field="payload"]').inner_text()
    shots(page, "dashboard-job")

    with page.expect_navigation():
        page.locator("#job-redrive").click()
    assert "Redrove 1 job(s)" in page.locator(".flash").inner_text(timeout=3_000)
    assert page.locator('[data-field="state"]').inner_text() == "pending"
    info = scene.store.queue("emails").get_job(target)
    assert info is not None and info.state is JobState.PENDING


@pytest.mark.clause("O-6")
def test_a_pending_job_cancelled_through_its_page(
    scene: Scene, signed_in: Page, shots: Shots
) -> None:
    """O-6: a pending job cancelled from its page, through the confirmation."""
    page = signed_in
    target = ready_ids(scene.store, "emails")[0]
    page.goto(page.url + f"job?queue=emails&id={target}")
    with page.expect_navigation():
        page.locator("#job-cancel").click()
    assert "Cancel 1 selected job(s)" in page.locator("h1").inner_text(timeout=3_000)
    assert scene.store.queue("emails").get_job(target) is not None  # not before confirming
    shots(page, "dashboard-cancel-confirm")
    with page.expect_navigation():
        page.locator("#confirm").click()
    page.wait_for_url("**/queue?name=emails&state=pending")
    assert "Cancelled 1 job(s)." in page.locator(".flash").inner_text(timeout=3_000)
    assert page.locator(f'tr[data-job="{target}"]').count() == 0
    assert scene.store.queue("emails").get_job(target) is None


@pytest.mark.clause("Q-27", "O-6")
def test_a_queue_paused_and_resumed_through_its_page(
    scene: Scene, signed_in: Page, shots: Shots
) -> None:
    """Q-27: Pause on a queue's page asks first, then pauses the queue (its page and the
    overview mark it); Resume runs it again."""
    page = signed_in
    page.goto(page.url + "queue?name=reports&state=pending")
    assert page.locator("#pause-state").get_attribute("data-paused") == "0"
    with page.expect_navigation():
        page.locator("#queue-pause").click()
    assert "Pause queue reports?" in page.locator("h1").inner_text(timeout=3_000)
    assert not scene.store.queue("reports").is_paused()  # not before confirming
    with page.expect_navigation():
        page.locator("#confirm").click()
    page.wait_for_url("**/queue?name=reports&state=pending")
    assert "Paused queue reports" in page.locator(".flash").inner_text(timeout=3_000)
    assert page.locator("#pause-state").get_attribute("data-paused") == "1"
    assert scene.store.queue("reports").is_paused()
    shots(page, "dashboard-paused")
    page.goto(page.url.split("/queue")[0] + "/")
    assert page.locator('tr[data-queue="reports"] .badge.paused').count() == 1
    assert page.locator('tr[data-queue="emails"] .badge.paused').count() == 0
    page.goto(page.url + "queue?name=reports&state=pending")
    with page.expect_navigation():
        page.locator("#queue-resume").click()
    assert "Resumed queue reports." in page.locator(".flash").inner_text(timeout=3_000)
    assert page.locator("#pause-state").get_attribute("data-paused") == "0"
    assert not scene.store.queue("reports").is_paused()


@pytest.mark.clause("O-6")
def test_a_scheduled_job_run_now_through_its_row(
    scene: Scene, signed_in: Page, shots: Shots
) -> None:
    """O-6: Run now on a scheduled job's row makes it ready at once, without asking."""
    page = signed_in
    later = [
        j.id
        for j in scene.store.queue("emails").list_jobs(JobState.PENDING, limit=1000)
        if j.run_at > datetime.now(timezone.utc)
    ]
    assert len(later) == 1
    page.goto(page.url + "queue?name=emails&state=scheduled")
    with page.expect_navigation():
        page.locator(f'button[data-run-now="{later[0]}"]').click()
    page.wait_for_url("**/queue?name=emails&state=scheduled")
    assert "Made 1 job(s) ready to run now." in page.locator(".flash").inner_text(timeout=3_000)
    assert page.locator(f'tr[data-job="{later[0]}"]').count() == 0
    info = scene.store.queue("emails").get_job(later[0])
    assert info is not None and info.state is JobState.PENDING
    assert info.run_at <= datetime.now(timezone.utc)


@pytest.mark.clause("O-6")
def test_a_done_job_shows_its_result_and_trace(scene: Scene, signed_in: Page, shots: Shots) -> None:
    """O-6: a done job's page shows its result, finish time and trace id, and offers no change."""
    page = signed_in
    page.goto(page.url + "queue?name=thumbnails&state=done")
    assert listed(page, "done") == [scene.done]
    page.locator(f'tr[data-job="{scene.done}"] a', has_text=str(scene.done)).click()
    page.wait_for_url(f"**/job?queue=thumbnails&id={scene.done}")
    assert page.locator('[data-field="state"]').inner_text() == "done"
    assert "cat-512.jpg" in page.locator('[data-field="result"]').inner_text()
    assert page.locator('[data-field="trace-id"]').inner_text() == TRACE_ID
    info = scene.store.queue("thumbnails").get_job(scene.done)
    assert info is not None and info.finished_at is not None
    finished = page.locator('[data-field="finished-at"]').inner_text()
    assert info.finished_at.strftime("%Y-%m-%d %H:%M:%S") in finished
    assert page.locator("form").count() == 0  # a done job offers no change
    shots(page, "dashboard-job-done")


@pytest.mark.clause("O-6")
def test_healthz_in_the_running_command(scene: Scene, page: Page) -> None:
    """O-6: the running command serves /healthz."""
    answer = page.goto(scene.login_url.split("?", 1)[0] + "healthz")
    assert answer is not None and answer.status == 200
    assert page.locator("body").inner_text().strip() == "ok"


@pytest.mark.clause("O-5")
def test_the_workers_page_and_the_finished_jobs_per_minute(
    scene: Scene, signed_in: Page, shots: Shots
) -> None:
    """O-6: the scene's two ``alkstore worker`` processes are on the workers page (their
    queues, concurrency and last seen), and the overview charts the finished jobs per
    minute that the workers' counts hold, a stopped worker's included."""
    from alkstore.types import WorkerCount, WorkerInfo

    page = signed_in
    now = datetime.now(timezone.utc)
    gone = WorkerInfo("host-b:77:0c1d", "host-b", 77, ("emails",), 8, now, alkstore.__version__)
    minute = now.replace(second=0, microsecond=0)
    history = [
        WorkerCount(minute - timedelta(minutes=m), gone.id, "emails", "acked", 20 + 3 * (m % 5))
        for m in range(12)
    ] + [WorkerCount(minute - timedelta(minutes=4), gone.id, "emails", "dead", 2)]
    scene.store.report_worker(gone, history)
    scene.store.report_worker(gone, gone=True)
    page.get_by_role("link", name="Workers").click()
    page.wait_for_url("**/workers")
    rows = page.locator("#workers tbody tr[data-worker]")
    eventually(lambda: rows.count() == 2, what="both workers listed")
    shown = sorted(
        (r.locator("td").nth(3).inner_text(), r.locator("td").nth(4).inner_text())
        for r in rows.all()
    )
    assert shown == [("emails", "2"), ("reports", "1")]
    for row in rows.all():
        seen = row.locator("td[data-last-seen]").get_attribute("data-last-seen") or ""
        assert abs((datetime.fromisoformat(seen) - now).total_seconds()) < 120
    assert page.locator("#finished-chart polyline").count() >= 1
    shots(page, "dashboard-workers")
    page.get_by_role("link", name="Queues").click()
    page.wait_for_url(lambda url: url.endswith("/"))
    chart = page.locator("#finished-chart")
    total = sum(c.n for c in history)
    assert f"{total:,} jobs" in chart.inner_text()
    assert chart.locator("polyline").count() == 2  # acked and dead
