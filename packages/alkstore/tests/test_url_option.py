"""``without_url_option``: the read-only commands set ``migrate`` themselves,
so a URL's own ``?migrate=`` is taken off first (engines may refuse an option
given both ways, EN-3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import alkstore
from alkstore._open import without_url_option
from alkstore.cli import main


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///app.db", "sqlite:///app.db"),
        ("sqlite:///app.db?migrate=false", "sqlite:///app.db"),
        (
            "postgresql://h/db?schema=x&migrate=false&max_size=3",
            "postgresql://h/db?schema=x&max_size=3",
        ),
        (
            "postgresql://h/db?schema=a%26b&host=%2Ftmp",
            "postgresql://h/db?schema=a%26b&host=%2Ftmp",
        ),
        ("postgresql://h/db?migrate=1#frag", "postgresql://h/db#frag"),
        ("postgresql://h/db?migrated=1", "postgresql://h/db?migrated=1"),
    ],
)
def test_without_url_option_drops_only_that_option(url: str, expected: str) -> None:
    assert without_url_option(url, "migrate") == expected


def test_read_only_command_accepts_a_url_that_says_migrate_false(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    alkstore.open(url).close()
    assert main(["--url", f"{url}?migrate=false", "queues"]) == 0
    assert main(["--url", f"{url}?migrate=true", "queues", "--json"]) == 0
    assert capsys.readouterr().out.strip().endswith("[]")
