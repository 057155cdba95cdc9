"""A throwaway PostgreSQL cluster a test can stop, restart and break.

Fault tests never touch the shared server: they make their own cluster with
``initdb``/``pg_ctl`` in a temporary directory, on a free port, owned by the
``postgres`` account when the tests run as root (as
``alkstore_postgres.testing`` does), and remove it afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator

import psycopg
import pytest

from alkstore_postgres.testing import _as_cluster_owner, _free_port

__all__ = ["Cluster", "cluster"]


class Cluster:
    """One cluster: its URL, and the faults the tests inject."""

    def __init__(self) -> None:
        initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
        if initdb is None or pg_ctl is None:
            pytest.skip("initdb/pg_ctl are not on PATH")
        self._pg_ctl = pg_ctl
        self._prefix = _as_cluster_owner()
        self.workdir = tempfile.mkdtemp(prefix="alkstore-faults-")
        if self._prefix:
            shutil.chown(self.workdir, user="postgres")
        self.data = os.path.join(self.workdir, "data")
        self.port = _free_port()
        subprocess.run(
            [*self._prefix, initdb, "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync"],
            check=True,
            capture_output=True,
        )
        self.start()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*self._prefix, self._pg_ctl, "-D", self.data, *args], check=True, capture_output=True
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=60"
        )
        log = os.path.join(self.workdir, "log")
        self._ctl("-l", log, "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def terminate_backends(self, application_name: str | None = None) -> int:
        """``pg_terminate_backend`` every client backend but this one (of
        *application_name* when given); how many were terminated."""
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            query = (
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            params: tuple[str, ...] = ()
            if application_name is not None:
                query += " AND application_name = %s"
                params = (application_name,)
            row = conn.execute(query, params).fetchone()
        return int(row[0]) if row else 0

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with psycopg.connect(self.url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    try:
        made = Cluster()
    except (OSError, subprocess.CalledProcessError, RuntimeError) as exc:
        pytest.skip(f"cannot make a throwaway cluster: {exc}")
    try:
        yield made
    finally:
        made.remove()
