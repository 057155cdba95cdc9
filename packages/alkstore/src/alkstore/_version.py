"""The version of the alkstore distribution (kept equal to pyproject.toml's
by the release build's checks, scripts/dev.py dist)."""

__version__ = "0.1.0"
