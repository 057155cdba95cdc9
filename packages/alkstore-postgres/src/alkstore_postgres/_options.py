"""Engine options: from a URL and keywords to one checked :class:`Config`
(EN-3), the same for the sync and the async store."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from alkstore.engine import check_bool_option
from alkstore.errors import InvalidArgument
from alkstore.names import validate_name
from alkstore.types import check_duration, check_int

from ._url import ENGINE_OPTIONS, check_schema, conninfo_dict, parse_url

__all__ = ["Config", "parse_options"]

#: Defaults of the engine options (see the package README).
DEFAULT_SCHEMA = "alkstore"
DEFAULT_LOCK_TIMEOUT_S = 30.0
DEFAULT_POLL_S = 0.05
DEFAULT_POOL_TIMEOUT_S = 10.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: The partition width of results and dead letters (docs/adr/0026): its
#: bounds, in seconds.
MIN_PARTITION_WIDTH_S = 60
MAX_PARTITION_WIDTH_S = 7 * 86_400


@dataclass(frozen=True)
class Config:
    """Everything a store needs to know before it connects."""

    #: The libpq DSN: the URL with the engine options removed, password kept.
    conninfo: str
    #: The URL as shown (no password, E-4).
    display: str
    schema: str
    min_size: int
    max_size: int
    pool_timeout_s: float
    lock_timeout_s: float
    pooler: bool
    poll_s: float
    #: The DSN of the LISTEN connection (``listen_url``, or the store's own).
    listen_conninfo: str
    #: Whether notifications can be received (not behind a pooler without
    #: ``listen_url``).
    can_listen: bool
    migrate: bool
    #: ``partition_width_s``: the width (seconds) of the partitions of
    #: results and dead letters, set when the schema is created or upgraded
    #: to version 7; ``None``: an hour there, and whatever the schema holds
    #: otherwise (docs/adr/0026).
    partition_width_s: int | None = None
    #: Keyword arguments of every connection (timeouts, application name,
    #: statement preparation).
    connect_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def lock_timeout_ms(self) -> int:
        return max(1, round(self.lock_timeout_s * 1000))

    @property
    def connect_timeout_s(self) -> float:
        return float(self.connect_kwargs.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S))

    @property
    def prepare(self) -> bool | None:
        """``prepare=`` of every execute: never behind a pooler (EN-4)."""
        return False if self.pooler else None


def parse_options(url: str, keywords: Mapping[str, Any]) -> Config:
    """Check *url* and the engine options given as *keywords*. An option
    given both ways is refused: neither silently wins (EN-3)."""
    unknown = set(keywords) - set(ENGINE_OPTIONS)
    if unknown:
        raise InvalidArgument(
            f"unknown PostgreSQL engine options: {', '.join(sorted(unknown))} "
            f"(known: {', '.join(ENGINE_OPTIONS)})"
        )
    parsed = parse_url(url)
    twice = set(keywords) & set(parsed.options)
    if twice:
        raise InvalidArgument(
            f"engine options given both in the URL and as keywords: {', '.join(sorted(twice))}"
        )
    opts: dict[str, Any] = {**parsed.options, **keywords}
    schema = check_schema(opts.get("schema", DEFAULT_SCHEMA))
    low = check_int("min_size", opts.get("min_size", 1), 0, 1000)
    high = check_int("max_size", opts.get("max_size", 10), max(low, 1), 1000)
    pool_timeout = check_duration(
        "pool_timeout_s", opts.get("pool_timeout_s", DEFAULT_POOL_TIMEOUT_S), allow_zero=False
    )
    lock_timeout = check_duration(
        "lock_timeout_s", opts.get("lock_timeout_s", DEFAULT_LOCK_TIMEOUT_S), allow_zero=False
    )
    poll = check_duration("poll_s", opts.get("poll_s", DEFAULT_POLL_S), allow_zero=False)
    assert pool_timeout is not None and lock_timeout is not None and poll is not None
    if lock_timeout > 86_400 * 24:
        raise InvalidArgument("lock_timeout_s must be at most 24 days")
    migrate = check_bool_option("migrate", opts.get("migrate", True))
    width = opts.get("partition_width_s")
    if width is not None:
        width = check_int("partition_width_s", width, MIN_PARTITION_WIDTH_S, MAX_PARTITION_WIDTH_S)
    pooler = check_bool_option("pooler", opts.get("pooler", False))
    listen_url = opts.get("listen_url")
    if listen_url is not None and not isinstance(listen_url, str):
        raise InvalidArgument(f"listen_url must be a str, not {type(listen_url).__name__}")
    listen_conninfo = parsed.conninfo
    if listen_url is not None:
        listen = parse_url(listen_url)
        if listen.options:
            raise InvalidArgument("listen_url takes no engine options")
        listen_conninfo = listen.conninfo

    libpq = conninfo_dict(parsed.conninfo)
    kwargs: dict[str, Any] = {}
    connect_timeout = check_duration(
        "connect_timeout_s", opts.get("connect_timeout_s"), allow_zero=False, allow_none=True
    )
    if connect_timeout is None and "connect_timeout" not in libpq:
        connect_timeout = DEFAULT_CONNECT_TIMEOUT_S
    if connect_timeout is not None:
        # libpq counts whole seconds and treats less than 2 as 2.
        kwargs["connect_timeout"] = max(2, math.ceil(connect_timeout))
    app = opts.get("application_name")
    if app is not None or "application_name" not in libpq:
        kwargs["application_name"] = validate_name(
            app if app is not None else "alkstore", "application_name", allow_reserved=True
        )
    return Config(
        conninfo=parsed.conninfo,
        display=parsed.display,
        schema=schema,
        min_size=low,
        max_size=high,
        pool_timeout_s=pool_timeout,
        lock_timeout_s=lock_timeout,
        pooler=pooler,
        poll_s=min(poll, 60.0),
        listen_conninfo=listen_conninfo,
        can_listen=not pooler or listen_url is not None,
        migrate=migrate,
        partition_width_s=width,
        connect_kwargs=kwargs,
    )
