"""Fixtures of the observability tests (SPEC §17): a fresh store on each
engine, the OpenTelemetry SDK's in-memory reader and exporter, and helpers
to run the ``alkstore`` command as a real process.

Nothing here sets the global OpenTelemetry providers: tests hand their own
providers in, and the few that need the global ones run in a child process.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alkstore import Store


@pytest.fixture
def url(engine_url: str) -> str:
    """These tests run on each engine: the ``store`` fixture of the tests'
    own conftest opens ``engine_url``."""
    return engine_url


def state_counts(store: Store) -> dict[str, dict[str, int]]:
    """Each queue's waiting, pending, scheduled, processing and dead counts."""
    return {
        s.queue: {
            "waiting": s.waiting,
            "pending": s.pending,
            "scheduled": s.scheduled,
            "processing": s.processing,
            "dead": s.dead,
        }
        for s in store.queue_stats()
    }


def eventually(probe: Callable[[], Any], timeout_s: float = 20.0, what: str = "") -> Any:
    """Poll *probe* until it returns something true; fail after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what or probe}")
        time.sleep(0.05)


def cli() -> list[str]:
    """The ``alkstore`` command of this environment."""
    script = Path(sys.executable).parent / "alkstore"
    return [str(script)] if script.exists() else [sys.executable, "-m", "alkstore"]


class Running:
    """A command running in the background; a thread collects its stderr
    lines as they come (``wait_for``)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout_s: float = 20.0) -> re.Match[str]:
        """The first match of *pattern* in a stderr line, waiting for it."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        while True:
            for line in list(self.lines):
                found = regex.search(line)
                if found:
                    return found
            if self.proc.poll() is not None:
                self._reader.join(5)
                if not any(regex.search(line) for line in self.lines):
                    pytest.fail(f"exited {self.proc.returncode} before {pattern!r}:\n{self.output}")
                continue
            if time.monotonic() > deadline:
                pytest.fail(f"no {pattern!r} within {timeout_s} s:\n{self.output}")
            time.sleep(0.02)

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM, then its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"did not stop within {timeout_s} s after SIGTERM:\n{self.output}")
        self.close()
        return code

    def close(self) -> None:
        self._reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def background(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    """Start ``alkstore ARGS...`` in the background (cwd: the test's
    directory); every one still running is stopped at the end."""
    started: list[Running] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Running:
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        full_env.pop("ALKSTORE_URL", None)
        proc = subprocess.Popen(
            [*cli(), *args],
            cwd=tmp_path,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        running = Running(proc)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.proc.poll() is None:
            running.proc.send_signal(signal.SIGTERM)
            try:
                running.proc.wait(20)
            except subprocess.TimeoutExpired:
                running.proc.kill()
                running.proc.wait()
        running.close()
