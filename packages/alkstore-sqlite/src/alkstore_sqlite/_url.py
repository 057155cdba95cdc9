"""``sqlite://`` URLs: the file path and the engine options in the query string."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from alkstore.engine import check_url_text, parse_option
from alkstore.errors import InvalidArgument

__all__ = ["OPTION_TYPES", "parse_url"]

#: Engine options, accepted as keywords or URL query parameters, and how a
#: URL's text turns into each (``bool``: by :func:`parse_bool_option`).
OPTION_TYPES: dict[str, Callable[[str], Any]] = {
    "busy_timeout_s": float,
    "synchronous": str,
    "poll_interval_s": float,
    "notifications_cap": int,
    "migrate": bool,
}


def parse_url(url: str) -> tuple[str, dict[str, Any]]:
    """``sqlite:///relative.db``, ``sqlite:////absolute.db`` -> (path, options).

    Query parameters are engine options (``?synchronous=normal``), each at
    most once. Anything that is not such a URL is an :class:`InvalidArgument`.
    """
    if not isinstance(url, str):
        raise InvalidArgument(f"a SQLite URL is a str, not {type(url).__name__}")
    if "\x00" in url:
        raise InvalidArgument("a SQLite URL cannot hold a NUL character")
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError as exc:  # an unbalanced "[" in the host part
        raise InvalidArgument(f"not a valid sqlite:// URL: {exc}") from exc
    if parts.scheme.lower() != "sqlite":
        raise InvalidArgument(f"not a sqlite:// URL: {url!r}")
    if netloc not in ("", "localhost"):
        raise InvalidArgument(f"a sqlite URL has no host: use sqlite:///path, not {url!r}")
    path = unquote(parts.path)
    path = path[1:] if path.startswith("/") else path
    if not path:
        raise InvalidArgument(f"the sqlite URL names no file: {url!r}")
    check_url_text(path, "a SQLite file name")
    opts: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        kind = OPTION_TYPES.get(key)
        if kind is None:
            raise InvalidArgument(f"unknown SQLite engine option {key!r} in {url!r}")
        if key in opts:
            raise InvalidArgument(f"engine option {key} appears twice in the URL")
        opts[key] = parse_option(key, value, kind)
    return path, opts
