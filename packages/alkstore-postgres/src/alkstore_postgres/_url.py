"""``postgresql://`` URLs and libpq strings: what libpq gets, what is shown,
and the engine options in the query string (EN-3, E-4)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from alkstore.engine import check_url_text, parse_option
from alkstore.errors import InvalidArgument

__all__ = [
    "ENGINE_OPTIONS",
    "ParsedURL",
    "check_schema",
    "conninfo_dict",
    "parse_url",
]


#: Engine options, accepted as keywords or as URL query parameters, and how
#: a URL's text turns into each (``bool``: by :func:`parse_bool_option`).
ENGINE_OPTIONS: dict[str, Callable[[str], Any]] = {
    "schema": str,
    "min_size": int,
    "max_size": int,
    "connect_timeout_s": float,
    "pool_timeout_s": float,
    "application_name": str,
    "migrate": bool,
    "lock_timeout_s": float,
    "pooler": bool,
    "poll_s": float,
    "listen_url": str,
    "partition_width_s": int,
}
_SCHEMES = ("postgresql", "postgres")
# PostgreSQL truncates longer identifiers, which could merge two schemas.
_MAX_IDENTIFIER_BYTES = 63


@dataclass(frozen=True)
class ParsedURL:
    """A store URL split into what libpq gets, what is shown, and the
    engine options found in its query string."""

    conninfo: str
    display: str
    options: dict[str, Any]


def parse_url(url: str) -> ParsedURL:
    """Split ``postgresql://user:pw@host/db?sslmode=require&schema=jobs``.

    Every libpq URL form is accepted, Unix-socket hosts included
    (``postgresql:///db?host=/var/run/postgresql``, or the socket directory
    percent-encoded as the host). Engine options (:data:`ENGINE_OPTIONS`) may
    appear in the query string, each at most once, and are removed before
    libpq sees it; other parameters go to libpq as they are. A libpq
    ``key=value`` string is accepted too. The display form drops the
    password. Anything malformed is an :class:`InvalidArgument` (EN-3).
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument("a PostgreSQL URL is a non-empty str")
    check_url_text(url, "a PostgreSQL URL")
    if "://" not in url:
        params = conninfo_dict(url)
        params.pop("password", None)
        return ParsedURL(url, make_conninfo(**params), {})
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError as exc:  # an unbalanced "[" in the host part
        raise InvalidArgument(f"not a valid PostgreSQL URL: {exc}") from exc
    if parts.scheme.lower() not in _SCHEMES:
        raise InvalidArgument(f"not a postgresql:// URL: {parts.scheme}://...")
    userinfo, at, hosts = netloc.rpartition("@")
    _check_ports(hosts)
    kept: list[str] = []
    shown: list[str] = []
    options: dict[str, Any] = {}
    for item in parts.query.split("&") if parts.query else []:
        key = unquote(item.partition("=")[0])
        if key in ENGINE_OPTIONS:
            if key in options:
                raise InvalidArgument(f"engine option {key} appears twice in the URL")
            options[key] = parse_option(key, unquote(item.partition("=")[2]), ENGINE_OPTIONS[key])
            shown.append(item)
        else:
            if key == "port":
                _check_port_list(unquote(item.partition("=")[2]))
            kept.append(item)
            if key != "password":
                shown.append(item)
    conninfo = _unsplit(parts.scheme, netloc, parts.path, "&".join(kept), parts.fragment)
    conninfo_dict(conninfo)  # refuse a malformed URL here, with a clear error
    display_netloc = f"{userinfo.partition(':')[0]}@{hosts}" if at else hosts
    display = _unsplit(parts.scheme, display_netloc, parts.path, "&".join(shown), "")
    return ParsedURL(conninfo, display, options)


def _unsplit(scheme: str, netloc: str, path: str, query: str, fragment: str) -> str:
    # urlunsplit drops the "//" of an empty host, which turns
    # "postgresql:///db?host=/sock" into a string libpq does not read as a URL.
    text = f"{scheme}://{netloc}{path}"
    if query:
        text += f"?{query}"
    if fragment:
        text += f"#{fragment}"
    return text


def _check_ports(hosts: str) -> None:
    """Each ``host:port`` of a (multi-host) netloc has a port in 1..65535 or none."""
    for host in hosts.split(","):
        if host.startswith("["):
            _, bracket, rest = host.partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise InvalidArgument("a bracketed IPv6 host must end with ']' or ']:port'")
            port = rest[1:]
        else:
            port = host.rpartition(":")[2] if ":" in host else ""
        _check_port_list(unquote(port))


def _check_port_list(text: str) -> None:
    for port in text.split(","):
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise InvalidArgument(f"a port is a number in 1..65535, not {port[:20]!r}")


def conninfo_dict(conninfo: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"not a valid PostgreSQL connection string: {exc}") from exc


def check_schema(schema: object) -> str:
    """A schema name (EN-2): any identifier of 1..63 bytes in UTF-8, since the
    engine always quotes it, except NUL (which no identifier may hold) and
    PostgreSQL's own ``pg_`` namespace (where it refuses to create one)."""
    if not isinstance(schema, str):
        raise InvalidArgument(f"schema must be a str, not {type(schema).__name__}")
    if not schema or "\x00" in schema:
        raise InvalidArgument("schema must be a non-empty name without NUL")
    try:
        size = len(schema.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgument("schema is not valid text (lone surrogate)") from exc
    if size > _MAX_IDENTIFIER_BYTES:
        raise InvalidArgument(f"schema name is longer than {_MAX_IDENTIFIER_BYTES} bytes")
    if schema.lower().startswith("pg_"):
        raise InvalidArgument(f"schema names starting with 'pg_' belong to PostgreSQL: {schema!r}")
    return schema
