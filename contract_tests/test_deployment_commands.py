"""docs/deployment.md does what it says, on both engines.

Every ``alkstore`` command the guide shows is run here, and a test fails
when the guide gains a command that is not: the commands in its shell
blocks and inline code, the ``ExecStart`` of its systemd units (expanded
with the environment files it shows) and the commands of its Kubernetes
manifests. Long-running commands run as real processes and are stopped
with SIGTERM, as a supervisor would stop them. The units are checked with
``systemd-analyze verify`` (after pointing them at this environment's
``alkstore``), the manifests and the Prometheus rules are parsed and
checked against what the commands serve.

The PostgreSQL half runs against an empty database of each test's own
(``pg_database``, contract_tests/pg_server.py); PgBouncer is not needed: the pooler command
runs with ``pooler=true`` against the server directly, which that mode
allows.
"""

from __future__ import annotations

import configparser
import functools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import yaml

import alkstore
from alkstore import EnqueueOpts, Queue, Store

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "deployment.md"
MAINTENANCE = ROOT / "docs" / "examples" / "maintenance.py"

# ------------------------------------------------------------ the guide's text


@dataclass(frozen=True)
class Block:
    lang: str
    text: str

    @property
    def title(self) -> str:
        """The path a block names in its first line (``# /etc/...``), or ``""``."""
        first = self.text.splitlines()[0] if self.text else ""
        return first[2:].split(" ")[0] if first.startswith("# ") else ""


def blocks() -> list[Block]:
    text = GUIDE.read_text()
    return [Block(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def block(title: str) -> Block:
    [found] = [b for b in blocks() if b.title == title]
    return found


def env_file(title: str) -> dict[str, str]:
    lines = block(title).text.splitlines()[1:]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _command(words: list[str]) -> str:
    """A command as the key of COMMANDS: without the program's name."""
    assert Path(words[0]).name == "alkstore", words
    return shlex.join(words[1:])


def _unit_command(unit: str, instance: str, env: dict[str, str]) -> str:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(block(f"/etc/systemd/system/{unit}").text)
    line = parser["Service"]["ExecStart"].replace("%i", instance)
    return _command(shlex.split(re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], line)))


def manifests() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(block("k8s/alkstore.yaml").text) if d]


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["spec"]["template"]["spec"]["containers"])


def guide_commands() -> set[str]:
    """Every alkstore command the guide shows (syntax lines with placeholders
    such as ``MODULE:FUNC`` or ``QUEUE`` aside)."""
    found: set[str] = set()
    for b in blocks():
        if b.lang == "sh":
            for line in b.text.splitlines():
                words = shlex.split(line, comments=True)
                if words:
                    found.add(_command(words))
    prose = re.sub(r"^```.*?^```", "", GUIDE.read_text(), flags=re.M | re.S)
    for span in re.findall(r"`(alkstore [^`]+)`", prose.replace("\n", " ")):
        if not re.search(r"\b(MODULE|FUNC|QUEUE|Q|HOST|PORT)\b", span):
            found.add(_command(shlex.split(span)))
    for unit, instances in UNITS.items():
        for instance in instances:
            env = {**env_file("/etc/alkstore/alkstore.env")}
            if instance:
                env.update(env_file(f"/etc/alkstore/worker-{instance}.env"))
            found.add(_unit_command(unit, instance, env))
    for doc in manifests():
        if doc["kind"] in ("Job", "Deployment"):
            for c in _containers(doc):
                found.add(_command([*c["command"], *c.get("args", [])]))
    return found


#: The units the guide shows, with the instances it names for templates.
UNITS = {
    "alkstore-worker@.service": ["emails", "maintenance"],
    "alkstore-scheduler.service": [""],
    "alkstore-migrate.service": [""],
}

W_EMAILS_UNIT = (
    "worker app.tasks:send --queue emails --concurrency 8 --grace 25 --metrics-port 127.0.0.1:9465"
)
W_EMAILS_K8S = (
    "worker app.tasks:send --queue emails --concurrency 8 --grace 30 --metrics-port 0.0.0.0:9465"
)
W_MAINT = "worker maintenance:sweep_all --queue maintenance --concurrency 1"
W_MAINT_UNIT = f"{W_MAINT} --grace 25 --metrics-port 127.0.0.1:9466"
SCHEDULE = "schedule maintenance '@every 5m' --queue maintenance"
OWNER_MIGRATE = "--url postgresql://alkstore_owner@db.internal/app migrate"
POOLER_QUEUES = "--url 'postgresql://app@pgbouncer:6432/app?pooler=true&migrate=false' queues"
WIDTH_MIGRATE = "migrate --url 'postgresql://owner@db/app?partition_width_s=300'"

#: Each command of the guide, and the test below that runs it.
COMMANDS = {
    "migrate": "test_migrate_commands_create_the_schema",
    OWNER_MIGRATE: "test_migrate_commands_create_the_schema",
    W_EMAILS_UNIT: "test_worker_commands_run_jobs_serve_metrics_and_stop_on_sigterm",
    W_EMAILS_K8S: "test_worker_commands_run_jobs_serve_metrics_and_stop_on_sigterm",
    SCHEDULE: "test_maintenance_commands_sweep_every_queue",
    W_MAINT: "test_maintenance_commands_sweep_every_queue",
    W_MAINT_UNIT: "test_maintenance_commands_sweep_every_queue",
    "sweep --all": "test_maintenance_commands_sweep_every_queue",
    "scheduler": "test_scheduler_command_fires_schedules_and_stops_on_sigterm",
    "metrics --serve 0.0.0.0:9464": "test_metrics_and_listing_commands_show_the_queues",
    "metrics": "test_metrics_and_listing_commands_show_the_queues",
    "queues": "test_metrics_and_listing_commands_show_the_queues",
    "jobs --queue emails --state dead": "test_metrics_and_listing_commands_show_the_queues",
    POOLER_QUEUES: "test_pooler_command_lists_the_queues",
    "workers": "test_workers_command_lists_the_running_worker",
    WIDTH_MIGRATE: "test_width_migrate_command_sets_the_partition_width",
}


def test_every_command_of_the_guide_is_run_here() -> None:
    assert guide_commands() == set(COMMANDS)


# ----------------------------------------------------------------- the sites


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Site:
    """A deployment: a database, the application's directory, and a store
    the test looks through."""

    engine: str
    url: str
    app: Path
    store: Store

    def url_with(self, query: str) -> str:
        """The site's URL with the guide's options (SQLite has no pool or pooler)."""
        if self.engine == "sqlite":
            query = "&".join(o for o in query.split("&") if o.split("=")[0] == "migrate")
        return f"{self.url}?{query}" if query else self.url

    def argv(self, command: str) -> list[str]:
        """The guide's *command* as this site runs it: its URLs pointed at this
        database, its ports at free ones."""
        assert command in COMMANDS, f"not a command of the guide: {command}"
        words = shlex.split(command)
        for i, word in enumerate(words):
            if word.startswith("postgresql://"):
                words[i] = self.url_with(urlsplit(word).query)
            host, sep, port = word.rpartition(":")
            if sep and port.isdigit() and host in ("127.0.0.1", "0.0.0.0"):
                words[i] = f"{host}:{_free_port()}"
        program = Path(sys.executable).with_name("alkstore")
        return [str(program), *words]

    def env(self, url: str | None = None) -> dict[str, str]:
        return {**os.environ, "ALKSTORE_URL": url or self.url}

    def run(self, command: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(command),
            cwd=self.app,
            env=self.env(url),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
        return done

    def start(self, command: str, url: str | None = None) -> Service:
        argv = self.argv(command)
        log = self.app / f"service-{uuid.uuid4().hex[:8]}.log"
        with log.open("wb") as out:  # a file, not a pipe: a full pipe would stall it
            proc = subprocess.Popen(
                argv, cwd=self.app, env=self.env(url), stdout=out, stderr=subprocess.STDOUT
            )
        return Service(command, argv, proc, log)

    def wait(self, what: str, done: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)


@dataclass
class Service:
    command: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def port(self) -> int:
        [bind] = [w for w in self.argv if re.fullmatch(r"[\d.]+:\d+", w)]
        return int(bind.rpartition(":")[2])

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), ""

    def serving(self) -> bool:
        assert self.proc.poll() is None, self.output()
        try:
            return self.get("/metrics")[0] == 200
        except OSError:
            return False

    def signal(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def stopped(self, timeout_s: float) -> int:
        """The exit status, which must come within *timeout_s*."""
        try:
            return self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout_s: float = 40) -> None:
        """SIGTERM, as a supervisor sends it: a clean exit, in time."""
        self.signal()
        status = self.stopped(timeout_s)
        assert status == 0, f"{self.command} exited {status}: {self.output()}"


TASKS = '''
import pathlib
import time


def send(job):
    """The guide's app.tasks:send: sleeps as long as the payload says, after
    creating the file its "started" names (the tests wait for it)."""
    if "started" in job.payload:
        pathlib.Path(job.payload["started"]).touch()
    time.sleep(float(job.payload.get("sleep", 0)))
'''


@pytest.fixture(params=["sqlite", "postgres"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'app.db'}"
    else:
        url = request.getfixturevalue("pg_database")
    app = tmp_path / "app"
    (app / "app").mkdir(parents=True)
    (app / "app" / "tasks.py").write_text(TASKS)
    shutil.copy(MAINTENANCE, app / "maintenance.py")
    store = alkstore.open(url)  # the schema exists: ?migrate=false URLs open it
    try:
        yield Site(request.param, url, app, store)
    finally:
        store.close()


def waiting(store: Store, queue: str) -> int:
    stats = store.queue(queue).stats()
    return stats.pending + stats.scheduled + stats.processing


def _dead_is(queue: Queue, count: int) -> bool:
    return queue.stats().dead == count


def rule_metrics() -> set[str]:
    rules = yaml.safe_load(block("prometheus/alkstore-rules.yaml").text)
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    return {name for e in exprs for name in re.findall(r"\balkstore_\w+", e)}


# ----------------------------------------------------------------- the tests


def test_migrate_commands_create_the_schema(site: Site, tmp_path: Path) -> None:
    site.run("migrate")
    done = site.run(OWNER_MIGRATE)
    assert "schema is up to date" in done.stdout
    # The worker's DML-only URL (?migrate=false) opens the schema they made.
    worker_url = env_file("/etc/alkstore/alkstore.env")["ALKSTORE_URL"]
    site.run("queues", url=site.url_with(urlsplit(worker_url).query))


def test_width_migrate_command_sets_the_partition_width(site: Site) -> None:
    """The width is the schema's, chosen when migrate makes it: on the site's
    schema (made at the default width) the guide's command is refused; on a
    new schema it makes partitions of its width. SQLite has no partitions
    (the option is PostgreSQL's), so there it only migrates."""
    if site.engine == "sqlite":
        assert "schema is up to date" in site.run(WIDTH_MIGRATE).stdout
        return
    argv = site.argv(WIDTH_MIGRATE)
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode != 0 and "partition_width_s=300" in refused.stderr
    [at] = [i for i, w in enumerate(argv) if w.startswith("postgresql://")]
    argv[at] += "&schema=narrow"
    subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    with psycopg.connect(site.url) as conn:
        width = conn.execute("SELECT value FROM narrow.meta WHERE key = 'partition_width_s'")
        assert width.fetchall() == [("300",)]


def test_worker_commands_run_jobs_serve_metrics_and_stop_on_sigterm(site: Site) -> None:
    worker_url = env_file("/etc/alkstore/alkstore.env")["ALKSTORE_URL"]
    emails = site.store.queue("emails")
    for command in (W_EMAILS_UNIT, W_EMAILS_K8S):
        emails.enqueue_many([{"n": i} for i in range(5)])
        worker = site.start(command, url=site.url_with(urlsplit(worker_url).query))
        try:
            site.wait("the jobs to run", lambda: waiting(site.store, "emails") == 0)
            site.wait("the metrics endpoint", worker.serving)
            status, text = worker.get("/metrics")
            assert status == 200
            assert "alkstore_jobs_finished_total" in rule_metrics()  # the rules' worker metric
            assert re.search(r'^alkstore_jobs_finished_total\{.*outcome="acked"', text, re.M), text
            assert worker.get("/healthz")[0] == 404
        finally:
            worker.stop()


def test_worker_gives_running_handlers_their_grace_on_sigterm(site: Site) -> None:
    emails = site.store.queue("emails")
    marker = site.app / "started"
    job_id = emails.enqueue({"sleep": 1.5, "started": str(marker)})
    worker = site.start(W_EMAILS_UNIT)
    # The handler itself says it runs: a signal between a claim and the
    # handler's start rightly gives the job back.
    site.wait("the job to start", marker.exists)
    worker.stop(timeout_s=20)  # waits for the handler, then acks it
    assert emails.get_job(job_id) is None
    assert waiting(site.store, "emails") == 0


def test_worker_second_sigterm_skips_the_grace(site: Site) -> None:
    emails = site.store.queue("emails")
    marker = site.app / "started"
    job_id = emails.enqueue({"sleep": 600, "started": str(marker)})
    worker = site.start(W_EMAILS_UNIT)  # --grace 25
    site.wait("the job to start", marker.exists)  # not only claimed
    worker.signal()
    time.sleep(0.5)
    worker.signal()
    started = time.monotonic()
    status = worker.stopped(timeout_s=15)
    assert time.monotonic() - started < 15
    assert status == 0, worker.output()
    info = emails.get_job(job_id)  # left claimed: it runs again once its claim lapses
    assert info is not None and info.state.value == "processing"


def test_maintenance_commands_sweep_every_queue(site: Site) -> None:
    site.run(SCHEDULE)
    site.run(SCHEDULE)  # again, as every deploy would: harmless
    [schedule] = [s for s in site.store.schedules() if s.name == "maintenance"]
    assert schedule.queue == "maintenance"
    reports = site.store.queue("reports")
    for round_, command in enumerate((W_MAINT, W_MAINT_UNIT), start=1):
        reports.enqueue({"stale": True}, EnqueueOpts(expires_s=0.001))
        site.store.queue("maintenance").enqueue({"fired_by": "test"})
        worker = site.start(command)
        try:
            site.wait("the sweep", functools.partial(_dead_is, reports, round_))
        finally:
            worker.stop()
    reports.enqueue({"stale": True}, EnqueueOpts(expires_s=0.001))
    time.sleep(0.01)
    done = site.run("sweep --all")
    assert re.search(r"^reports\s+1\b", done.stdout, re.M), done.stdout


def test_scheduler_command_fires_schedules_and_stops_on_sigterm(site: Site) -> None:
    site.store.schedule("tick", "@every 1s", queue="ticks")
    scheduler = site.start("scheduler")
    try:
        site.wait("a fire", lambda: waiting(site.store, "ticks") >= 1)
    finally:
        scheduler.stop()


def test_metrics_and_listing_commands_show_the_queues(site: Site) -> None:
    emails = site.store.queue("emails")
    emails.enqueue("waiting")
    emails.enqueue("to fail")
    job = emails.claim("test")
    assert job is not None and job.fail("undeliverable")
    listing = site.run("queues").stdout
    assert re.search(r"^emails\s+1\s+0\s+0\s+1\b", listing, re.M), listing
    dead = site.run("jobs --queue emails --state dead").stdout
    assert "undeliverable" in dead
    once = site.run("metrics").stdout
    served = site.start("metrics --serve 0.0.0.0:9464")
    try:
        site.wait("the metrics endpoint", served.serving)
        text = served.get("/metrics")[1]
    finally:
        served.stop()
    for output in (once, text):
        assert 'alkstore_queue_jobs{queue="emails",state="dead"} 1' in output
        for name in rule_metrics() - {"alkstore_jobs_finished_total"}:
            assert name in output, name


@pytest.mark.clause("O-5")
def test_workers_command_lists_the_running_worker(site: Site) -> None:
    """O-5: a worker started as the guide starts it is listed by `alkstore workers`
    while it runs, and no longer once SIGTERM stopped it."""
    worker_url = env_file("/etc/alkstore/alkstore.env")["ALKSTORE_URL"]
    worker = site.start(W_EMAILS_UNIT, url=site.url_with(urlsplit(worker_url).query))
    try:
        site.wait("the worker's registration", lambda: bool(site.store.workers()))
        listing = site.run("workers").stdout
        assert re.search(r"^\S+\s+\S+\s+\d+\s+emails\s+8\s", listing, re.M), listing
    finally:
        worker.stop()
    assert "(no workers)" in site.run("workers").stdout


def test_pooler_command_lists_the_queues(site: Site) -> None:
    if site.engine != "postgres":
        pytest.skip("transaction poolers are a PostgreSQL matter")
    site.store.queue("emails").enqueue("x")
    done = site.run(POOLER_QUEUES)
    assert re.search(r"^emails\s+1\b", done.stdout, re.M), done.stdout


def test_pool_query_shows_the_stores_connections(site: Site) -> None:
    if site.engine != "postgres":
        pytest.skip("pg_stat_activity is PostgreSQL's")
    pool = "application_name = 'alkstore'"
    [query] = [b.text for b in blocks() if b.lang == "sql" and pool in b.text]
    site.store.queue("emails").stats()  # the test's store holds a connection
    with psycopg.connect(site.url) as conn:
        rows = conn.execute(query).fetchall()
    assert rows and all(row[0] == "alkstore" for row in rows)


def test_every_query_of_the_guide_runs(site: Site) -> None:
    """The guide's SQL (partitions, pool, bloat, held snapshots) runs as
    written against a store's database, each statement of each block."""
    if site.engine != "postgres":
        pytest.skip("the guide's queries are PostgreSQL's")
    queries = [b.text for b in blocks() if b.lang == "sql"]
    assert len(queries) >= 4
    site.store.queue("emails").enqueue(1)
    with psycopg.connect(site.url, autocommit=True) as conn:
        for text in queries:
            code = re.sub(r"--.*$", "", text, flags=re.M)  # comments may hold a ";"
            statements = [q for q in code.split(";") if q.strip()]
            assert statements, text
            for statement in statements:
                conn.execute(statement).fetchall()


def test_sqlite_backup_command_copies_a_store_in_use(site: Site, tmp_path: Path) -> None:
    if site.engine != "sqlite":
        pytest.skip("a SQLite file's backup")
    sqlite3 = shutil.which("sqlite3")
    if sqlite3 is None:
        pytest.skip("the sqlite3 program is not installed")
    command = re.search(r'`(sqlite3 app\.db\s+"\.backup backup\.db")`', GUIDE.read_text())
    assert command is not None
    assert Path(urlsplit(site.url).path[1:]) == tmp_path / "app.db"  # the guide's name
    site.store.queue("emails").enqueue_many(["kept", "kept too"])
    # The site's store stays open while the copy is made.
    subprocess.run([sqlite3, *shlex.split(command[1])[1:]], cwd=tmp_path, check=True, timeout=60)
    with alkstore.open(f"sqlite:///{tmp_path / 'backup.db'}") as copy:
        assert copy.queue("emails").stats().pending == 2


# ------------------------------------------------------- units and manifests


def test_systemd_units_verify(tmp_path: Path) -> None:
    program = Path(sys.executable).with_name("alkstore")
    written: list[Path] = []
    for unit, instances in UNITS.items():
        text = block(f"/etc/systemd/system/{unit}").text.replace(
            "/opt/app/venv/bin/alkstore", str(program)
        )
        for instance in instances:
            name = unit.replace("@.", f"@{instance}.") if instance else unit
            path = tmp_path / name
            path.write_text(text)
            written.append(path)
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # parse them at least
        for path in written:
            parser = configparser.ConfigParser(strict=False, interpolation=None)
            parser.read_string(path.read_text())
            assert {"Unit", "Service", "Install"} <= set(parser.sections())
        return
    done = subprocess.run(
        [analyze, "verify", *map(str, written)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_unit_and_manifest_stop_timeouts_exceed_the_grace() -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(block("/etc/systemd/system/alkstore-worker@.service").text)
    service = parser["Service"]
    grace = float(_flag(shlex.split(service["ExecStart"]), "--grace"))
    assert float(service["TimeoutStopSec"]) >= grace + 5
    assert service["KillMode"] == "mixed"
    for doc in manifests():
        for c in _containers(doc) if doc["kind"] == "Deployment" else []:
            argv = [*c["command"], *c.get("args", [])]
            if "worker" in argv and "--grace" in argv:
                pod = doc["spec"]["template"]["spec"]
                assert pod["terminationGracePeriodSeconds"] >= float(_flag(argv, "--grace")) + 5


def test_kubernetes_manifests_run_alkstore_directly_and_probe_its_metrics() -> None:
    docs = manifests()
    assert {d["kind"] for d in docs} == {"Job", "Deployment"}
    for doc in docs:
        assert doc["apiVersion"] in ("apps/v1", "batch/v1") and doc["metadata"]["name"]
        for c in _containers(doc):
            assert c["command"][0] == "alkstore"  # exec form: SIGTERM reaches it
            [url] = [e for e in c["env"] if e["name"] == "ALKSTORE_URL"]
            assert url["valueFrom"]["secretKeyRef"]["name"] == "alkstore"
            argv = [*c["command"], *c.get("args", [])]
            probe = c.get("livenessProbe")
            if probe is not None:
                [port] = [p for p in c["ports"] if p["name"] == probe["httpGet"]["port"]]
                bind = _flag(argv, "--metrics-port")
                assert probe["httpGet"]["path"] == "/metrics"
                assert bind.rpartition(":")[2] == str(port["containerPort"])
        if doc["kind"] == "Deployment":
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert doc["spec"]["selector"]["matchLabels"] == labels
