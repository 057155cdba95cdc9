"""E-4: passwords in URLs and libpq strings are shown as ``***``."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import InvalidArgument
from alkstore._open import redact_url

CASES = [
    ("postgresql://app:S3cret@db/app", "postgresql://app:***@db/app"),
    ("postgres://:S3cret@db", "postgres://:***@db"),
    ("postgresql://app:S3%40cret@db:5432/app", "postgresql://app:***@db:5432/app"),
    # An unencoded "@" or "/" in the password is hidden too.
    ("postgresql://app:S3@cr/et@h1:5432,h2/app", "postgresql://app:***@h1:5432,h2/app"),
    (
        "postgresql://app@db/app?sslmode=require&password=S3cret&schema=jobs",
        "postgresql://app@db/app?sslmode=require&password=***&schema=jobs",
    ),
    ("postgresql://app@db/app?PASSWORD=S3cret#x", "postgresql://app@db/app?PASSWORD=***#x"),
    ("host=db user=app password=S3cret dbname=app", "host=db user=app password=*** dbname=app"),
    ("host=db password = 'S3 c\\'ret' dbname=app", "host=db password = *** dbname=app"),
    (
        "cannot open postgresql://app:S3cret@db/app: connection refused",
        "cannot open postgresql://app:***@db/app: connection refused",
    ),
    ("in 'sqlite:///x.db?password=S3cret'", "in 'sqlite:///x.db?password=***'"),
    ("opts {'schema': 'x', 'password': 'S3cret'}", "opts {'schema': 'x', 'password': '***'}"),
    ('{"Password": "S3\\"cret", "a": 1}', '{"Password": "***", "a": 1}'),
]

UNCHANGED = [
    "sqlite:///app.db",
    "postgresql://app@db:5432/app?sslmode=require",
    "postgresql://db:5432/app",
    "host=db user=passwordless dbname=password",
    "mypassword=1 and old_password=2",
]


@pytest.mark.clause("E-4")
@pytest.mark.parametrize(("text", "shown"), CASES)
def test_redact_url_hides_every_password(text: str, shown: str) -> None:
    assert redact_url(text) == shown
    assert "S3" not in shown


@pytest.mark.clause("E-4")
@pytest.mark.parametrize("text", UNCHANGED)
def test_redact_url_keeps_text_without_a_password(text: str) -> None:
    assert redact_url(text) == text


@pytest.mark.clause("E-4")
def test_open_errors_from_an_engine_never_show_the_password() -> None:
    with pytest.raises(InvalidArgument) as info:
        alkstore.open("sqlite:///x.db?password=S3cret")
    assert "S3cret" not in str(info.value)
    assert "password=***" in str(info.value)
    with pytest.raises(InvalidArgument) as info:
        alkstore.open("nosuchengine://app:S3cret@host/db")
    assert "S3cret" not in str(info.value)
