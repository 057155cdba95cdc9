"""The project's settings, as a user's would read (the tests give each test
its own database and ``TASKS`` on top of these)."""

from __future__ import annotations

SECRET_KEY = "fw-1 tests only"
USE_TZ = True
ALLOWED_HOSTS = ["testserver"]
ROOT_URLCONF = "django_project.urls"
INSTALLED_APPS = ["alkstore.contrib.django", "django_project"]
MIDDLEWARE: list[str] = []
DATABASES: dict[str, dict[str, str]] = {}  # set per test
TASKS = {
    "default": {
        "BACKEND": "alkstore.contrib.django.AlkstoreBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"database": "default"},
    }
}
