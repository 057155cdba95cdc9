"""Django's Tasks framework on alkstore: a view enqueues a task inside
`transaction.atomic()`, `manage.py alkstore_worker` runs it, and the view's
caller reads its result.

`AlkstoreBackend` with `OPTIONS = {"database": "default"}` keeps the tasks in
the database of Django's `default` connection (its SQLite file, or its
PostgreSQL database in the schema `alkstore`), and each enqueue joins that
connection's transaction: the order and its task commit together, or neither
does. Django 6 has the framework as `django.tasks`; before it, install
`alkstore[django]` (the `django-tasks` package, the same API).

Run it from any directory: it uses the database at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import unquote, urlsplit

import django
from django.conf import settings
from django.core.management import call_command

import alkstore

URL = os.environ.get("ALKSTORE_URL") or alkstore.DEFAULT_URL


def django_database(url: str) -> dict[str, Any]:
    """Django's DATABASES entry for a store URL's database."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parts.path[1:]}
    return {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": parts.path.lstrip("/"),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


settings.configure(
    DATABASES={"default": django_database(URL)},
    INSTALLED_APPS=["alkstore.contrib.django"],  # manage.py alkstore_worker
    TASKS={
        "default": {
            "BACKEND": "alkstore.contrib.django.AlkstoreBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"database": "default", "result_ttl_s": 3600},
        }
    },
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["testserver"],
    USE_TZ=True,
)
django.setup()  # the app opens the store here, creating its tables

from django.db import connection, transaction  # noqa: E402
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import path  # noqa: E402

try:
    from django.tasks import task  # Django 6 and later
except ImportError:
    from django_tasks import task

with connection.cursor() as cur:
    cur.execute("CREATE TABLE IF NOT EXISTS shop_order (id INTEGER PRIMARY KEY, item TEXT)")
    cur.execute("DELETE FROM shop_order")


@task(queue_name="emails", priority=10)
def send_receipt(order_id: int) -> dict[str, Any]:
    with connection.cursor() as cur:
        cur.execute("SELECT item FROM shop_order WHERE id = %s", [order_id])
        (item,) = cur.fetchone()
    print(f"worker: receipt for order {order_id} ({item})")
    return {"order": order_id, "receipt": f"R-{order_id}"}  # the task's result


def create_order(request: HttpRequest) -> JsonResponse:
    item = request.POST["item"]
    order_id = int(request.POST["id"])
    try:
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("INSERT INTO shop_order (id, item) VALUES (%s, %s)", [order_id, item])
            result = send_receipt.enqueue(order_id)  # joins the atomic block
            if item == "out of stock":
                raise LookupError(item)  # rolls back the order and its task
    except LookupError:
        return JsonResponse({"error": "out of stock"}, status=409)
    return JsonResponse({"order": order_id, "task": result.id}, status=201)


urlpatterns = [path("orders", create_order)]

client = Client()
created = json.loads(client.post("/orders", {"id": 1, "item": "book"}).content)
print("view:", created)
refused = client.post("/orders", {"id": 2, "item": "out of stock"})
print("view:", refused.status_code, "(no order, no task)")

call_command("alkstore_worker", "--until-empty")  # runs the one committed task

result = send_receipt.get_result(created["task"])
print("result:", result.status, result.return_value)
assert result.return_value == {"order": 1, "receipt": "R-1"}
