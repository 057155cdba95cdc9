"""Test support for the PostgreSQL engine.

- :data:`HOOKS`: the engine's conformance hooks (entry point
  ``alkstore_conformance.hooks``), structurally an
  ``alkstore_conformance.EngineHooks``: a fresh schema per test, a lock held
  past the lock timeout for E-2, a schema from the future for ST-2.
- :func:`find_server` and :func:`provide_server`: find a PostgreSQL server
  for the test suites, in this order: ``$ALKSTORE_PG_DSN``; a server on
  ``localhost:5432`` (user ``postgres``); a throwaway cluster made with
  ``initdb``/``pg_ctl`` when they are on ``PATH`` (as the ``postgres``
  account when running as root); a testcontainers container when the
  package is installed and Docker works.
- :func:`provide_pgbouncer`: a PgBouncer in transaction mode in front of a
  server, started from the ``pgbouncer`` program (Debian's package) in a
  temporary directory on a free port, stopped at the end (EN-4).

Nothing here imports pytest or the conformance package.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from . import _sql
from ._store import PostgresStore
from ._url import check_schema, conninfo_dict, parse_url

__all__ = [
    "DSN_VAR",
    "HOOKS",
    "LOCAL_URL",
    "Cluster",
    "PostgresHooks",
    "ServerSearch",
    "drop_schema",
    "find_server",
    "provide_pgbouncer",
    "provide_server",
    "throwaway_cluster",
]

log = logging.getLogger("alkstore.postgres")

#: Environment variable naming the server the tests use, as a URL.
DSN_VAR = "ALKSTORE_PG_DSN"
#: The conventional local server, tried when ``$ALKSTORE_PG_DSN`` is unset.
LOCAL_URL = "postgresql://postgres@localhost:5432/postgres"


# ---------------------------------------------------------------- the server


def _reachable(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def find_server() -> str | None:
    """The URL of a running server: ``$ALKSTORE_PG_DSN`` when set (trusted
    as is, so a wrong one fails loudly), else :data:`LOCAL_URL` when it
    answers, else ``None``."""
    dsn = os.environ.get(DSN_VAR)
    if dsn:
        return dsn
    return LOCAL_URL if _reachable(LOCAL_URL) else None


@dataclass(frozen=True)
class ServerSearch:
    """What :func:`provide_server` found: a URL, or why there is none."""

    url: str | None
    reason: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _as_cluster_owner() -> list[str]:
    """The command prefix that runs ``initdb``/``pg_ctl``: nothing, or, for
    root (which they refuse), ``runuser`` to the ``postgres`` account."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except (ImportError, KeyError):
        runuser = None
    if runuser is None:
        raise RuntimeError("initdb refuses to run as root and there is no postgres account")
    return [runuser, "-u", "postgres", "--"]


class Cluster:
    """A throwaway cluster of :func:`throwaway_cluster`, which a test may stop
    and start again (an outage)."""

    def __init__(self, prefix: list[str], pg_ctl: str, workdir: str, port: int) -> None:
        self._prefix = prefix
        self._pg_ctl = pg_ctl
        self.workdir = workdir
        self.data = os.path.join(workdir, "data")
        self.port = port
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        log_file = os.path.join(self.workdir, "log")
        command = [*self._prefix, self._pg_ctl, "-D", self.data, "-l", log_file, "-o", options]
        subprocess.run([*command, "-w", "start"], check=True, capture_output=True)

    def stop(self) -> None:
        stop = [*self._prefix, self._pg_ctl, "-D", self.data, "-m", "immediate", "stop"]
        subprocess.run(stop, capture_output=True)


@contextmanager
def throwaway_cluster() -> Iterator[Cluster]:
    """A cluster in a temporary directory on a free port, stopped and removed
    at the end. Raises ``RuntimeError`` when it cannot be made."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError("initdb/pg_ctl are not on PATH")
    prefix = _as_cluster_owner()
    workdir = tempfile.mkdtemp(prefix="alkstore-pg-")
    if prefix:
        shutil.chown(workdir, user="postgres")
    cluster = Cluster(prefix, pg_ctl, workdir, _free_port())
    try:
        subprocess.run(
            [*prefix, initdb, "-D", cluster.data, "-U", "postgres", "-A", "trust", "--no-sync"],
            check=True,
            capture_output=True,
        )
        cluster.start()
    except (OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise RuntimeError(f"could not start a throwaway cluster: {exc}") from exc
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _throwaway_cluster() -> Iterator[str]:
    with throwaway_cluster() as cluster:
        yield cluster.url


@contextmanager
def _container() -> Iterator[str]:
    """A PostgreSQL container through testcontainers. Raises ``RuntimeError``
    when the package or Docker is missing."""
    try:
        from testcontainers.postgres import PostgresContainer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError("testcontainers is not installed") from exc
    try:
        container = PostgresContainer("postgres:16-alpine", driver=None)
        container.start()
    except Exception as exc:  # Docker missing or not running: many types
        raise RuntimeError(f"testcontainers could not start PostgreSQL: {exc}") from exc
    try:
        url: str = container.get_connection_url()
        yield url
    finally:
        container.stop()


@contextmanager
def provide_server() -> Iterator[ServerSearch]:
    """A server for a test session, found or started, in the order of the
    module docstring; stopped at the end if it was started here."""
    url = find_server()
    if url is not None:
        yield ServerSearch(url, f"PostgreSQL at {parse_url(url).display}")
        return
    reasons = [f"${DSN_VAR} is unset and nothing answers at {LOCAL_URL}"]
    for provider in (_throwaway_cluster, _container):
        stack = ExitStack()
        try:
            started = stack.enter_context(provider())
        except RuntimeError as exc:
            reasons.append(str(exc))
            continue
        with stack:
            yield ServerSearch(started, f"PostgreSQL started by {provider.__name__}")
        return
    yield ServerSearch(None, "no PostgreSQL server: " + "; ".join(reasons))


# ----------------------------------------------------------------- pgbouncer


def _pgbouncer_binary() -> str | None:
    found = shutil.which("pgbouncer")
    if found is None and os.path.exists("/usr/sbin/pgbouncer"):
        found = "/usr/sbin/pgbouncer"
    return found


def _pgbouncer_ini(workdir: str, port: int, server: dict[str, Any], pool_size: int) -> str:
    host = server.get("host") or "127.0.0.1"
    target = f"host={host} port={server.get('port') or 5432}"
    return "\n".join(
        [
            "[databases]",
            f"* = {target}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {os.path.join(workdir, 'users.txt')}",
            "pool_mode = transaction",
            "max_client_conn = 2000",
            f"default_pool_size = {pool_size}",
            "reserve_pool_size = 5",
            "ignore_startup_parameters = extra_float_digits",
            f"logfile = {os.path.join(workdir, 'pgbouncer.log')}",
            f"pidfile = {os.path.join(workdir, 'pgbouncer.pid')}",
            "",
        ]
    )


@contextmanager
def provide_pgbouncer(server_url: str, pool_size: int = 20) -> Iterator[ServerSearch]:
    """A PgBouncer in transaction mode in front of *server_url*, for the
    pooler-mode suite (EN-4): the ``pgbouncer`` program (Debian: ``apt-get
    install pgbouncer``) runs in a temporary directory on a free port, as the
    ``postgres`` account when this runs as root (PgBouncer refuses root), and
    is stopped at the end. The URL yielded reaches the same database as
    *server_url*; without the program it is ``None`` with the reason.
    *pool_size*: server connections per database and user."""
    binary = _pgbouncer_binary()
    if binary is None:
        yield ServerSearch(None, "pgbouncer is not installed (Debian: apt-get install pgbouncer)")
        return
    server = conninfo_dict(parse_url(server_url).conninfo)
    user = server.get("user") or "postgres"
    dbname = server.get("dbname") or user
    workdir = tempfile.mkdtemp(prefix="alkstore-pgbouncer-")
    port = _free_port()
    run_as: dict[str, Any] = {}
    if sys.platform != "win32" and hasattr(os, "geteuid") and os.geteuid() == 0:
        shutil.chown(workdir, user="postgres")
        run_as = {"user": "postgres"}
    ini = os.path.join(workdir, "pgbouncer.ini")
    with open(ini, "w", encoding="utf-8") as f:
        f.write(_pgbouncer_ini(workdir, port, server, pool_size))
    with open(os.path.join(workdir, "users.txt"), "w", encoding="utf-8") as f:
        f.write(f'"{user}" ""\n')
    for name in ("pgbouncer.ini", "users.txt"):
        if run_as:
            shutil.chown(os.path.join(workdir, name), user="postgres")
    # Its log goes to a file: a pipe nobody reads would fill and stop it.
    errors = open(os.path.join(workdir, "stderr.log"), "wb")  # noqa: SIM115
    proc = subprocess.Popen([binary, "-q", ini], stdout=subprocess.DEVNULL, stderr=errors, **run_as)
    url = f"postgresql://{user}@127.0.0.1:{port}/{dbname}"
    try:
        deadline = time.monotonic() + 15
        while not _reachable(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(workdir, "stderr.log"), encoding="utf-8") as f:
                    why = f.read().strip()[:500]
                yield ServerSearch(None, f"pgbouncer did not start: {why}")
                return
            time.sleep(0.1)
        yield ServerSearch(url, f"PgBouncer (transaction mode) on port {port}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait(5)
        errors.close()
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------- hooks


def drop_schema(url: str, schema: str) -> None:
    """``DROP SCHEMA ... CASCADE``, waiting at most 10 s for locks held by
    stores a test left open (a transaction-local setting: this may run
    through a transaction pooler)."""
    with psycopg.connect(parse_url(url).conninfo, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL lock_timeout = '10s'")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class PostgresHooks:
    """The PostgreSQL engine's ``alkstore_conformance.EngineHooks``."""

    @contextmanager
    def isolated(
        self, url: str, opts: Mapping[str, Any], key: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The same database with a fresh schema named after *key*, dropped
        (with everything in it) afterwards."""
        slug = re.sub(r"[^a-z0-9_]+", "_", key.lower()).strip("_")[:30] or "t"
        schema = check_schema(f"alkt_{slug}_{uuid.uuid4().hex[:10]}")
        try:
            yield url, {**opts, "schema": schema}
        finally:
            try:
                drop_schema(url, schema)
            except psycopg.Error as exc:
                log.warning("could not drop test schema %s: %s", schema, exc)

    @contextmanager
    def transient_failure(
        self, url: str, opts: Mapping[str, Any]
    ) -> Iterator[Callable[[], object]]:
        """Another connection holds the row lock of a job in an open
        transaction (the idle-in-transaction caller of LESSONS); a store with
        a short ``lock_timeout_s`` then cancels that job and gives up on the
        lock (E-2). (A pooled connection the server dropped no longer makes
        a transient error: the engine replaces it and retries.)"""
        store = PostgresStore(url, **{**opts, "lock_timeout_s": 0.2})
        holder = psycopg.connect(parse_url(url).conninfo)
        try:
            probe = store.queue("transient-probe")
            job_id = probe.enqueue({"probe": True})
            table = sql.Identifier(store.schema, "jobs")
            holder.execute(
                sql.SQL("SELECT id FROM {} WHERE id = %s FOR UPDATE").format(table), (job_id,)
            )
            yield lambda: probe.cancel(job_id)
        finally:
            holder.rollback()
            holder.close()
            store.close()

    @contextmanager
    def future_schema(self, url: str, opts: Mapping[str, Any]) -> Iterator[Callable[[], object]]:
        """The schema of *opts* holding only a ``meta`` table whose version is
        one past this engine's; the snapshot lists the schema's relations
        and the meta rows."""
        schema = check_schema(opts.get("schema", "alkstore"))
        stmts = _sql.Statements(schema)
        # The test's own schema, which a store opened for it before (the
        # suite's capability probe, on the async face) may have made.
        drop_schema(url, schema)
        with psycopg.connect(parse_url(url).conninfo, autocommit=True) as conn:
            # Statements go out with parameters (a '%' of the schema is doubled).
            conn.execute(stmts.create_schema, {})
            conn.execute(stmts.migrations[1][0], {})  # the meta table
            conn.execute(stmts.set_version, {"version": str(_sql.SCHEMA_VERSION + 1)})

            def snapshot() -> object:
                relations = conn.execute(
                    "SELECT c.relname, c.relkind FROM pg_catalog.pg_class c "
                    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s ORDER BY c.relname",
                    (schema,),
                ).fetchall()
                meta = conn.execute(stmts.meta_rows, {}).fetchall()
                return relations, meta

            yield snapshot


HOOKS = PostgresHooks()
