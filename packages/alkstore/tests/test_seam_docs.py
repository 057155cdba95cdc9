"""The seam is documented where an engine author reads it (issue 19): every
operation of both executor protocols, and every member they share, has a
docstring, written once in the async source."""

from __future__ import annotations

import pytest

from alkstore.engine.seam import Executor
from alkstore.engine.seam_async import AsyncExecutor
from alkstore.engine.seam_base import ExecutorBase


@pytest.mark.parametrize("protocol", [Executor, AsyncExecutor, ExecutorBase])
def test_every_executor_member_has_a_docstring(protocol: type) -> None:
    members = {
        name: value
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }
    assert members
    undocumented = sorted(n for n, v in members.items() if not (v.__doc__ or "").strip())
    assert undocumented == []


def test_both_faces_have_the_same_operations() -> None:
    def ops(protocol: type) -> set[str]:
        return {n for n in vars(protocol) if not n.startswith("_")}

    assert ops(Executor) == ops(AsyncExecutor)
    assert len(ops(Executor)) >= 40
