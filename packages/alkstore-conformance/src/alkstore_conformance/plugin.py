"""The pytest plugin of the conformance suite (entry point ``pytest11``).

It registers the suite's markers and turns an engine's ``known_failures``
mapping into strict xfails; it adds no fixtures or options of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

MARKERS = {
    "clause": "clause(*ids): the SPEC rules this conformance test proves (e.g. 'Q-7')",
    "requires": (
        "requires(*capabilities): alkstore Capability values the test needs; "
        "the test is skipped, with the reason, when the engine does not declare one"
    ),
    "cross_process": "cross_process: the test runs real child processes",
    "sync_only": (
        "sync_only(reason): the test speaks the sync API only (a native sync driver "
        "handle, a thread-bound rule); its async run is skipped with the reason"
    ),
    "alone": (
        "alone: the test times the machine's responsiveness (the event loop's pauses, "
        "a heartbeat's cadence); "
        "run it where no other test loads the CPU (`dev.py test` runs these last, one "
        "at a time)"
    ),
    "fresh_database": (
        "fresh_database: the test reads database-wide state (every schedule, every "
        "queue) and is skipped when the run shares one database between tests"
    ),
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", text if text.startswith(name) else f"{name}: {text}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Known failures: ``known_failures = {"test_name": "reason"}`` on the
    engine's contract class marks those tests as strict xfails, so that a
    fixed failure is noticed. ``fresh_database_tests`` (a set of test names)
    on the class marks those tests ``fresh_database``. Each test also answers
    ``-k`` to the name of each mixin that holds it (``-k QueueContract``,
    ``-k QueueClaimContract``)."""
    for item in items:
        cls = getattr(item, "cls", None)
        if cls is None:
            continue
        name = getattr(item, "originalname", item.name)
        known: Mapping[str, str] = getattr(cls, "known_failures", None) or {}
        if name in known:
            item.add_marker(pytest.mark.xfail(reason=known[name], strict=True))
        if name in (getattr(cls, "fresh_database_tests", None) or ()):
            item.add_marker(pytest.mark.fresh_database)
        # Every mixin that holds the test, the one defining it and those that
        # gather it (QueueClaimContract and QueueContract alike).
        for base in cls.__mro__[1:]:
            if name in dir(base):
                item.extra_keyword_matches.add(base.__name__)
