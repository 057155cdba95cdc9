"""The operator's dashboard (O-4, O-6): ``alkstore dashboard``.

A server-rendered site on the standard library's HTTP server, with charts
drawn as inline SVG: no script, no assets from anywhere (it works offline).
It shows every queue with its depth by state, charts of depth and of the
backlog's change sampled in memory while it runs (finished jobs per second
from the workers' counters with ``scrape``), each queue's jobs by state
(cancel live ones; redrive and purge dead ones, confirmed), one job's page
with its payload, error, result and trace id, the schedules with their next
fires, the streams with each consumer's lag, the held locks with their
owners and tokens, and ``/healthz``. Its access rules are in :mod:`._auth`;
the routes are listed in :mod:`._app`.

    server = serve_dashboard(store, "127.0.0.1:8765")
    print(server.login_url)     # the link that carries the token
    ...
    server.close()
"""

from __future__ import annotations

from collections.abc import Sequence

from alkstore.observability import metrics as _metrics
from alkstore.observability._http import HTTPService, ServedApp, parse_bind, serve_wsgi
from alkstore.protocols import Store
from alkstore.types import check_duration, check_int

from ._app import DashboardApp
from ._auth import Guard
from ._sampler import History, Sampler

__all__ = ["DEFAULT_BIND", "DashboardServer", "serve_dashboard"]

#: Where ``alkstore dashboard`` listens unless told otherwise.
DEFAULT_BIND = "127.0.0.1:8765"


class DashboardServer(ServedApp):
    """A running dashboard: :attr:`url`, :attr:`login_url` (with the
    token), :meth:`close`."""

    def __init__(
        self,
        service: HTTPService,
        guard: Guard,
        sampler: Sampler,
        observation: _metrics.StoreObservation,
    ) -> None:
        super().__init__(service, self._stop_reading)
        self._guard = guard
        self._sampler = sampler
        self._observation = observation

    @property
    def url(self) -> str:
        return f"{self._service.url}/"

    @property
    def login_url(self) -> str:
        return f"{self._service.url}/?token={self._guard.token}"

    @property
    def token(self) -> str:
        return self._guard.token

    @property
    def public(self) -> bool:
        """Bound beyond localhost: every page needs the token."""
        return self._guard.public

    def _stop_reading(self) -> None:
        # Once the pages are no longer served: nothing reads the store.
        self._sampler.stop()
        self._observation.close()


def serve_dashboard(
    store: Store,
    bind: str | tuple[str, int] = DEFAULT_BIND,
    *,
    token: str | None = None,
    read_only: bool = False,
    allowed_hosts: Sequence[str] = (),
    sample_every_s: float = 2.0,
    samples_kept: int = 900,
    scrape: Sequence[str] = (),
    refresh_s: float | None = 5.0,
) -> DashboardServer:
    """Serve the dashboard of *store* on *bind* from background threads.

    *token* guards changes (and every page when *bind* is not a loopback
    address); a random one is made when ``None``. *allowed_hosts* adds
    ``Host`` names to accept (for a dashboard behind a name). The charts
    sample every *sample_every_s* seconds and keep *samples_kept* samples;
    *scrape* lists worker metrics endpoints to read finished-job counters
    from. The queue overview reloads itself every *refresh_s* seconds
    (``None``: never). The store also feeds the OpenTelemetry depth gauges
    while the dashboard runs.
    """
    host, port = parse_bind(bind) if isinstance(bind, str) else bind
    every = check_duration("sample_every_s", sample_every_s, allow_zero=False)
    assert every is not None
    kept = check_int("samples_kept", samples_kept, 2, 1_000_000)
    refresh = check_duration("refresh_s", refresh_s, allow_zero=False, allow_none=True)
    guard = Guard(host=host, token=token, read_only=read_only, allowed_hosts=allowed_hosts)
    history = History(kept)
    sampler = Sampler(store, history, every, scrape)
    app = DashboardApp(store, guard, history, sampler, every_s=every, refresh_s=refresh)
    service = serve_wsgi(app, host, port, name="alkstore-dashboard")
    guard.port = service.port
    observation = _metrics.observe_store(store)
    sampler.sample_once()
    sampler.start()
    return DashboardServer(service, guard, sampler, observation)
