"""Fixtures of the repository's own tests (release, rule coverage)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def dev() -> ModuleType:
    """``scripts/dev.py`` as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "alkstore_dev_script", ROOT / "scripts" / "dev.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
