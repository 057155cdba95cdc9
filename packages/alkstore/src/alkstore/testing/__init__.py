"""Testing your handlers (SPEC FW-2): a pytest plugin and an inline drain.

Installed with alkstore, the plugin (:mod:`alkstore.testing.plugin`, loaded
by pytest through the ``pytest11`` entry point) gives every test the
fixtures ``store``, ``async_store`` and ``store_url``: a fresh store per
test, on SQLite in ``tmp_path`` or on the store ``$ALKSTORE_TEST_URL``
names, isolated per test.

:func:`drain` (sync face) and :func:`adrain` (async face) run a handler
inline over a queue until nothing is claimable, ending each job as the
worker would (retries by the backoff curve, dead letters at the budget,
``Fail``, timeouts) without sleeping through any backoff: the delays are in
the :class:`DrainReport` they return.

Importing this package does not import pytest.
"""

from __future__ import annotations

from ._common import DrainReport, Run
from ._drain import drain
from ._drain_async import drain as adrain
from ._stores import TEST_URL_VAR, isolated_url

__all__ = ["TEST_URL_VAR", "DrainReport", "Run", "adrain", "drain", "isolated_url"]
