"""The Django app: add ``"alkstore.contrib.django"`` to ``INSTALLED_APPS``
for the ``manage.py alkstore_worker`` command."""

from __future__ import annotations

import logging

from django.apps import AppConfig

log = logging.getLogger("alkstore.contrib.django")


class AlkstoreConfig(AppConfig):  # type: ignore[misc]  # Django ships no types
    name = "alkstore.contrib.django"
    label = "alkstore_django"
    verbose_name = "alkstore"

    def ready(self) -> None:
        """Open the store of every ``AlkstoreBackend`` in ``TASKS`` now, at
        startup: it creates or upgrades its tables, which on SQLite cannot
        happen later inside a request's ``atomic()`` (the request holds the
        write lock). A store that cannot open yet is opened on first use."""
        from django.conf import settings

        from .backend import AlkstoreBackend

        for alias, params in getattr(settings, "TASKS", {}).items():
            if params.get("BACKEND") != "alkstore.contrib.django.AlkstoreBackend":
                continue
            try:
                from ._compat import task_backends

                backend = task_backends[alias]
                if isinstance(backend, AlkstoreBackend):
                    backend.store  # noqa: B018 - opens it
            except Exception as exc:
                log.warning("task backend %r: the store did not open at startup: %s", alias, exc)
