"""Where the plugin's stores live (SPEC FW-2): a fresh SQLite file in the
test's directory, or a fresh corner of the store at ``$ALKSTORE_TEST_URL``.

Isolation on a shared server is the engine's to give: the plugin asks the
engine's conformance hooks (the ``alkstore_conformance.hooks`` entry point
group, the same ``isolated`` hook the published suite uses) for a database
of the test's own, and folds the options it returns into the URL. The
PostgreSQL engine answers with a new schema, dropped with everything in it
after the test; the SQLite engine with a new file beside the one the URL
names. An engine without the hook gets the URL as it is, and a warning.

Nothing here imports pytest.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from alkstore._open import redact_url, url_scheme

__all__ = ["HOOKS_GROUP", "TEST_URL_VAR", "isolated_url", "with_options"]

#: The environment variable that points the plugin's fixtures at a store.
TEST_URL_VAR = "ALKSTORE_TEST_URL"
#: The entry point group of the engines' test hooks (keyed by URL scheme).
HOOKS_GROUP = "alkstore_conformance.hooks"


def _option_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def with_options(url: str, opts: Mapping[str, Any]) -> str:
    """*url* with *opts* as query parameters, replacing any of the same name
    (engine options work as URL parameters on both engines)."""
    if not opts:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in opts]
    query += [(k, _option_text(v)) for k, v in opts.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _hooks_for(scheme: str) -> Any:
    for ep in entry_points(group=HOOKS_GROUP):
        if ep.name == scheme:
            return ep.load()
    return None


def _slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", key).strip("_")[:40] or "test"


@contextmanager
def isolated_url(base: str | None, directory: Path, key: str) -> Iterator[str]:
    """The URL of a store no other test sees: ``sqlite:///<directory>/alkstore.db``
    without *base*; else a part of *base* of this test's own, removed
    afterwards (see the module docstring)."""
    if not base:
        yield f"sqlite:///{directory / 'alkstore.db'}"
        return
    hooks = _hooks_for(url_scheme(base))
    if hooks is None or not hasattr(hooks, "isolated"):
        warnings.warn(
            f"${TEST_URL_VAR}={redact_url(base)}: its engine registers no 'isolated' hook "
            f"under {HOOKS_GROUP!r}, so every test shares that one store",
            UserWarning,
            stacklevel=2,
        )
        yield base
        return
    with hooks.isolated(base, {}, _slug(key)) as (url, opts):
        yield with_options(url, opts)
