"""The kit's leader/follower primitive (engine/groupcommit.py), on its own:
what both engines' group commits rely on."""

from __future__ import annotations

import threading
from collections.abc import Callable

from alkstore.engine.groupcommit import DONE, LEAD, WAITING, Turn, Turns


class _Req(Turn):
    __slots__ = ("alone", "size")

    def __init__(self, size: int = 1, alone: bool = False) -> None:
        super().__init__()
        self.size = size
        self.alone = alone


def _given(req: _Req) -> Callable[[], _Req]:
    return lambda: req


def _busy(turns: Turns[_Req]) -> bool:
    return turns.busy


def test_the_first_caller_leads_and_the_next_ones_queue_with_an_event() -> None:
    turns: Turns[_Req] = Turns()
    first, second, third = _Req(), _Req(), _Req()
    assert turns.enter(lambda: first) is None
    assert first.event is None, "a caller that leads at once makes no event"
    assert turns.enter(lambda: second) is second
    assert turns.enter(lambda: third) is third
    assert list(turns.waiting) == [second, third]
    assert isinstance(second.event, threading.Event)


def test_a_caller_that_leads_makes_no_turn_at_all() -> None:
    turns: Turns[_Req] = Turns()
    made: list[_Req] = []

    def make() -> _Req:
        made.append(_Req())
        return made[-1]

    assert turns.enter(make) is None
    assert made == [], "the lead is taken without building a request"
    queued = turns.enter(make)
    assert made == [queued]


def test_take_stops_at_the_limit_of_weight_and_at_a_turn_that_runs_alone() -> None:
    turns: Turns[_Req] = Turns()
    lead = _Req(size=400)
    turns.enter(lambda: lead)
    queued = [_Req(size=300), _Req(size=300), _Req(size=300), _Req()]
    for req in queued:
        turns.enter(_given(req))
    group = turns.take(lead, 1_000, lambda r: r.size)
    assert group == [lead, queued[0], queued[1]], "400 + 300 + 300 fits 1,000; one more does not"
    alone = _Req(alone=True)
    turns.enter(lambda: alone)
    assert turns.waiting.popleft() is queued[2]  # the next group's first, as a leader takes it
    group = turns.take(queued[2], 1_000, lambda r: r.size, stop=lambda r: r.alone)
    assert group == [queued[2], queued[3]], "stops before the turn that must run alone"
    assert list(turns.waiting) == [alone]


def test_the_first_turn_always_goes_even_over_the_limit() -> None:
    turns: Turns[_Req] = Turns()
    big = _Req(size=5_000)
    turns.enter(lambda: big)
    small = _Req()
    turns.enter(lambda: small)
    assert turns.take(big, 1_000, lambda r: r.size) == [big]
    assert list(turns.waiting) == [small]


def test_hand_over_gives_the_lead_to_the_first_waiter_or_frees_the_queue() -> None:
    turns: Turns[_Req] = Turns()
    lead, nxt = _Req(), _Req()
    turns.enter(lambda: lead)
    turns.enter(lambda: nxt)
    assert turns.hand_over() is True
    assert nxt.state == LEAD and turns.wait(nxt) is True
    assert _busy(turns)
    assert turns.hand_over() is False
    assert not _busy(turns)
    assert turns.enter(_Req) is None, "free again: the next caller leads at once"


def test_hand_over_without_lead_keeps_the_queue_busy_for_a_draining_task() -> None:
    turns: Turns[_Req] = Turns()
    turns.enter(_Req)
    queued = _Req()
    turns.enter(lambda: queued)
    assert turns.hand_over(lead=False) is True
    assert queued.state == WAITING and _busy(turns)
    turns.waiting.popleft()
    turns.free()
    assert not _busy(turns)


def test_finish_wakes_followers_with_done_and_wait_says_they_were_served() -> None:
    turns: Turns[_Req] = Turns()
    lead = _Req()
    turns.enter(lambda: lead)
    followers = [_Req() for _ in range(3)]
    for req in followers:
        turns.enter(_given(req))
    seen: list[bool | None] = []
    threads = [threading.Thread(target=lambda r=r: seen.append(turns.wait(r))) for r in followers]
    for t in threads:
        t.start()
    group = turns.take(lead, 10)
    Turns.finish(group[1:])
    for t in threads:
        t.join(10)
    assert seen == [False, False, False]
    assert all(r.state == DONE for r in followers)


def test_a_wait_that_times_out_leaves_the_queue_unserved() -> None:
    turns: Turns[_Req] = Turns()
    turns.enter(_Req)
    late = _Req()
    turns.enter(lambda: late)
    assert turns.wait(late, timeout_s=0.01) is None
    assert late not in turns.waiting
    assert turns.withdraw(late) is False, "already gone"


def test_a_taken_turn_cannot_be_withdrawn() -> None:
    turns: Turns[_Req] = Turns()
    lead, taken = _Req(), _Req()
    turns.enter(lambda: lead)
    turns.enter(lambda: taken)
    turns.take(lead, 10)
    assert turns.withdraw(taken) is False, "its write runs with the group"
