"""``manage.py alkstore_worker``: an alkstore Worker running the tasks of a
backend's queues (FW-1)."""

from __future__ import annotations

import os
import socket
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from alkstore import Worker
from alkstore.protocols import Job


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types
    help = "Run the tasks enqueued through an AlkstoreBackend."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--backend", default="default", help="the TASKS alias (default: default)"
        )
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="a queue to serve, in order of precedence; repeat it for more "
            "(default: the backend's QUEUES)",
        )
        parser.add_argument(
            "--concurrency", type=int, default=1, help="tasks run at once (default: 1)"
        )
        parser.add_argument(
            "--until-empty",
            action="store_true",
            help="run what is claimable now, then exit (tests, batch runs)",
        )
        parser.add_argument("--worker-id", default=None, help="default: host:pid")

    def handle(self, *args: Any, **options: Any) -> None:
        from alkstore.contrib.django._compat import task_backends
        from alkstore.contrib.django.backend import AlkstoreBackend

        try:
            backend = task_backends[options["backend"]]
        except Exception as exc:
            raise CommandError(f"no task backend {options['backend']!r}: {exc}") from exc
        if not isinstance(backend, AlkstoreBackend):
            raise CommandError(
                f"task backend {options['backend']!r} is a {type(backend).__name__}, "
                "not an AlkstoreBackend"
            )
        queues = options["queues"] or backend.queue_order
        if not queues:
            raise CommandError("the backend names no QUEUES: give --queue")
        worker_id = options["worker_id"] or f"{socket.gethostname()}:{os.getpid()}"

        def handler(job: Job) -> Any:
            return backend.run_job(job, worker_id)

        worker = Worker(
            backend.store,
            [backend.queue(name) for name in queues],
            handler,
            concurrency=options["concurrency"],
            worker_id=worker_id,
        )
        if options["until_empty"]:
            worker.run_until_empty()
        else:
            self.stdout.write(f"alkstore worker {worker_id}: {', '.join(queues)}")
            worker.run()
