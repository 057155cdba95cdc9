"""``alkstore.engine.unwrap`` without a database: what it refuses and passes
through. The frameworks themselves are tested on both engines in
contract_tests/test_frameworks.py."""

from __future__ import annotations

import sqlite3

import pytest

from alkstore import InvalidArgument
from alkstore.engine import unwrap


def _object_of(module: str, name: str) -> object:
    return type(name, (), {"__module__": module})()


@pytest.mark.clause("T-2")
def test_unwrap_of_a_psycopg2_connection_is_refused_naming_psycopg_3() -> None:
    # The module name is all unwrap looks at; the real psycopg2 connection is
    # refused the same way in contract_tests/test_frameworks.py.
    with pytest.raises(InvalidArgument) as refused:
        unwrap(_object_of("psycopg2.extensions", "connection"))
    assert "psycopg 3" in str(refused.value)


@pytest.mark.clause("T-2")
def test_unwrap_of_a_sqlalchemy_connection_on_psycopg2_is_refused_naming_psycopg_3() -> None:
    proxy = _object_of("sqlalchemy.pool.base", "_ConnectionFairy")
    proxy.driver_connection = _object_of("psycopg2.extensions", "connection")  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument) as refused:
        unwrap(proxy)
    assert "psycopg 3" in str(refused.value)


@pytest.mark.clause("T-2", "A-7")
@pytest.mark.parametrize("name", ["AsyncSession", "AsyncConnection", "async_scoped_session"])
def test_unwrap_of_an_async_sqlalchemy_object_names_the_async_store(name: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        unwrap(_object_of("sqlalchemy.ext.asyncio.session", name))
    assert "async store (alkstore.open_async)" in str(refused.value)


@pytest.mark.clause("T-2")
def test_unwrap_of_a_django_object_without_a_connection_names_the_wrapper() -> None:
    with pytest.raises(InvalidArgument) as refused:
        unwrap(_object_of("django.db.models.query", "QuerySet"))
    assert "django.db.connection" in str(refused.value)


def test_unwrap_passes_other_objects_through_unchanged() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        assert unwrap(conn) is conn
        other = object()
        assert unwrap(other) is other
    finally:
        conn.close()
