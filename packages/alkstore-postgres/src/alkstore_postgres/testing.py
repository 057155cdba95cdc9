"""Test support for the PostgreSQL engine.

- :data:`HOOKS`: the engine's conformance hooks (entry point
  ``alkstore_conformance.hooks``), structurally an
  ``alkstore_conformance.EngineHooks``: a fresh schema per test, a dropped
  connection for E-2, a schema from the future for ST-2.
- :func:`find_server` and :func:`provide_server`: find a PostgreSQL server
  for the test suites, in this order: ``$ALKSTORE_PG_DSN``; a server on
  ``localhost:5432`` (user ``postgres``); a throwaway cluster made with
  ``initdb``/``pg_ctl`` when they are on ``PATH`` (as the ``postgres``
  account when running as root); a testcontainers container when the
  package is installed and Docker works.

Nothing here imports pytest or the conformance package.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from . import _sql
from ._store import PostgresStore, check_schema, parse_url

__all__ = [
    "DSN_VAR",
    "HOOKS",
    "LOCAL_URL",
    "PostgresHooks",
    "ServerSearch",
    "drop_schema",
    "find_server",
    "provide_server",
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


@contextmanager
def _throwaway_cluster() -> Iterator[str]:
    """A cluster in a temporary directory on a free port, stopped and removed
    at the end. Raises ``RuntimeError`` when it cannot be made."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError("initdb/pg_ctl are not on PATH")
    prefix = _as_cluster_owner()
    workdir = tempfile.mkdtemp(prefix="alkstore-pg-")
    if prefix:
        shutil.chown(workdir, user="postgres")
    data = os.path.join(workdir, "data")
    port = _free_port()
    try:
        subprocess.run(
            [*prefix, initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"],
            check=True,
            capture_output=True,
        )
        options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        log_file = os.path.join(workdir, "log")
        subprocess.run(
            [*prefix, pg_ctl, "-D", data, "-l", log_file, "-o", options, "-w", "start"],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise RuntimeError(f"could not start a throwaway cluster: {exc}") from exc
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        stop = [*prefix, pg_ctl, "-D", data, "-m", "immediate", "stop"]
        subprocess.run(stop, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


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


# --------------------------------------------------------------------- hooks


def drop_schema(url: str, schema: str) -> None:
    """``DROP SCHEMA ... CASCADE``, waiting at most 10 s for locks held by
    stores a test left open."""
    with psycopg.connect(parse_url(url).conninfo, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")
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
        """A store whose only pooled connection was terminated by the server
        (``pg_terminate_backend``); its next enqueue meets the dropped
        connection (E-2)."""
        app = f"alkstore-e2-{uuid.uuid4().hex[:12]}"
        store = PostgresStore(
            url, **{**opts, "application_name": app, "min_size": 1, "max_size": 1}
        )
        try:
            probe = store.queue("transient-probe")
            probe.stats()  # the pool's one connection exists and is idle
            with psycopg.connect(parse_url(url).conninfo, autocommit=True) as admin:
                pids = [
                    pid
                    for (pid,) in admin.execute(
                        "SELECT pid FROM pg_stat_activity "
                        "WHERE application_name = %s AND pid <> pg_backend_pid()",
                        (app,),
                    ).fetchall()
                ]
                for pid in pids:
                    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
            if not pids:
                raise RuntimeError("the store's connection was not found to terminate")
            yield lambda: probe.enqueue({"probe": True})
        finally:
            store.close()

    @contextmanager
    def future_schema(self, url: str, opts: Mapping[str, Any]) -> Iterator[Callable[[], object]]:
        """The schema of *opts* holding only a ``meta`` table whose version is
        one past this engine's; the snapshot lists the schema's relations
        and the meta rows."""
        schema = check_schema(opts.get("schema", "alkstore"))
        stmts = _sql.Statements(schema)
        with psycopg.connect(parse_url(url).conninfo, autocommit=True) as conn:
            conn.execute(stmts.create_schema)
            conn.execute(stmts.migrations[1][0])  # the meta table
            conn.execute(stmts.set_version, {"version": str(_sql.SCHEMA_VERSION + 1)})

            def snapshot() -> object:
                relations = conn.execute(
                    "SELECT c.relname, c.relkind FROM pg_catalog.pg_class c "
                    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s ORDER BY c.relname",
                    (schema,),
                ).fetchall()
                meta = conn.execute(stmts.meta_rows).fetchall()
                return relations, meta

            yield snapshot


HOOKS = PostgresHooks()
