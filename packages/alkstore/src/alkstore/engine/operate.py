"""Operating live work (SPEC §21 Q-27, O-6): what both faces of a queue
handle share for pause, resume and run-now. See docs/adr/0023."""

from __future__ import annotations

from alkstore.errors import UnsupportedOperation
from alkstore.protocols import Capability

__all__ = ["check_pause_capability", "check_run_now_capability"]


def check_pause_capability(capabilities: frozenset[Capability]) -> None:
    """CF-1: an engine that does not declare ``pause`` cannot pause a queue."""
    if Capability.PAUSE not in capabilities:
        raise UnsupportedOperation("this engine cannot pause queues (capability 'pause')")


def check_run_now_capability(capabilities: frozenset[Capability]) -> None:
    """CF-1: an engine that does not declare ``run_now`` cannot move a job's time."""
    if Capability.RUN_NOW not in capabilities:
        raise UnsupportedOperation("this engine cannot run a job now (capability 'run_now')")
