"""CF-1 in one place: an operation an engine does not declare is refused
with ``UnsupportedOperation`` before anything is written."""

from __future__ import annotations

from collections.abc import Container

from alkstore.errors import UnsupportedOperation
from alkstore.protocols import Capability

__all__ = ["require"]

# What an engine without the capability cannot do, as the error says it.
_CANNOT = {
    Capability.PROGRESS: "stores no progress",
    Capability.PAUSE: "cannot pause queues",
    Capability.RUN_NOW: "cannot run a job now",
    Capability.WORKERS: "keeps no workers' registry",
    Capability.RESULTS: "does not keep results",
    Capability.WORKFLOWS: "cannot make jobs wait for others",
    Capability.REPLACE_DEBOUNCE: "cannot replace or debounce a unique job",
}


def require(capabilities: Container[Capability], capability: Capability) -> None:
    """Refuse (CF-1) unless *capability* is among the engine's *capabilities*."""
    if capability not in capabilities:
        cannot = _CANNOT.get(capability, f"does not support {capability.value!r}")
        raise UnsupportedOperation(f"this engine {cannot} (capability '{capability.value}')")
