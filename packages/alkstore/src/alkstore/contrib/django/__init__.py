"""A backend for Django's Tasks framework (SPEC FW-1).

``django.tasks`` on Django 6 and later, the ``django-tasks`` package before
(``pip install alkstore[django]``)::

    TASKS = {
        "default": {
            "BACKEND": "alkstore.contrib.django.AlkstoreBackend",
            "OPTIONS": {"database": "default"},  # or {"url": "postgresql://..."}
        }
    }
    INSTALLED_APPS = [..., "alkstore.contrib.django"]  # manage.py alkstore_worker

The backend is imported on first use, so that listing the app in
``INSTALLED_APPS`` does not import the Tasks framework before Django is set up.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AlkstoreBackend", "TaskFailed", "close_stores"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
