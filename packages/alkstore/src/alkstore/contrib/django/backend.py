"""``AlkstoreBackend``: Django's Tasks framework on an alkstore store (FW-1).

How the framework's terms map onto alkstore's:

- A task's ``queue_name`` is the alkstore queue of the same name.
- ``priority`` (the framework's whole numbers -100..100, larger runs first)
  is the job's priority as it is: alkstore claims larger priorities first
  too (Q-2), and its range holds the framework's.
- ``run_after`` is the job's ``run_at`` (a naive datetime is read in the
  current time zone, as Django reads naive datetimes).
- A result id is ``"<queue>:<job id>"``. ``get_result`` reads the job in any
  state: pending is ``READY``, processing ``RUNNING``, a kept result (RS-1)
  ``SUCCESSFUL`` with the task's return value, dead ``FAILED`` with the
  exception's class and traceback. A finished job whose result is no longer
  kept is ``TaskResultDoesNotExist``.

Where the framework's contract is silent, the backend does what the
framework's database backend does: a task runs once (an exception fails it;
``OPTIONS["max_attempts"]`` opts into alkstore's retries), its return value
is normalised to JSON, the ``task_enqueued``, ``task_started`` and
``task_finished`` signals are sent, and a task is found again by its module
path.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import alkstore
from alkstore import EnqueueOpts, JobInfo, JobState, QueueOpts, Retry, Store
from alkstore.protocols import Job, Queue

from ._compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
    task_finished,
    task_started,
)

__all__ = ["DEFAULT_RESULT_TTL_S", "AlkstoreBackend", "TaskFailed", "close_stores"]

#: How long a task's result is kept after it finished, unless
#: ``OPTIONS["result_ttl_s"]`` says otherwise (``None``: nothing is kept, and
#: ``get_result`` of a finished task raises ``TaskResultDoesNotExist``).
DEFAULT_RESULT_TTL_S = 7 * 24 * 3600.0

#: The backend's own OPTIONS; every other key is an engine option given to
#: ``alkstore.open`` (``schema``, ``max_size``, ...).
_OWN_OPTIONS = ("url", "database", "result_ttl_s", "max_attempts")

_STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.PROCESSING: TaskResultStatus.RUNNING,
    JobState.DONE: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
}


class TaskFailed(Exception):
    """The exception class a ``TaskError`` names when the job died of
    something other than an exception of its task (a handler timeout, a
    claim that lapsed too often); its traceback is the job's
    ``last_error``."""


# One store per configuration, shared by every thread: Django makes a backend
# per thread, and a store is safe to share (it has a pool and threads).
_stores: dict[tuple[str, tuple[tuple[str, str], ...]], Store] = {}
_stores_lock = threading.Lock()


def close_stores() -> None:
    """Close every store the backends opened (tests, and before a fork)."""
    with _stores_lock:
        opened = list(_stores.values())
        _stores.clear()
    for store in opened:
        store.close()


def _database_url(alias: str) -> str:
    """The alkstore URL of the database behind the Django connection *alias*."""
    from django.db import connections

    conn = connections[alias]
    cfg = conn.settings_dict
    if conn.vendor == "sqlite":
        return f"sqlite:///{cfg['NAME']}"
    if conn.vendor == "postgresql":
        user = quote(str(cfg.get("USER") or ""), safe="")
        password = quote(str(cfg.get("PASSWORD") or ""), safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = str(cfg.get("HOST") or "")
        host = f"[{host}]" if ":" in host else quote(host, safe="")
        port = f":{cfg['PORT']}" if cfg.get("PORT") else ""
        return f"postgresql://{auth}{host}{port}/{quote(str(cfg.get('NAME') or ''), safe='')}"
    raise InvalidTaskError(
        f"database {alias!r} is a {conn.vendor} database; alkstore runs on SQLite and PostgreSQL"
    )


def _module_path(value: Any) -> str:
    return f"{value.__module__}.{value.__qualname__}"


class AlkstoreBackend(BaseTaskBackend):  # type: ignore[misc]  # Django ships no types
    """A task backend storing tasks as alkstore jobs.

    ``OPTIONS``: ``url`` (a store URL) or ``database`` (the alias of a Django
    connection: its SQLite file or PostgreSQL database, and enqueues join its
    transaction); both, to open *url* and join *database*'s transactions;
    ``result_ttl_s`` (default :data:`DEFAULT_RESULT_TTL_S`); ``max_attempts``
    (default 1, as the framework's database backend runs a task once); any
    other key is an engine option (``schema``, ...).
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        # The configured order, which the worker serves strictly (the base
        # class keeps a set).
        self.queue_order: list[str] = list(dict.fromkeys(params.get("QUEUES", ["default"])))
        options: Mapping[str, Any] = self.options
        self.database: str | None = options.get("database")
        self._url: str | None = options.get("url")
        if self._url is None and self.database is None:
            raise InvalidTaskError(
                f"task backend {alias!r}: OPTIONS needs 'url' (a store URL) or 'database' "
                "(a Django database alias)"
            )
        self.result_ttl_s: float | None = options.get("result_ttl_s", DEFAULT_RESULT_TTL_S)
        self.queue_opts = QueueOpts(
            result_ttl_s=self.result_ttl_s, max_attempts=int(options.get("max_attempts", 1))
        )
        self._engine_opts = {k: v for k, v in options.items() if k not in _OWN_OPTIONS}

    def check(self, **kwargs: Any) -> list[Any]:
        """Django's system checks (``manage.py check``): the ``database``
        alias exists and is SQLite or PostgreSQL, and the app is installed
        (it brings the worker command and opens the store at startup)."""
        from django.apps import apps
        from django.core import checks
        from django.db import connections

        messages: list[Any] = list(super().check(**kwargs))
        if self.database is not None:
            if self.database not in connections.settings:  # DATABASES, configured
                messages.append(
                    checks.Error(
                        f"task backend {self.alias!r}: no database {self.database!r} in DATABASES",
                        id="alkstore.E001",
                    )
                )
            else:
                vendor = connections[self.database].vendor
                if vendor not in ("sqlite", "postgresql"):
                    messages.append(
                        checks.Error(
                            f"task backend {self.alias!r}: database {self.database!r} is "
                            f"{vendor}; alkstore runs on SQLite and PostgreSQL",
                            id="alkstore.E002",
                        )
                    )
        if not apps.is_installed("alkstore.contrib.django"):
            messages.append(
                checks.Warning(
                    f"task backend {self.alias!r}: add 'alkstore.contrib.django' to "
                    "INSTALLED_APPS for manage.py alkstore_worker",
                    id="alkstore.W001",
                )
            )
        return messages

    # ------------------------------------------------------------ the store

    @property
    def url(self) -> str:
        """The store's URL (from ``database`` when no ``url`` is given)."""
        if self._url is not None:
            return self._url
        assert self.database is not None
        return _database_url(self.database)

    @property
    def store(self) -> Store:
        """The store, opened on first use and shared by every thread."""
        key = (self.url, tuple(sorted((k, repr(v)) for k, v in self._engine_opts.items())))
        with _stores_lock:
            store = _stores.get(key)
            if store is None:
                self._check_first_open()
                store = _stores[key] = alkstore.open(self.url, **self._engine_opts)
        return store

    def _check_first_open(self) -> None:
        """Opening a SQLite store writes (its tables, its pruning), and the
        database's one write lock is the Django connection's inside
        ``atomic()``: the open would wait for the block that waits for it."""
        if self.database is None:
            return
        from django.db import connections

        conn = connections[self.database]
        if conn.vendor == "sqlite" and conn.in_atomic_block:
            raise InvalidTaskError(
                f"task backend {self.alias!r}: the SQLite store opens outside a transaction; "
                "the app alkstore.contrib.django opens it at startup when it is in "
                "INSTALLED_APPS (or touch the backend's .store before the first atomic())"
            )

    def queue(self, name: str) -> Queue:
        """The queue handle of *name*, stamped with the backend's options."""
        return self.store.queue(name, self.queue_opts)

    def _tx(self) -> Any:
        if self.database is None:
            return None
        from django.db import connections

        return connections[self.database]

    # ------------------------------------------------------------ enqueue

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        self.validate_task(task)
        args, kwargs = normalize_json(args), normalize_json(kwargs)
        run_at = None if task.run_after is None else _aware(task.run_after)
        payload = {
            "task": task.module_path,
            "args": args,
            "kwargs": kwargs,
            "backend": self.alias,
            "run_after": None if run_at is None else run_at.isoformat(),
        }
        q = self.queue(task.queue_name)
        opts = EnqueueOpts(priority=task.priority, run_at=run_at)
        job_id = q.enqueue(payload, opts, tx=self._tx())
        from django.utils import timezone

        result = TaskResult(
            task=task,
            id=f"{task.queue_name}:{job_id}",
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    # ------------------------------------------------------------ results

    def get_result(self, result_id: str) -> TaskResult:
        queue, sep, raw_id = str(result_id).rpartition(":")
        if not sep or not raw_id.isdigit() or not queue:
            raise TaskResultDoesNotExist(result_id)
        info = self.queue(queue).get_job(int(raw_id))
        if info is None:
            raise TaskResultDoesNotExist(result_id)
        return self._from_info(result_id, info)

    def _from_info(self, result_id: str, info: JobInfo) -> TaskResult:
        payload = info.payload
        status = _STATUS[info.state]
        errors = [_error(info.last_error)] if status == TaskResultStatus.FAILED else []
        worker_ids = [info.worker_id] * info.attempts if info.worker_id else []
        result = TaskResult(
            task=self._task(payload, info.queue, info.priority),
            id=result_id,
            status=status,
            enqueued_at=info.created_at,
            started_at=info.claimed_at,
            last_attempted_at=info.claimed_at,
            finished_at=info.finished_at or info.died_at,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=self.alias,
            errors=errors,
            worker_ids=worker_ids,
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", info.result)
        return result

    def _task(self, payload: Mapping[str, Any], queue: str, priority: int) -> Task:
        """The task the payload names, by its module path, as it was enqueued."""
        from django.utils.module_loading import import_string

        task = import_string(payload["task"])
        if not isinstance(task, Task):
            raise InvalidTaskError(f"{payload['task']} is not a task")
        run_after = payload.get("run_after")
        return task.using(
            queue_name=queue,
            priority=priority,
            backend=payload.get("backend", self.alias),
            run_after=None if run_after is None else datetime.fromisoformat(run_after),
        )

    # ------------------------------------------------------------ running

    def run_job(self, job: Job, worker_id: str = "alkstore") -> Any:
        """Run the task of *job* (the worker's handler): its return value,
        normalised to JSON, is the job's result; an exception of the task is
        recorded with its class and traceback and fails the attempt."""
        from django.db import close_old_connections
        from django.utils import timezone

        payload = job.payload
        task = self._task(payload, job.queue, job.priority)
        now = timezone.now()
        result = TaskResult(
            task=task,
            id=f"{job.queue}:{job.id}",
            status=TaskResultStatus.RUNNING,
            enqueued_at=None,
            started_at=now,
            last_attempted_at=now,
            finished_at=None,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=self.alias,
            errors=[],
            worker_ids=[worker_id] * job.attempts,  # the framework's attempt count
        )
        close_old_connections()
        task_started.send(type(self), task_result=result)
        try:
            call_args = list(result.args)
            if task.takes_context:
                call_args.insert(0, TaskContext(task_result=result))
            value = normalize_json(task.call(*call_args, **result.kwargs))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            path = _module_path(type(exc))
            result.errors.append(TaskError(exception_class_path=path, traceback=text))
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
            object.__setattr__(result, "finished_at", timezone.now())
            task_finished.send(type(self), task_result=result)
            # The budget decides: retried by the curve, or dead with this text.
            raise Retry(reason=f"{path}\n{text}") from exc
        finally:
            close_old_connections()
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "finished_at", timezone.now())
        object.__setattr__(result, "_return_value", value)
        task_finished.send(type(self), task_result=result)
        return value


def _aware(when: datetime) -> datetime:
    from django.utils import timezone

    return when if timezone.is_aware(when) else timezone.make_aware(when)


def _error(last_error: str | None) -> TaskError:
    """The ``TaskError`` of a dead job: the class path and traceback its
    handler recorded, else :class:`TaskFailed` with the job's ``last_error``."""
    text = last_error or ""
    first, sep, rest = text.partition("\n")
    if sep and first and " " not in first and "." in first:
        return TaskError(exception_class_path=first, traceback=rest)
    return TaskError(exception_class_path=_module_path(TaskFailed), traceback=text)
