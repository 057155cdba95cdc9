"""The project's one view: create an order and enqueue its receipt, in one
transaction."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse

from .tasks import send_receipt


class _Refused(Exception):
    pass


def create_order(request: HttpRequest) -> Any:
    item = request.POST["item"]
    try:
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("INSERT INTO shop_order (item) VALUES (%s)", [item])
                cur.execute("SELECT MAX(id) FROM shop_order")
                (order_id,) = cur.fetchone()
            result = send_receipt.enqueue(order_id)
            if item == "forbidden":  # after the enqueue: both roll back
                raise _Refused(item)
    except _Refused:
        return JsonResponse({"refused": item}, status=409)
    return JsonResponse({"order": order_id, "result_id": result.id}, status=201)
