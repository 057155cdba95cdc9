"""Django with async views: the order and its job commit in one
`transaction.atomic()`, and an AsyncWorker runs the job with the async ORM.

Django's async ORM runs its queries on sync connections in a worker thread,
and `transaction.atomic()` only works in sync code. So the view runs its
transaction in a plain function through asgiref's `sync_to_async`, and that
function uses the *sync* store with `tx=django.db.connection`: the same
connection, on the same thread, that Django's ORM writes with. The async
store does not take Django's connection (it would use it from another
thread). The worker is async: the ORM's `a*` methods work in a handler.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import django
import psycopg
from asgiref.sync import sync_to_async
from django.conf import settings

import alkstore
from alkstore import AsyncJob
from alkstore.worker import AsyncWorker

URL = os.environ.get("ALKSTORE_URL") or alkstore.DEFAULT_URL
store = alkstore.open(URL)  # the sync face, for transaction.atomic()


def django_database(store: alkstore.Store) -> dict[str, Any]:
    """Django's DATABASES entry for the store's database."""
    if store.url.startswith("sqlite:"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": store.path}
    # store.dsn: the libpq DSN, without alkstore's own URL options (?schema=...).
    params = psycopg.conninfo.conninfo_to_dict(store.dsn)
    return {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": params.pop("dbname", ""),
        "USER": params.pop("user", ""),
        "PASSWORD": params.pop("password", ""),
        "HOST": params.pop("host", ""),
        "PORT": params.pop("port", ""),
        "OPTIONS": params,
    }


settings.configure(
    DATABASES={"default": django_database(store)},
    INSTALLED_APPS=[],
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["testserver"],
    USE_TZ=True,
)
django.setup()

from django.db import connection, connections, models, transaction  # noqa: E402 (after setup)
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.test import AsyncClient  # noqa: E402
from django.urls import path  # noqa: E402


class Order(models.Model):
    item = models.CharField(max_length=100)
    status = models.CharField(max_length=20, default="placed")

    class Meta:
        app_label = "shop"


def place_order_and_job(item: str) -> int:
    """Sync code: the ORM row and the job commit together, or neither."""
    with transaction.atomic():
        order = Order.objects.create(item=item)
        store.queue("invoices").enqueue({"order": order.pk}, tx=connection)
        if not item:
            raise ValueError("an order needs an item")  # rolls both back
    return int(order.pk)


async def place_order(request: HttpRequest) -> JsonResponse:
    item = json.loads(request.body)["item"]
    try:
        # thread_sensitive (the default): the thread Django's ORM uses.
        order_id = await sync_to_async(place_order_and_job)(item)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=422)
    return JsonResponse({"id": order_id}, status=201)


urlpatterns = [path("orders", place_order)]


async def invoice(job: AsyncJob) -> None:
    """An async handler: the async ORM works here as anywhere in async code."""
    order = await Order.objects.aget(pk=job.payload["order"])
    order.status = "invoiced"
    await order.asave()


def create_table() -> None:
    """What `manage.py migrate` does in a real project."""
    if Order._meta.db_table not in connection.introspection.table_names():
        with connection.schema_editor() as editor:
            editor.create_model(Order)


async def main() -> None:
    await sync_to_async(create_table)()

    client = AsyncClient()  # Django's in-process ASGI client: no server
    for item in ("a book", ""):
        response = await client.post("/orders", json.dumps({"item": item}), "application/json")
        print("POST /orders", item or "(no item)", "->", response.status_code, response.json())

    # The async face on the same database claims what the sync face enqueued.
    astore = await alkstore.open_async(URL)
    worker = AsyncWorker(astore, "invoices", invoice, concurrency=4)
    ran = await worker.run_until_empty()  # in production: await worker.run(stop=event)
    await astore.close()

    orders = [(o.item, o.status) async for o in Order.objects.order_by("pk")]
    print(f"the worker ran {ran} job(s); orders: {orders}")
    assert orders == [("a book", "invoiced")]
    await sync_to_async(connections.close_all)()  # the ORM thread's connection


asyncio.run(main())
store.close()
