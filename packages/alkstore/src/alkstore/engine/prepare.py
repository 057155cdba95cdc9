"""Argument checks and input preparation, the same for every engine.

Everything a contract call validates before any I/O lives here, so a value
refused by one engine is refused by every engine with the same error (C-1,
C-3, C-4, E-3), and so the sync and async faces check alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import timezone
from typing import Any

from alkstore.errors import InvalidArgument
from alkstore.names import check_worker_id, default_owner, encode_payload, validate_name
from alkstore.specs import ScheduleSpec, check_timezone, parse
from alkstore.types import EnqueueOpts, QueueOpts, check_duration, check_int

from .codec import let_the_loop_run
from .rows import NewJob, RateSpec

__all__ = [
    "MAX_CLAIM_BATCH",
    "MAX_ID",
    "MAX_OFFSET",
    "check_bool_option",
    "check_channels",
    "check_conflict",
    "check_error",
    "check_ids",
    "check_job_id",
    "check_limit",
    "check_lock_args",
    "check_offset",
    "check_progress",
    "check_queue_opts",
    "check_rate_args",
    "check_results",
    "check_schedule_args",
    "check_sql_args",
    "check_unique_key",
    "check_url_text",
    "check_wait",
    "check_worker_id",
    "clean_text",
    "decode_enqueue_opts",
    "default_owner",
    "encode_enqueue_opts",
    "parse_bool_option",
    "parse_option",
    "prepare_job",
    "with_conflict",
]

#: Most jobs one claim hands out.
MAX_CLAIM_BATCH = 10_000
#: Job ids and stream offsets are signed 64-bit integers on every engine.
MAX_ID = 2**63 - 1
MAX_OFFSET = MAX_ID
#: Longest stored error text, in characters; longer texts are cut.
MAX_ERROR_CHARS = 10_000
#: Largest progress checkpoint, encoded (Q-28).
MAX_PROGRESS_BYTES = 64 * 1024

_DEFAULT_ENQUEUE = EnqueueOpts()
_DEFAULT_QUEUE = QueueOpts()


def check_queue_opts(opts: object) -> QueueOpts:
    """``None`` means the defaults; anything but ``QueueOpts`` is refused."""
    if opts is None:
        return _DEFAULT_QUEUE
    if not isinstance(opts, QueueOpts):
        raise InvalidArgument(f"opts must be QueueOpts, not {type(opts).__name__}")
    return opts


def prepare_job(
    queue_opts: QueueOpts,
    payload: Any,
    opts: EnqueueOpts | None,
    *,
    unique_key: str | None = None,
    trace_context: str | None = None,
) -> NewJob:
    """Validate and resolve one enqueue (Q-1, C-3, Q-23, Q-25); raises before
    any write."""
    if opts is None:
        opts = _DEFAULT_ENQUEUE
    elif not isinstance(opts, EnqueueOpts):
        raise InvalidArgument(f"opts must be EnqueueOpts, not {type(opts).__name__}")
    if unique_key is not None and opts.after:
        # A waiting job holds no key (WF-1), so its release could find the
        # key taken and have nowhere to go.
        raise InvalidArgument("a unique job cannot wait for others (after=)")
    run_at = opts.run_at
    return NewJob(
        payload=encode_payload(payload),
        priority=opts.priority,
        delay_s=opts.delay_s or 0.0,
        run_at=run_at.astimezone(timezone.utc) if run_at is not None else None,
        max_attempts=opts.max_attempts
        if opts.max_attempts is not None
        else queue_opts.max_attempts,
        visibility_timeout_s=queue_opts.visibility_timeout_s,
        backoff_base_s=queue_opts.backoff_base_s,
        dead_letter_retention_s=queue_opts.dead_letter_retention_s,
        expires_s=opts.expires_s,
        unique_key=unique_key,
        group=opts.group,
        group_limit=queue_opts.group_limit if opts.group is not None else None,
        trace_context=trace_context,
        result_ttl_s=opts.result_ttl_s
        if opts.result_ttl_s is not None
        else queue_opts.result_ttl_s,
        after=tuple(opts.after),
    )


def check_results(ttls: Sequence[float | None], results: Sequence[Any]) -> list[str | None]:
    """The results of acks (RS-1), one per job whose RS-1 stamp is in
    *ttls*: each encoded by C-3's rules (``None`` stays ``None``, stored as a
    JSON ``null``); a result that is not ``None`` for a job without the stamp
    is refused. Raises before any write, so nothing is acked."""
    out: list[str | None] = []
    for ttl, value in zip(ttls, results, strict=True):
        if value is None:
            out.append(None)
            continue
        if ttl is None:
            raise InvalidArgument(
                "this job keeps no result: give it result_ttl_s (QueueOpts or EnqueueOpts) "
                "to keep one"
            )
        text = encode_payload(value)
        let_the_loop_run(text)
        out.append(text)
    return out


def check_progress(value: Any) -> str | None:
    """A progress checkpoint (Q-28) encoded by C-3's rules, at most
    :data:`MAX_PROGRESS_BYTES`; ``None`` (clearing the checkpoint) stays
    ``None``. Raises ``InvalidArgument`` before any write."""
    if value is None:
        return None
    return encode_payload(value, limit=MAX_PROGRESS_BYTES, what="progress")


def check_unique_key(key: object) -> str:
    """A unique key follows the name rules (Q-23, C-1)."""
    return validate_name(key, "unique key", allow_reserved=True)


#: What ``enqueue_unique(on_conflict=...)`` takes (Q-23, Q-29).
ON_CONFLICT = ("skip", "replace")


def check_conflict(
    on_conflict: object, debounce_s: object, max_wait_s: object, opts: object
) -> tuple[bool, float | None, float | None]:
    """Q-29: ``(replace, debounce_s, max_wait_s)`` from the arguments of
    ``enqueue_unique``, checked before any write. ``max_wait_s`` needs
    ``debounce_s`` and is at least it; a debounced enqueue's time is its
    debounce, so its opts cannot set ``run_at`` or ``delay_s``."""
    if not isinstance(on_conflict, str) or on_conflict not in ON_CONFLICT:
        raise InvalidArgument(f"on_conflict must be 'skip' or 'replace', not {on_conflict!r}")
    debounce = check_duration("debounce_s", debounce_s, allow_none=True)
    wait = check_duration("max_wait_s", max_wait_s, allow_none=True)
    if wait is not None:
        if debounce is None:
            raise InvalidArgument("max_wait_s needs debounce_s: it caps a debounce")
        if wait < debounce:
            raise InvalidArgument(
                f"max_wait_s must be at least debounce_s ({debounce!r}), got {max_wait_s!r}"
            )
    timed = isinstance(opts, EnqueueOpts) and (opts.run_at is not None or opts.delay_s is not None)
    if debounce is not None and timed:
        raise InvalidArgument(
            "debounce_s decides when the job runs: opts cannot also set run_at or delay_s"
        )
    return on_conflict == "replace", debounce, wait


def with_conflict(
    jobs: list[NewJob], replace: bool, debounce_s: float | None, max_wait_s: float | None
) -> list[NewJob]:
    """*jobs* carrying Q-29's choices; a debounced job is inserted
    ``debounce_s`` from now (``delay_s``)."""
    if not replace and debounce_s is None:
        return jobs
    return [
        j._replace(
            replace=replace,
            debounce_s=debounce_s,
            max_wait_s=max_wait_s,
            delay_s=j.delay_s if debounce_s is None else debounce_s,
        )
        for j in jobs
    ]


def encode_enqueue_opts(opts: EnqueueOpts | None) -> str | None:
    """``EnqueueOpts`` as stored with a schedule (no ``run_at``: a recurring job
    has no single start time)."""
    if opts is None:
        return None
    if not isinstance(opts, EnqueueOpts):
        raise InvalidArgument(f"opts must be EnqueueOpts, not {type(opts).__name__}")
    if opts.run_at is not None:
        raise InvalidArgument("a schedule's opts cannot set run_at; use delay_s")
    if opts.after:
        raise InvalidArgument("a schedule's opts cannot set after: each fire is a new job")
    data: dict[str, Any] = {
        "priority": opts.priority,
        "delay_s": opts.delay_s,
        "max_attempts": opts.max_attempts,
        "expires_s": opts.expires_s,
    }
    if opts.group is not None:
        data["group"] = opts.group
    if opts.result_ttl_s is not None:
        data["result_ttl_s"] = opts.result_ttl_s
    return json.dumps(data)


def decode_enqueue_opts(text: str | None) -> EnqueueOpts | None:
    """The inverse of :func:`encode_enqueue_opts`; ``None`` for text this
    version cannot read (a schedule written around the contract)."""
    if text is None:
        return None
    try:
        return EnqueueOpts(**json.loads(text))
    except (ValueError, TypeError, RecursionError):
        return None


def check_wait(wait_s: object, name: str = "wait_s") -> float:
    """Validate a ``wait_s`` / ``timeout_s`` argument."""
    value = check_duration(name, wait_s)
    assert value is not None
    return value


def check_limit(limit: object, hi: int = 10_000) -> int:
    """A page size for listings."""
    return check_int("limit", limit, 1, hi)


def check_offset(name: str, value: object) -> int:
    """A stream offset argument: an int in ``[0, MAX_OFFSET]``."""
    return check_int(name, value, 0, MAX_OFFSET)


def check_job_id(job_id: object) -> int:
    """A job id: any signed 64-bit int (an id that never existed finds nothing)."""
    return check_int("job_id", job_id, -MAX_ID - 1, MAX_ID)


def check_ids(job_ids: object) -> list[int] | None:
    """``None`` (every job) or a sequence of job ids, duplicates once, in
    ascending order (Q-21, Q-22)."""
    if job_ids is None:
        return None
    if isinstance(job_ids, (str, bytes)) or not isinstance(job_ids, (Sequence, set, frozenset)):
        raise InvalidArgument("job_ids must be a sequence of ints, or None for every job")
    return sorted({check_job_id(i) for i in job_ids})


def clean_text(text: str) -> str:
    """*text* as every database can store it: NUL and lone surrogates
    replaced, at most :data:`MAX_ERROR_CHARS` characters (an exception
    message may hold anything; a retry must not fail because of its error)."""
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def check_error(error: object) -> str:
    """The error text of ``retry``/``fail``: a ``str``, cleaned for storage."""
    if not isinstance(error, str):
        raise InvalidArgument(f"error must be a str, not {type(error).__name__}")
    return clean_text(error)


def check_lock_args(name: object, ttl_s: object, owner: object) -> tuple[str, float, str]:
    """Validate ``store.lock`` arguments; a missing owner gets a unique one."""
    lock_name = validate_name(name, "lock")
    ttl = check_duration("ttl_s", ttl_s, allow_zero=False)
    assert ttl is not None
    lock_owner = (
        default_owner() if owner is None else validate_name(owner, "owner", allow_reserved=True)
    )
    return lock_name, ttl, lock_owner


def check_channels(channels: tuple[object, ...]) -> frozenset[str]:
    """``listen`` needs at least one valid channel name (C-1, C-2)."""
    if not channels:
        raise InvalidArgument("listen() needs at least one channel")
    return frozenset(validate_name(c, "channel") for c in channels)


def check_schedule_args(
    name: object, spec: object, queue: object, tz: object
) -> tuple[str, ScheduleSpec, str, str]:
    """Validate ``store.schedule`` arguments (C-1, C-2, SC-1)."""
    sched_name = validate_name(name, "schedule")
    parsed = parse(spec)
    queue_name = validate_name(queue, "queue")
    check_timezone(tz)
    assert isinstance(tz, str)
    return sched_name, parsed, queue_name, tz


#: Largest accepted ``burst`` of a rate limit.
MAX_BURST = 1_000_000


def check_rate_args(name: object, rate: object, per_s: object, burst: object) -> RateSpec:
    """Validate ``store.rate_limit`` arguments (R-1): *rate* units per
    *per_s* seconds, so one unit every ``per_s / rate`` seconds."""
    limit_name = validate_name(name, "rate limit")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise InvalidArgument(f"rate must be a number, not {type(rate).__name__}")
    if not math.isfinite(rate) or rate <= 0:
        raise InvalidArgument(f"rate must be a finite number > 0, got {rate!r}")
    period = check_duration("per_s", per_s, allow_zero=False)
    assert period is not None
    interval = period / float(rate)
    if not interval >= 1e-6:
        raise InvalidArgument("rate limits finer than one unit per microsecond are not supported")
    count = check_int("burst", burst, 1, MAX_BURST)
    return RateSpec(limit_name, interval, count)


# ------------------------------------------------------------ engine options

_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def parse_bool_option(name: str, text: str) -> bool:
    """A boolean engine option *name* as a URL's query string spells it:
    ``true``, ``false``, ``1`` or ``0``, in any case (EN-3).

    >>> parse_bool_option("migrate", "False")
    False
    """
    value = _BOOL_TEXT.get(text.lower())
    if value is None:
        raise InvalidArgument(f"{name} must be true, false, 1 or 0, not {text!r}")
    return value


def parse_option(name: str, text: str, kind: Callable[[str], Any]) -> Any:
    """An engine option *name* as a URL's query string spells it, turned into
    its *kind* (``bool`` by :func:`parse_bool_option`). A text *kind* refuses,
    or a float that is not finite, is an :class:`InvalidArgument` (EN-3).

    >>> parse_option("poll_s", "0.5", float)
    0.5
    """
    if kind is bool:
        return parse_bool_option(name, text)
    try:
        value = kind(text)
    except ValueError as exc:  # int() of 5,000 digits included
        raise InvalidArgument(f"bad value for engine option {name}: {text!r}") from exc
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"bad value for engine option {name}: {text!r}")
    return value


def check_url_text(text: str, what: str) -> None:
    """Refuse *text*, a store URL or a part of one, that no driver can take:
    one that holds a NUL character or is not valid text (a lone surrogate).
    *what* names it in the error (EN-3)."""
    if "\x00" in text:
        raise InvalidArgument(f"{what} cannot hold a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{what} must be valid text") from exc


def check_bool_option(name: str, value: object) -> bool:
    """A boolean engine option given as a keyword: ``True`` or ``False`` only
    (a truthy string or number is refused, not guessed at)."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True or False, not {value!r}")
    return value


# -------------------------------------------------------------- transactions


def check_sql_args(sql: object, params: object) -> None:
    """The arguments of ``tx.execute`` (T-2): the SQL a ``str``, the
    parameters a sequence (positional) or a dict (named), never a string."""
    if not isinstance(sql, str):
        raise InvalidArgument(f"sql must be a str, not {type(sql).__name__}")
    if not isinstance(params, (Sequence, dict)) or isinstance(params, (str, bytes)):
        raise InvalidArgument("params must be a sequence or a dict")
