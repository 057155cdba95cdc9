"""``python -m alkstore_conformance URL [pytest args]``: run the suite on an engine.

The engine is found through the ``alkstore.engines`` entry points like any
``alkstore.open(URL)``; engine options can be given as JSON with
``--engine-opts '{"schema": "x"}'``. Each test gets a fresh database when the
engine registers the ``isolated`` conformance hook (the in-repo engines do);
without hooks the suite still runs, and the tests that need one skip with
the reason. A URL whose scheme no installed engine serves is one line on
stderr and exit status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from alkstore import InvalidArgument
from alkstore._open import ENGINE_GROUP, installed_schemes, redact_url, url_scheme

from .url_suite import OPTS_VAR, URL_VAR

USAGE = "usage: python -m alkstore_conformance URL [--engine-opts JSON] [pytest args...]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(USAGE)
        print(__doc__)
        return 0 if argv else 2
    url, rest = argv[0], argv[1:]
    try:
        scheme = url_scheme(url)
    except InvalidArgument as exc:
        print(f"alkstore_conformance: {redact_url(str(exc))}", file=sys.stderr)
        return 2
    if scheme not in installed_schemes():
        installed = ", ".join(installed_schemes()) or "none"
        print(
            f"alkstore_conformance: no alkstore engine is installed for {scheme!r} URLs "
            f"(installed: {installed})",
            file=sys.stderr,
        )
        return 2
    try:  # a broken engine package: one line here, not an error per test
        next(ep for ep in entry_points(group=ENGINE_GROUP) if ep.name == scheme).load()
    except Exception as exc:
        print(
            f"alkstore_conformance: the engine for {scheme!r} URLs failed to load: "
            f"{type(exc).__name__}: {redact_url(str(exc))}",
            file=sys.stderr,
        )
        return 1
    opts = "{}"
    if rest[:1] == ["--engine-opts"] and len(rest) >= 2:
        opts, rest = rest[1], rest[2:]
        try:
            if not isinstance(json.loads(opts), dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            print(
                f"alkstore_conformance: --engine-opts must be a JSON object: {exc}", file=sys.stderr
            )
            return 2
    here = Path(__file__).resolve().parent
    args = [
        sys.executable,
        "-m",
        "pytest",
        str(here / "url_suite.py"),
        "-c",
        str(here / "pytest.ini"),
        "--rootdir",
        os.getcwd(),
        "-p",
        "no:cacheprovider",
        *rest,
    ]
    # A fresh interpreter: pytest rewrites the suite's asserts (for readable
    # failures) only in modules it imports itself.
    env = {**os.environ, URL_VAR: url, OPTS_VAR: opts}
    return subprocess.call(args, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
