"""Notifications (N-1..N-3).

"Arrives" is checked with ``listener.get(ARRIVE_S)``, which returns as soon
as the notification is there; "never arrives" with ``listener.get(QUIET_S)``
after something later on the same channel did arrive (delivery is in commit
order per channel, so nothing earlier can still be on its way).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from typing import Any

import pytest

from alkstore import Capability, InvalidArgument, Listener, Notification, Store
from alkstore.names import MAX_NOTIFICATION_BYTES

from . import _children_misc
from ._base import JSON_PAYLOADS, ContractBase, eventually, reap, requires, signals, spawn, unique
from ._factory import StoreFactory
from ._queue_helpers import Background

#: Upper bound for a notification to arrive. Generous; passes return at once.
ARRIVE_S = 10.0
#: How long a listener is watched for something that must not arrive.
QUIET_S = 0.3


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _next(listener: Listener) -> Notification:
    note = listener.get(ARRIVE_S)
    assert note is not None, f"nothing arrived within {ARRIVE_S} s"
    assert isinstance(note, Notification)
    return note


def _quiet(listener: Listener) -> None:
    extra = listener.get(QUIET_S)
    assert extra is None, f"unexpected notification {extra!r}"


@requires(Capability.NOTIFICATIONS)
class NotificationContract(ContractBase):
    """Notifications (N-1..N-3)."""

    # ------------------------------------------------------------------- N-1

    @pytest.mark.clause("N-1", "N-2")
    def test_notify_reaches_every_listener_of_the_channel_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        channel = unique("ch")
        with store_factory.open() as second, store_factory.open() as sender:
            listeners = [store.listen(channel), second.listen(channel), second.listen(channel)]
            try:
                sender.notify(channel, {"hello": "world"})
                for listener in listeners:
                    assert _next(listener) == Notification(channel, {"hello": "world"})
                for listener in listeners:
                    _quiet(listener)
            finally:
                for listener in listeners:
                    listener.close()

    @pytest.mark.clause("N-1")
    def test_notify_is_delivered_in_commit_order_at_most_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Fifty notifications sent one after another from two stores arrive
        in the order they committed, each once."""
        channel = unique("ch")
        with store_factory.open() as second, store.listen(channel) as listener:
            senders = [store, second]
            for n in range(50):
                senders[n % 2].notify(channel, n)
            received = [_next(listener).payload for _ in range(50)]
            assert received == list(range(50))
            _quiet(listener)

    @pytest.mark.clause("N-1")
    def test_notify_twice_with_the_same_payload_delivers_twice(self, store: Store) -> None:
        """Each call is its own notification, also inside one transaction
        (PostgreSQL folds identical NOTIFYs of a transaction: an engine must
        keep them apart)."""
        channel = unique("ch")
        with store.listen(channel) as listener:
            store.notify(channel, "same")
            store.notify(channel, "same")
            with store.transaction() as tx:
                store.notify(channel, "same-in-tx", tx=tx)
                store.notify(channel, "same-in-tx", tx=tx)
            received = [_next(listener).payload for _ in range(4)]
            assert received == ["same", "same", "same-in-tx", "same-in-tx"]
            _quiet(listener)

    @pytest.mark.clause("N-1")
    def test_notify_before_listen_is_never_seen(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        channel = unique("ch")
        store.notify(channel, "before")
        with store_factory.open() as other:
            other.notify(channel, "before-elsewhere")
            with store.listen(channel) as listener, other.listen(channel) as other_listener:
                store.notify(channel, "after")
                assert _next(listener).payload == "after"
                assert _next(other_listener).payload == "after"
                _quiet(listener)
                _quiet(other_listener)

    @pytest.mark.clause("N-1", "T-1", "T-3")
    def test_notify_in_transaction_is_delivered_only_after_commit(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        channel = unique("ch")
        with store_factory.open() as other, other.listen(channel) as listener:
            with store.transaction() as tx:
                store.notify(channel, "first", tx=tx)
                store.notify(channel, {"second": 2}, tx=tx)
                assert listener.get(QUIET_S) is None
            assert _next(listener) == Notification(channel, "first")
            assert _next(listener) == Notification(channel, {"second": 2})
            _quiet(listener)

    @pytest.mark.clause("N-1", "T-1", "T-3")
    def test_notify_in_rolled_back_transaction_is_never_delivered(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        channel = unique("ch")
        with store_factory.open() as other, other.listen(channel) as listener:

            def notify_and_roll_back() -> None:
                with store.transaction() as tx:
                    store.notify(channel, "ghost", tx=tx)
                    raise _Rollback

            with pytest.raises(_Rollback):
                notify_and_roll_back()
            store.notify(channel, "marker")
            assert _next(listener).payload == "marker"
            _quiet(listener)

    @pytest.mark.clause("N-1", "T-3")
    def test_listener_started_during_a_transaction_receives_its_notification(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """What counts is listening when the write *commits*, not when it was made."""
        channel = unique("ch")
        with store_factory.open() as other:
            with store.transaction() as tx:
                store.notify(channel, "sent-before-listen", tx=tx)
                listener = other.listen(channel)
            try:
                assert _next(listener).payload == "sent-before-listen"
                _quiet(listener)
            finally:
                listener.close()

    @pytest.mark.clause("N-1", "C-7")
    def test_listener_of_one_channel_never_receives_another(self, store: Store) -> None:
        a = unique("ch")
        # A prefix of another channel, and two long names alike in their first
        # 150 characters, are different channels.
        long_a, long_b = "L" * 150 + unique("a"), "L" * 150 + unique("b")
        channels = [a, a + "x", long_a, long_b]
        listeners = [store.listen(c) for c in channels]
        try:
            for c in reversed(channels):
                store.notify(c, {"to": c})
            for c, listener in zip(channels, listeners, strict=True):
                assert _next(listener) == Notification(c, {"to": c})
            for listener in listeners:
                _quiet(listener)
        finally:
            for listener in listeners:
                listener.close()

    @pytest.mark.clause("N-1", "C-1")
    def test_notify_on_long_and_unicode_channel_names_is_delivered(self, store: Store) -> None:
        channels = ["x" * 200, "émails-📬", "a b.c;d'e\"f", "Z"]
        with store.listen(*channels) as listener:
            for c in channels:
                store.notify(c, c)
            got = {(n.channel, n.payload) for n in (_next(listener) for _ in channels)}
            assert got == {(c, c) for c in channels}
            _quiet(listener)

    @pytest.mark.clause("N-1", "C-3")
    def test_notify_at_payload_limit_on_longest_channel_is_delivered(self, store: Store) -> None:
        """The 7,900-byte limit is the payload's alone: the longest channel name
        (200 four-byte characters) does not eat into it."""
        channel = "\N{OPEN MAILBOX WITH RAISED FLAG}" * 200
        payload = "x" * (MAX_NOTIFICATION_BYTES - 2)
        with store.listen(channel) as listener:
            store.notify(channel, payload)
            store.notify(channel, {"ü": "é" * ((MAX_NOTIFICATION_BYTES - 12) // 2)})
            assert _next(listener) == Notification(channel, payload)
            assert _next(listener).payload == {"ü": "é" * ((MAX_NOTIFICATION_BYTES - 12) // 2)}
            _quiet(listener)

    # ------------------------------------------------------------------- N-2

    @pytest.mark.clause("N-2")
    def test_listen_to_two_channels_receives_from_both(self, store: Store) -> None:
        a, b = unique("ch"), unique("ch")
        listener = store.listen(a, b)
        try:
            assert listener.channels == frozenset({a, b})
            store.notify(a, 1)
            store.notify(b, 2)
            store.notify(a, 3)
            got = [_next(listener) for _ in range(3)]
            assert all(isinstance(n, Notification) for n in got)
            # Commit order holds per channel.
            assert [n.payload for n in got if n.channel == a] == [1, 3]
            assert [n.payload for n in got if n.channel == b] == [2]
            _quiet(listener)
        finally:
            listener.close()

    @pytest.mark.clause("N-2", "C-5")
    def test_get_without_notification_returns_none_after_timeout(self, store: Store) -> None:
        with store.listen(unique("ch")) as listener:
            started = time.monotonic()
            assert listener.get(0.2) is None
            elapsed = time.monotonic() - started
            assert 0.15 <= elapsed < ARRIVE_S
            assert listener.get(0) is None

    @pytest.mark.clause("N-2")
    def test_listener_iterates_notifications_until_closed(self, store: Store) -> None:
        channel = unique("ch")
        listener = store.listen(channel)
        got: list[Notification] = []
        iteration = Background(lambda: got.extend(listener))
        try:
            for n in range(3):
                store.notify(channel, {"n": n})
            eventually(lambda: len(got) == 3)
        finally:
            listener.close()
        # Ends (without raising) once the listener is closed.
        iteration.result(10)
        assert got == [Notification(channel, {"n": n}) for n in range(3)]

    @pytest.mark.clause("N-2")
    def test_listener_iteration_can_stop_early(self, store: Store) -> None:
        channel = unique("ch")
        with store.listen(channel) as listener:
            for n in range(4):
                store.notify(channel, n)
            got: list[Any] = []
            for note in listener:
                got.append(note.payload)
                if len(got) == 2:
                    break
            assert got == [0, 1]
            # Breaking out loses nothing: the rest is still there.
            assert [_next(listener).payload for _ in range(2)] == [2, 3]

    @pytest.mark.clause("N-2")
    def test_listener_as_context_manager_stops_on_exit(self, store: Store) -> None:
        channel = unique("ch")
        with store.listen(channel) as listener:
            store.notify(channel, "inside")
            assert _next(listener).payload == "inside"
        store.notify(channel, "after-close")
        rest: list[Notification] = []
        thread = threading.Thread(target=lambda: rest.extend(listener))
        thread.start()
        thread.join(10)
        assert not thread.is_alive(), "iterating a closed listener did not end"
        assert rest == []
        # Other listeners of the channel are unaffected by the close.
        with store.listen(channel) as fresh:
            store.notify(channel, "still-flowing")
            assert _next(fresh).payload == "still-flowing"

    @pytest.mark.clause("N-2", "C-1")
    def test_listen_without_channels_is_refused(self, store: Store) -> None:
        with pytest.raises(InvalidArgument):
            store.listen()

    @pytest.mark.clause("N-2", "C-3")
    def test_notification_payloads_round_trip_as_json(self, store: Store) -> None:
        channel = unique("ch")
        payloads: list[Any] = list(JSON_PAYLOADS)
        with store.listen(channel) as listener:
            for payload in payloads:
                store.notify(channel, payload)
            for payload in payloads:
                note = _next(listener)
                assert note.channel == channel
                assert note.payload == json.loads(json.dumps(payload))
            _quiet(listener)

    # ------------------------------------------------------------------- N-3

    @pytest.mark.clause("N-3", "N-1")
    def test_notifications_keep_flowing_after_many_and_a_reopen(
        self, store_factory: StoreFactory
    ) -> None:
        """N-3's cap itself lives in an engine table the suite cannot see (the
        SQLite engine's own tests check it). Here: what a consumer sees after
        more notifications than a cap would keep, and a reopen (SQLite prunes
        at open)."""
        channel = unique("ch")
        many = 300
        with store_factory.open() as store, store.listen(channel) as listener:
            with store.transaction() as tx:
                for n in range(many - 50):
                    store.notify(channel, n, tx=tx)
            for n in range(many - 50, many):
                store.notify(channel, n)
            assert [_next(listener).payload for _ in range(many)] == list(range(many))
            _quiet(listener)
        with store_factory.open() as reopened, reopened.listen(channel) as fresh:
            # Nothing from before the listener started, however many there were.
            assert fresh.get(QUIET_S) is None
            reopened.notify(channel, "after-reopen")
            assert _next(fresh) == Notification(channel, "after-reopen")
            with store_factory.open() as third, third.listen(channel) as late:
                third.notify(channel, "latest")
                assert _next(late).payload == "latest"
                _quiet(late)
            assert _next(fresh).payload == "latest"
            _quiet(fresh)

    # --------------------------------------------------------- cross-process

    @pytest.mark.clause("N-1")
    @pytest.mark.cross_process
    def test_notify_reaches_a_listener_in_another_process(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        channel = unique("ch")
        count = 5
        ready, results = signals()
        proc = spawn(
            _children_misc.listen_and_report, store_factory, channel, count, ready, results
        )
        latencies: list[float] = []
        try:
            assert ready.wait(60), "the listening process did not start"
            for n in range(count):
                started = time.monotonic()
                store.notify(channel, {"n": n, "text": "ünïcødé"})
                msg = results.get(timeout=ARRIVE_S)
                latencies.append(time.monotonic() - started)
                assert msg == ("note", channel, {"n": n, "text": "ünïcødé"}), msg
                time.sleep(0.02)
        finally:
            reap([proc])
        # Every one within the generous bound; the typical one well inside a
        # second (a delivery that waits for a multi-second fallback poll fails).
        assert max(latencies) < 5.0, latencies
        assert statistics.median(latencies) < 1.0, latencies
