"""Clause coverage: every rule id of the contract is named by a test (CF-2).

The rules come from ``CONTRACT.md``, the contract's text shipped in this
package. Each rule says where it is tested: ``suite`` rules by this suite
(checked here, against the class that runs it); ``sqlite engine`` and
``postgres engine`` rules by that engine's own tests, and ``repository``
rules by the alkstore repository's tests (both checked by the repository).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import pytest

from ._base import ContractBase

__all__ = [
    "PENDING_RULES",
    "WHERE",
    "CoverageContract",
    "Rule",
    "clauses_of",
    "contract_rules",
    "rule_ids",
    "suite_rule_ids",
]

#: Where a rule is tested, as CONTRACT.md tags it.
WHERE = ("suite", "sqlite engine", "postgres engine", "repository")

#: TEMPORARY. Rules of this contract version whose tests do not exist yet;
#: the coverage checks skip them. Each feature removes its ids from this set
#: in the change that adds their tests (the checks fail while a tested rule
#: is still listed here), and the set must be empty before a release.
PENDING_RULES: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rule:
    """One rule of CONTRACT.md."""

    id: str
    title: str
    where: str


_RULE_LINE = re.compile(
    r"^- \*\*(?P<id>[A-Z]{1,2}-\d+) (?P<title>[^*]+)\*\* `\[(?P<where>[a-z ]+)\]`"
)


@cache
def contract_rules() -> dict[str, Rule]:
    """Every rule of the packaged CONTRACT.md, in the order it states them."""
    text = files("alkstore_conformance").joinpath("CONTRACT.md").read_text("utf-8")
    rules: dict[str, Rule] = {}
    for line in text.splitlines():
        match = _RULE_LINE.match(line)
        if match is None:
            continue
        rule = Rule(match["id"], match["title"].strip(), match["where"])
        if rule.where not in WHERE:
            raise ValueError(f"CONTRACT.md: {rule.id} is tagged {rule.where!r}, not one of {WHERE}")
        if rule.id in rules:
            raise ValueError(f"CONTRACT.md states {rule.id} twice")
        rules[rule.id] = rule
    return rules


def rule_ids() -> dict[str, str]:
    """The contract's rule ids and titles, from the copy shipped in the package."""
    return {rule.id: rule.title for rule in contract_rules().values()}


def suite_rule_ids() -> frozenset[str]:
    """The ids this suite must name: ``suite`` rules not pending."""
    return frozenset(
        r.id for r in contract_rules().values() if r.where == "suite" and r.id not in PENDING_RULES
    )


def clauses_of(cls: type) -> dict[str, list[str]]:
    """Rule id -> names of the tests of *cls* that name it."""
    named: dict[str, list[str]] = {}
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if not name.startswith("test_"):
            continue
        for mark in getattr(member, "pytestmark", []):
            if mark.name == "clause":
                for rule in mark.args:
                    named.setdefault(rule, []).append(name)
    return named


class CoverageContract(ContractBase):
    """CF-2: no rule without a test in the class that runs the suite."""

    @pytest.mark.clause("CF-2")
    def test_every_rule_is_named_by_a_test(self) -> None:
        rules = contract_rules()
        assert len(rules) >= 90, "the packaged CONTRACT.md is incomplete"
        named = clauses_of(type(self))
        missing = sorted(suite_rule_ids() - set(named), key=_rule_order)
        assert missing == [], f"rules without a conformance test: {missing}"

    @pytest.mark.clause("CF-2")
    def test_tests_name_only_known_rules(self) -> None:
        unknown = sorted(set(clauses_of(type(self))) - set(rule_ids()), key=_rule_order)
        assert unknown == [], f"tests name rules that the contract does not have: {unknown}"

    @pytest.mark.clause("CF-2")
    def test_pending_rules_are_rules_without_a_test(self) -> None:
        assert set(rule_ids()) >= PENDING_RULES, "PENDING_RULES names unknown rules"
        suite = {r.id for r in contract_rules().values() if r.where == "suite"}
        landed = sorted(PENDING_RULES & suite & set(clauses_of(type(self))), key=_rule_order)
        assert landed == [], f"these rules have tests now; remove them from PENDING_RULES: {landed}"


def _rule_order(rule: str) -> tuple[str, int]:
    prefix, _, number = rule.partition("-")
    return prefix, int(number)
