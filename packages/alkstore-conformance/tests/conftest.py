from __future__ import annotations

pytest_plugins = ["pytester"]

# The example third-party engine is a project of its own: its tests run only
# once it is installed (test_thirdparty_engine.py), never in this session.
collect_ignore = ["thirdparty"]
