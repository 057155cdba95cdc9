"""``alkstore.open``: find the engine for a URL through entry points (§0),
and show URLs without their passwords (E-4)."""

from __future__ import annotations

import os
import re
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import unquote_plus

from .errors import AlkstoreError, EngineError, InvalidArgument
from .protocols import Store

__all__ = [
    "DEFAULT_URL",
    "ENGINE_GROUP",
    "REDACTED",
    "installed_schemes",
    "open",
    "redact_url",
    "url_scheme",
    "without_url_option",
]

#: What a password is shown as.
REDACTED = "***"

# scheme://user:PASSWORD@host: the password runs to the last "@" of the
# whitespace-delimited word, so an unencoded "@" or "/" in it is hidden too
# (at worst, more than the password is hidden; never less).
_USERINFO_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)(?P<secret>\S*)(?P<at>@)"
)
# ?password=... / &password=... in a URL, and password=... (quoted or not)
# in a libpq key=value string.
_KEYWORD_PASSWORD = re.compile(
    r"(?P<head>(?<![A-Za-z0-9_])password\s*=\s*)"
    r"(?P<secret>'(?:[^'\\]|\\.)*'?|[^\s&#'\"]+)",
    re.IGNORECASE,
)

# "password": "..." in the repr of a mapping of options (or in JSON).
_MAPPING_PASSWORD = re.compile(
    r"""(?P<head>(?P<q>['"])password(?P=q)\s*:\s*)(?P<secret>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""",
    re.IGNORECASE,
)


def redact_url(text: str) -> str:
    """*text* with every password replaced by ``***`` (E-4).

    *text* is a store URL (``postgresql://app:pw@db/app``, ``...?password=pw``),
    a libpq connection string (``host=db password='p w'``), a mapping of
    options shown as a repr or JSON (``{'password': 'pw'}``), or any message
    that contains them. Everything else is kept, so the result still says which
    database is meant.

    >>> redact_url("postgresql://app:S3cret@db.example/app?sslmode=require")
    'postgresql://app:***@db.example/app?sslmode=require'
    >>> redact_url("cannot open host=db user=app password='a b' dbname=app")
    'cannot open host=db user=app password=*** dbname=app'
    """
    text = _USERINFO_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}{m['at']}", text)
    text = _MAPPING_PASSWORD.sub(lambda m: f"{m['head']}{m['q']}{REDACTED}{m['q']}", text)
    return _KEYWORD_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}", text)


def _redact_error(exc: AlkstoreError) -> None:
    """Hide passwords in *exc*'s message (and ``.reason``) in place, keeping
    its class and attributes: an engine may quote the URL it was given."""
    exc.args = tuple(redact_url(a) if isinstance(a, str) else a for a in exc.args)
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str):
        exc.reason = redact_url(reason)  # type: ignore[attr-defined]


#: The entry-point group engines register under, keyed by URL scheme.
ENGINE_GROUP = "alkstore.engines"
#: The embedded default: SQLite in the working directory.
DEFAULT_URL = "sqlite:///alkstore.db"


def url_scheme(url: str) -> str:
    """The scheme of *url*, lower-cased (``"sqlite"``, ``"postgresql"``)."""
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        raise InvalidArgument(f"not a store URL (expected scheme://...): {redact_url(url)!r}")
    return scheme.lower()


def without_url_option(url: str, name: str) -> str:
    """*url* without the query parameter *name*, the rest byte for byte.

    For callers that set that engine option themselves: engines may refuse an
    option given both in the URL and as a keyword (the PostgreSQL engine does,
    EN-3), and the read-only commands must not migrate whatever the URL says.
    """
    base, sep, query = url.partition("?")
    if not sep:
        return url
    fragment = ""
    if "#" in query:
        query, _, fragment = query.partition("#")
        fragment = "#" + fragment
    kept = [part for part in query.split("&") if unquote_plus(part.partition("=")[0]) != name]
    return (base + "?" + "&".join(kept) if kept and kept != [""] else base) + fragment


def installed_schemes() -> list[str]:
    """The URL schemes of the installed engines, sorted."""
    return sorted({ep.name for ep in entry_points(group=ENGINE_GROUP)})


def open(url: str | None = None, **engine_opts: Any) -> Store:
    """Open the store at *url* with the engine registered for its scheme.

    With no URL: ``$ALKSTORE_URL`` when set, else the embedded default
    ``sqlite:///alkstore.db``. *engine_opts* go to the engine unchanged (for
    example ``schema=`` on PostgreSQL, ``synchronous=`` on SQLite). An unknown
    scheme raises :class:`InvalidArgument` naming the installed ones.
    """
    if url is None:
        url = os.environ.get("ALKSTORE_URL") or DEFAULT_URL
    if not isinstance(url, str):
        raise InvalidArgument(f"url must be a str, not {type(url).__name__}")
    if "\x00" in url:
        # No engine can take it, and some would fail on it with a raw ValueError (E-3).
        raise InvalidArgument("a store URL cannot hold a NUL character")
    scheme = url_scheme(url)
    matches = [ep for ep in entry_points(group=ENGINE_GROUP) if ep.name == scheme]
    if not matches:
        installed = ", ".join(installed_schemes()) or "none"
        raise InvalidArgument(
            f"no alkstore engine is installed for {scheme!r} URLs (installed: {installed}); "
            "try `pip install alkstore[sqlite]` or `alkstore[postgres]`"
        )
    try:
        factory = matches[0].load()
    except Exception as exc:  # a broken install: say which engine, keep the cause
        raise EngineError(f"the alkstore engine for {scheme!r} URLs failed to load: {exc}") from exc
    try:
        store: Store = factory(url, **engine_opts)
    except AlkstoreError as exc:
        _redact_error(exc)
        raise
    return store
