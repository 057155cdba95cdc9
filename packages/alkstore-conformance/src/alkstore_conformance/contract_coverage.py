"""Clause coverage: every rule id of the contract is named by a test (CF-2)."""

from __future__ import annotations

import inspect
from importlib.resources import files

import pytest

from ._base import ContractBase

__all__ = ["CoverageContract", "clauses_of", "rule_ids"]


def rule_ids() -> dict[str, str]:
    """The contract's rule ids and titles, from the copy shipped in the package."""
    rules: dict[str, str] = {}
    for line in files("alkstore_conformance").joinpath("rules.txt").read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            rule, _, title = line.partition("\t")
            rules[rule.strip()] = title.strip()
    return rules


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
        rules = rule_ids()
        assert len(rules) >= 60, "the packaged rule list is incomplete"
        named = clauses_of(type(self))
        missing = sorted(set(rules) - set(named), key=_rule_order)
        assert missing == [], f"rules without a conformance test: {missing}"

    @pytest.mark.clause("CF-2")
    def test_tests_name_only_known_rules(self) -> None:
        unknown = sorted(set(clauses_of(type(self))) - set(rule_ids()))
        assert unknown == [], f"tests name rules that the contract does not have: {unknown}"


def _rule_order(rule: str) -> tuple[str, int]:
    prefix, _, number = rule.partition("-")
    return prefix, int(number)
