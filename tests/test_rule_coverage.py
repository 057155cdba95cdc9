"""CF-2, the repository's half: the rules the published suite does not test.

The suite checks its own ``[suite]`` rules (``CoverageContract``). Here: every
``[sqlite engine]`` / ``[postgres engine]`` rule of CONTRACT.md is named by a
test of that engine, and every ``[repository]`` rule by a test of this
repository, unless it is still in ``PENDING_RULES``; and a pending rule that
has its test now must leave that set.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from alkstore_conformance.contract_coverage import PENDING_RULES, contract_rules

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "packages" / "alkstore-conformance" / "src"
WHERE_TESTED = {
    "sqlite engine": [ROOT / "packages" / "alkstore-sqlite" / "tests"],
    "postgres engine": [ROOT / "packages" / "alkstore-postgres" / "tests"],
    "repository": [
        ROOT / "tests",
        ROOT / "contract_tests",
        *(p / "tests" for p in (ROOT / "packages").iterdir()),
    ],
}


def _python_files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.rglob("*.py")):
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts):
            yield path


def clauses_named_in(directories: list[Path]) -> set[str]:
    """Every rule id a ``clause(...)`` mark names in these directories."""
    named: set[str] = set()
    for directory in directories:
        for path in _python_files(directory):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "clause"
                ):
                    named |= {
                        a.value
                        for a in node.args
                        if isinstance(a, ast.Constant) and isinstance(a.value, str)
                    }
    return named


@pytest.mark.clause("CF-2")
@pytest.mark.parametrize("where", sorted(WHERE_TESTED))
def test_rules_outside_the_suite_are_named_where_they_are_tested(where: str) -> None:
    rules = {r.id for r in contract_rules().values() if r.where == where}
    named = clauses_named_in(WHERE_TESTED[where])
    missing = sorted(rules - PENDING_RULES - named)
    assert missing == [], f"[{where}] rules without a test: {missing}"
    landed = sorted(rules & PENDING_RULES & named)
    assert landed == [], f"these rules have tests now; remove them from PENDING_RULES: {landed}"


@pytest.mark.clause("CF-2")
def test_every_named_rule_is_a_rule_of_the_contract() -> None:
    dirs = [SUITE, *WHERE_TESTED["repository"]]
    unknown = sorted(clauses_named_in(dirs) - set(contract_rules()))
    assert unknown == [], f"tests name rules the contract does not have: {unknown}"


@pytest.mark.clause("P-4")
def test_the_contract_ships_in_the_suite_and_the_guide_points_to_it() -> None:
    rules = contract_rules()
    assert len(rules) >= 90
    assert {"P-1", "P-2", "P-3", "P-4", "E-4"} <= set(rules)
    assert not {"P-1", "P-2", "P-3", "P-4", "E-4"} & PENDING_RULES
    guide = (ROOT / "docs" / "implementing-an-engine.md").read_text()
    assert "alkstore_conformance/CONTRACT.md" in guide
    assert "SPEC.md" not in guide
