"""Resolve the engine extras of `alkstore` (`[sqlite]`, `[postgres]`).

In a checkout of the monorepo the engines are sibling directories and are not
on any index yet, so the extras point at them by file URL. Anywhere else (an
sdist unpacked on its own), or when ALKSTORE_RELEASE=1 is set for a release
build, the extras pin the engine release that ships with this version.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

ENGINES = {"sqlite": "alkstore-sqlite", "postgres": "alkstore-postgres"}


class EngineExtrasHook(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        version = metadata["version"]
        release = os.environ.get("ALKSTORE_RELEASE") == "1"
        extras: dict[str, list[str]] = {}
        for extra, dist in ENGINES.items():
            sibling = Path(self.root).parent / dist
            if not release and (sibling / "pyproject.toml").is_file():
                extras[extra] = [f"{dist} @ {sibling.resolve().as_uri()}"]
            else:
                extras[extra] = [f"{dist}=={version}"]
        metadata["optional-dependencies"] = extras
