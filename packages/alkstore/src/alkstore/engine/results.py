"""Kept results (SPEC §20, RS-1..RS-3): what both faces share.

A job stamped with ``result_ttl_s`` keeps its result when it is acked: the
engine writes it, in the ack's own transaction, to storage of its own (never
the claim's tables or indexes), and reads it back as a ``done`` job until
``finished_at + result_ttl_s``. The design is in docs/adr/0018.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alkstore.errors import InvalidArgument

from .jobs_base import JobData
from .prepare import check_results, check_wait

__all__ = [
    "RESULT_FALLBACK_S",
    "RESULT_WAKE_PREFIX",
    "ack_results",
    "check_result_wait",
    "result_wake_key",
]

#: Wake keys of finished jobs: ``"result:<queue>"``, bumped by the commit of
#: an ack that kept a result (and, where the engine can tell, of a move to
#: dead), so that ``q.result(id, wait_s=...)`` wakes like a blocked claim.
RESULT_WAKE_PREFIX = "result:"


#: Longest sleep of a blocked ``q.result`` between looks without a wake: a
#: job moved to dead by a path whose commit sends no result wake (a sweep, a
#: claim clearing exhausted claims) is still seen this soon.
RESULT_FALLBACK_S = 1.0


def result_wake_key(queue: str) -> str:
    """The wake key waiters for results of *queue* block on (RS-2)."""
    return RESULT_WAKE_PREFIX + queue


def ack_results(
    handles: Sequence[JobData], results: Sequence[Any] | None
) -> list[str | None] | None:
    """What an ack passes the engine for *handles* (RS-1): ``None`` when no
    handle is stamped and no result was given (the plain ack), else one
    encoded result (or ``None``: a JSON ``null``) per handle. Raises
    ``InvalidArgument`` before any I/O for a result of a job without the
    stamp, a result that does not encode (C-3), or a count that does not
    match."""
    if results is None:
        for handle in handles:  # a loop, not all(...): this runs on every ack
            if handle.result_ttl_s is not None:
                return [None] * len(handles)
        return None
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise InvalidArgument("results must be a sequence with one result per job")
    if len(results) != len(handles):
        raise InvalidArgument(
            f"results must hold one result per job: {len(results)} for {len(handles)} jobs"
        )
    encoded = check_results([h.result_ttl_s for h in handles], results)
    if all(h.result_ttl_s is None for h in handles):
        return None
    return encoded


def check_result_wait(wait_s: object, tx: object | None) -> float:
    """``q.result``'s ``wait_s``: seconds >= 0; waiting inside the caller's
    transaction is refused (it would hold the transaction open, and a
    snapshot taken in it may never see the finishing commit)."""
    wait = check_wait(wait_s)
    if wait and tx is not None:
        raise InvalidArgument("wait_s cannot be used with tx: waiting would hold the transaction")
    return wait
