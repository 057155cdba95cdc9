"""What ``alkstore metrics``, ``alkstore dashboard`` and ``alkstore worker
--metrics-port`` do; :mod:`alkstore.cli` only parses their arguments."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Sequence

from alkstore._open import open as open_store
from alkstore._open import without_url_option
from alkstore.errors import AlkstoreError, InvalidArgument
from alkstore.protocols import Store

from .metrics import DepthSampler
from .prometheus import MetricsServer, render_depth, serve_store_metrics, serve_worker_metrics

__all__ = [
    "TOKEN_VAR",
    "open_read_only",
    "run_dashboard",
    "run_metrics",
    "start_worker_metrics",
]

#: The environment variable that gives the dashboard its token.
TOKEN_VAR = "ALKSTORE_DASHBOARD_TOKEN"

_USERINFO_PASSWORD = re.compile(r"(://[^:/@?#]*:)[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def shown_url(url: str) -> str:
    """*url* with any password replaced by ``***`` (E-4)."""
    return _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", url))


def open_read_only(url: str) -> Store:
    """Open *url* without creating or migrating anything (SPEC §13): a
    missing database or schema is one clear error."""
    try:
        return open_store(without_url_option(url, "migrate"), migrate=False)
    except InvalidArgument:
        raise
    except AlkstoreError as exc:
        raise AlkstoreError(f"cannot open {shown_url(url)}: {exc}") from exc
    except Exception as exc:  # a broken or half-installed engine package
        raise AlkstoreError(
            f"cannot load the engine for {shown_url(url)}: {type(exc).__name__}: {exc}"
        ) from exc


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_metrics(url: str, serve: str | None, stop: threading.Event) -> int:
    """``alkstore metrics``: print the depth families once, or serve them on
    *serve* (``[HOST:]PORT``) until *stop* is set."""
    store = open_read_only(url)
    try:
        if serve is None:
            sampler = DepthSampler(store, max_age_s=0)
            at, stats = sampler.sample()
            sys.stdout.write(render_depth(stats, at))
            return 0
        with serve_store_metrics(store, serve) as server:
            _say(
                f"alkstore metrics: serving {server.url} for {store.url}; "
                "Ctrl-C or SIGTERM stops it"
            )
            _wait(stop)
        return 0
    finally:
        store.close()


def run_dashboard(
    url: str,
    bind: str,
    stop: threading.Event,
    *,
    read_only: bool,
    allowed_hosts: Sequence[str],
    sample_every_s: float,
    scrape: Sequence[str],
) -> int:
    """``alkstore dashboard``: serve it until *stop* is set."""
    from .dashboard import serve_dashboard

    token = os.environ.get(TOKEN_VAR) or None
    store = open_read_only(url)
    try:
        with serve_dashboard(
            store,
            bind,
            token=token,
            read_only=read_only,
            allowed_hosts=allowed_hosts,
            sample_every_s=sample_every_s,
            scrape=scrape,
        ) as server:
            mode = "read-only" if read_only else "redrive and purge need the token"
            reach = "every page needs the token" if server.public else mode
            _say(f"alkstore dashboard: {server.url} for {store.url} ({reach})")
            if not read_only or server.public:
                if token is None:
                    _say(f"  sign in with: {server.login_url}")
                else:
                    _say(f"  sign in with the token in ${TOKEN_VAR}")
            _say("  Ctrl-C or SIGTERM stops it")
            _wait(stop)
        return 0
    finally:
        store.close()


def _wait(stop: threading.Event) -> None:
    # A bounded wait, so that a signal handler setting *stop* is seen soon.
    while not stop.wait(0.5):
        pass


def start_worker_metrics(bind: str) -> MetricsServer:
    """The ``/metrics`` endpoint of ``alkstore worker --metrics-port``."""
    server = serve_worker_metrics(bind)
    _say(f"alkstore worker: metrics at {server.url}")
    return server
