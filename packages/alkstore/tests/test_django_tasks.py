"""FW-1: ``alkstore.contrib.django.AlkstoreBackend``, Django's Tasks framework
on a store (``django.tasks`` on Django 6, the ``django-tasks`` package before).

The project in ``django_project/`` is a user's: a view creates an order and
enqueues its receipt inside ``transaction.atomic()``, and ``manage.py
alkstore_worker`` runs it. Each test runs on SQLite (a new file, the store
in the same file) and PostgreSQL (a new schema holding both the project's
table and the store), with the backend on the Django connection's database.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from alkstore import JobState
from alkstore.contrib.django import AlkstoreBackend, TaskFailed, close_stores

ENGINES = ["sqlite", "postgres"]


pytestmark = pytest.mark.clause("FW-1")


def _project(module: str) -> Any:
    """A module of the project (found on the tests' path, as pytest puts
    this directory on it; mypy sees the tests directory as no package)."""
    return importlib.import_module(f"django_project.{module}")


def _django() -> None:
    """Django, set up once per process from the project's settings (another
    test module may have set it up first: the fixture overrides what matters)."""
    import django
    from django.conf import settings

    if not settings.configured:
        project = _project("settings")
        settings.configure(**{k: getattr(project, k) for k in dir(project) if k.isupper()})
        django.setup()


@dataclass
class Project:
    vendor: str
    backend_options: dict[str, Any]
    own_url: str  # a store URL of the test's own, for OPTIONS["url"]
    same_url: str  # the store URL of the Django database

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute(sql)
            return [tuple(row) for row in cur.fetchall()]

    def log(self) -> list[str]:
        return [entry for (entry,) in self.rows("SELECT entry FROM shop_log ORDER BY id")]

    def orders(self) -> list[str]:
        return [item for (item,) in self.rows("SELECT item FROM shop_order ORDER BY id")]

    def backend(self) -> AlkstoreBackend:
        from alkstore.contrib.django._compat import task_backends

        backend = task_backends["default"]
        assert isinstance(backend, AlkstoreBackend)
        return backend

    def post(self, item: str) -> tuple[int, dict[str, Any]]:
        from django.test import Client

        response = Client().post("/orders", {"item": item})
        return response.status_code, json.loads(response.content)

    def work(self, *args: str) -> None:
        from django.core.management import call_command

        call_command("alkstore_worker", "--until-empty", *args)


def _database(
    request: pytest.FixtureRequest, tmp_path: Path, stack: ExitStack
) -> tuple[Project, dict[str, Any]]:
    """The project's Django database and the backend's options on it."""
    if request.param == "sqlite":
        db = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "app.db")}
        own = f"sqlite:///{tmp_path / 'jobs.db'}"
        same = f"sqlite:///{tmp_path / 'app.db'}"
        return Project("sqlite", {"database": "default"}, own, same), db
    from alkstore_postgres.testing import HOOKS

    server: str = request.getfixturevalue("pg_server")
    _, opts = stack.enter_context(HOOKS.isolated(server, {}, request.node.name))
    parts = urlsplit(server)
    pg: dict[str, Any] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        # The project's tables live in the test's schema, beside the store's.
        "OPTIONS": {"options": f"-c search_path={opts['schema']}"},
    }
    schema = opts["schema"]
    own = f"{server}{'&' if '?' in server else '?'}schema={schema}"
    return Project("postgresql", {"database": "default", "schema": schema}, own, own), pg


@pytest.fixture(params=ENGINES)
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    _django()
    from django.db import connections
    from django.test.utils import override_settings

    project_settings = _project("settings")

    with ExitStack() as stack:
        found, db = _database(request, tmp_path, stack)
        saved = connections.settings.get("default")
        connections.close_all()
        if hasattr(connections._connections, "default"):
            del connections["default"]  # a connection made on the old settings
        connections.settings["default"] = connections.configure_settings({"default": db})["default"]
        stack.callback(connections.settings.__setitem__, "default", saved)
        tasks = {"default": {**project_settings.TASKS["default"], "OPTIONS": found.backend_options}}
        stack.enter_context(
            override_settings(
                INSTALLED_APPS=project_settings.INSTALLED_APPS,
                ROOT_URLCONF=project_settings.ROOT_URLCONF,
                ALLOWED_HOSTS=project_settings.ALLOWED_HOSTS,
                USE_TZ=True,
                TASKS=tasks,
            )
        )
        try:
            with connections["default"].cursor() as cur:
                if found.vendor == "sqlite":
                    key = "INTEGER PRIMARY KEY AUTOINCREMENT"
                else:
                    cur.execute(f"CREATE SCHEMA {found.backend_options['schema']}")
                    key = "SERIAL PRIMARY KEY"
                cur.execute(f"CREATE TABLE shop_order (id {key}, item TEXT NOT NULL)")
                cur.execute(f"CREATE TABLE shop_log (id {key}, entry TEXT NOT NULL)")
            found.backend().store  # noqa: B018 - as the app's ready() opens it at startup
            yield found
        finally:
            close_stores()
            connections.close_all()
            del connections["default"]


def test_fw1_view_enqueues_in_its_transaction_and_the_worker_runs_it(project: Project) -> None:
    """FW-1: the order and its task commit together; the worker command runs
    the task, and its result round-trips through kept results (RS-1)."""
    send_receipt = _project("tasks").send_receipt

    status, body = project.post("book")
    assert status == 201
    result = send_receipt.get_result(body["result_id"])
    assert result.status == "READY"
    assert result.args == [body["order"]]
    assert project.log() == []

    project.work()

    assert project.log() == ["receipt book"]
    done = send_receipt.get_result(body["result_id"])
    assert done.status == "SUCCESSFUL"
    assert done.return_value == {"order": body["order"], "item": "book"}
    assert done.finished_at is not None and done.errors == []
    result.refresh()
    assert result.status == "SUCCESSFUL"


def test_fw1_a_rolled_back_view_enqueues_nothing(project: Project) -> None:
    """FW-1: a rollback of the request's transaction takes the task with it."""
    status, _ = project.post("forbidden")
    assert status == 409
    assert project.orders() == []
    q = project.backend().queue("emails")
    assert q.list_jobs(JobState.PENDING) == []
    status, _ = project.post("pen")
    assert status == 201
    assert project.orders() == ["pen"]
    assert len(q.list_jobs(JobState.PENDING)) == 1
    project.work()
    assert project.log() == ["receipt pen"]


def test_fw1_priorities_run_larger_first(project: Project) -> None:
    """FW-1: the framework's priority is the job's (larger first, Q-2)."""
    log = _project("tasks").log

    log.using(priority=-100).enqueue("lowest")
    log.enqueue("normal")
    log.using(priority=100).enqueue("highest")
    log.using(priority=5).enqueue("higher")
    project.work("--concurrency", "1")
    assert project.log() == ["highest", "higher", "normal", "lowest"]


def test_fw1_run_after_defers_the_task(project: Project) -> None:
    """FW-1: ``run_after`` is the job's run_at: a worker does not run it early."""
    log = _project("tasks").log

    later = datetime.now(timezone.utc) + timedelta(hours=1)
    deferred = log.using(run_after=later).enqueue("later")
    now = log.enqueue("now")
    project.work()
    assert project.log() == ["now"]
    assert log.get_result(now.id).return_value == 1  # the first attempt
    waiting = log.get_result(deferred.id)
    assert waiting.status == "READY"
    assert waiting.task.run_after == later
    job_id = int(deferred.id.rpartition(":")[2])
    info = project.backend().queue("default").get_job(job_id)
    assert info is not None and info.run_at == later


def test_fw1_a_failing_task_is_failed_with_its_exception(project: Project) -> None:
    """FW-1: as the framework's database backend, a task runs once; its
    exception's class and traceback are the result's error."""
    explode = _project("tasks").explode

    result = explode.enqueue("no luck")
    project.work()
    failed = explode.get_result(result.id)
    assert failed.status == "FAILED"
    assert [e.exception_class for e in failed.errors] == [ValueError]
    assert "no luck" in failed.errors[0].traceback
    with pytest.raises(ValueError, match="failed"):
        _ = failed.return_value


def test_fw1_unknown_result_ids_and_queues(project: Project) -> None:
    """FW-1: an id the store does not know is TaskResultDoesNotExist; a queue
    outside the backend's QUEUES is refused at enqueue, as the contract says."""
    log = _project("tasks").log

    from alkstore.contrib.django._compat import InvalidTaskError, TaskResultDoesNotExist

    backend = project.backend()
    for bad in ("default:999999", "nonsense", "default:x"):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)
    with pytest.raises(InvalidTaskError):
        log.using(queue_name="elsewhere").enqueue("x")
    assert TaskFailed.__module__ == "alkstore.contrib.django.backend"


def test_fw1_async_tasks_run(project: Project) -> None:
    """FW-1: a coroutine task runs in the worker, its value is the result."""
    double = _project("tasks").double
    result = double.enqueue(21)
    project.work()
    assert double.get_result(result.id).return_value == 42


def test_fw1_worker_serves_the_queues_it_is_given(project: Project) -> None:
    """FW-1: ``--queue`` (repeated) chooses the queues; the others wait."""
    tasks = _project("tasks")
    project.post("book")  # a receipt on "emails"
    tasks.log.enqueue("on default")
    project.work("--queue", "default")
    assert project.log() == ["on default"]
    project.work("--queue", "emails", "--queue", "default")
    assert project.log() == ["on default", "receipt book"]


def test_fw1_max_attempts_option_retries_a_failing_task(project: Project) -> None:
    """FW-1: OPTIONS["max_attempts"] opts into alkstore's retries."""
    from django.test.utils import override_settings

    tasks = _project("tasks")
    options = {**project.backend_options, "max_attempts": 2}
    config = {"default": {"BACKEND": "alkstore.contrib.django.AlkstoreBackend", "OPTIONS": options}}
    with override_settings(TASKS=config):
        result = tasks.explode.enqueue("twice")
        project.work()
        after_one = tasks.explode.get_result(result.id)
        assert after_one.status == "READY" and after_one.errors == []
        info = project.backend().queue("default").get_job(int(result.id.rpartition(":")[2]))
        assert info is not None and info.attempts == 1 and info.max_attempts == 2


def test_fw1_url_option_opens_a_store_of_its_own(project: Project) -> None:
    """FW-1: OPTIONS["url"] without "database": the enqueue commits at once,
    outside the request's transaction."""
    from django.db import transaction
    from django.test.utils import override_settings

    tasks = _project("tasks")
    options = {"url": project.own_url}
    config = {"default": {"BACKEND": "alkstore.contrib.django.AlkstoreBackend", "OPTIONS": options}}
    with override_settings(TASKS=config):
        assert project.backend().url == project.own_url
        project.backend().store  # noqa: B018 - opened before the block, as at startup

        results = []

        def undone() -> None:
            with transaction.atomic():
                results.append(tasks.log.enqueue("kept"))
                raise LookupError("undo")

        with pytest.raises(LookupError):
            undone()
        project.work()
        assert tasks.log.get_result(results[0].id).return_value == 1
        assert project.log() == ["kept"]


def test_fw1_sqlite_store_first_opened_inside_atomic_is_refused(project: Project) -> None:
    """FW-1: on SQLite a store cannot open inside the connection's atomic()
    (the request holds the write lock): the backend says what to do instead
    of waiting out the busy timeout."""
    from django.db import transaction

    from alkstore.contrib.django._compat import InvalidTaskError

    if project.vendor != "sqlite":
        assert project.backend().store is not None  # PostgreSQL opens anywhere
        return
    close_stores()  # as if nothing had opened it at startup
    log = _project("tasks").log
    with pytest.raises(InvalidTaskError, match="opens outside a transaction"):
        with transaction.atomic():
            log.enqueue("x")
    assert project.backend().store is not None  # outside the block it opens


def test_fw1_system_checks_name_a_wrong_configuration(project: Project) -> None:
    """FW-1: ``manage.py check`` finds an unknown database alias and a
    missing app; the project's own configuration passes."""
    from django.test.utils import override_settings

    assert project.backend().check() == []
    backend = "alkstore.contrib.django.AlkstoreBackend"
    config = {"default": {"BACKEND": backend, "OPTIONS": {"database": "nowhere"}}}
    with override_settings(TASKS=config):
        assert [m.id for m in project.backend().check()] == ["alkstore.E001"]
    with override_settings(INSTALLED_APPS=["django_project"]):
        assert [m.id for m in project.backend().check()] == ["alkstore.W001"]
    from django.db import connections

    connections.settings["elsewhere"] = connections.configure_settings(
        {"default": {"ENGINE": "django.db.backends.dummy"}}
    )["default"]
    try:
        config = {"default": {"BACKEND": backend, "OPTIONS": {"database": "elsewhere"}}}
        with override_settings(TASKS=config):
            assert [m.id for m in project.backend().check()] == ["alkstore.E002"]
    finally:
        del connections.settings["elsewhere"]


def test_fw1_url_and_database_open_the_url_and_join_the_connection(project: Project) -> None:
    """FW-1: OPTIONS with both: the store opens at "url" (the same database)
    and enqueues still follow the "database" connection's transaction."""
    from django.test.utils import override_settings

    backend = "alkstore.contrib.django.AlkstoreBackend"
    options = {"url": project.same_url, "database": "default"}
    config = {"BACKEND": backend, "QUEUES": ["default", "emails"], "OPTIONS": options}
    with override_settings(TASKS={"default": config}):
        project.backend().store  # noqa: B018 - opened before the block, as at startup
        status, _ = project.post("forbidden")
        assert status == 409
        assert project.backend().queue("emails").list_jobs(JobState.PENDING) == []
        status, body = project.post("lamp")
        assert status == 201
        project.work()
        assert _project("tasks").send_receipt.get_result(body["result_id"]).is_finished
        assert project.log() == ["receipt lamp"]
