"""ThreadGuard: a second thread is refused at once, the owner may re-enter, a closed
consumer is refused; KafkaConsumer's public calls go through it."""

from __future__ import annotations

import threading

import pytest

from millrace.client.consumer import KafkaConsumer
from millrace.client.consumer._internals.thread_guard import ThreadGuard
from millrace.client.errors import IllegalStateError


def another_thread_may_acquire(guard: ThreadGuard) -> bool:
    result: list[bool] = []

    def other() -> None:
        try:
            guard.acquire()
        except IllegalStateError:
            result.append(False)
        else:
            guard.release()
            result.append(True)

    t = threading.Thread(target=other)
    t.start()
    t.join(5)
    return result == [True]


def test_another_thread_is_refused_while_the_owner_is_inside() -> None:
    guard = ThreadGuard()
    inside, leave = threading.Event(), threading.Event()

    def owner() -> None:
        with guard:
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=owner)
    t.start()
    assert inside.wait(5)
    try:
        with pytest.raises(IllegalStateError, match="multi-threaded"):
            guard.acquire()
    finally:
        leave.set()
        t.join(5)
    assert another_thread_may_acquire(guard)  # free again once the owner left


def test_the_owner_may_reenter_and_the_guard_is_free_after_the_last_exit() -> None:
    guard = ThreadGuard()
    with guard:
        with guard:
            pass
        assert not another_thread_may_acquire(guard)  # still owned after the inner exit
    assert another_thread_may_acquire(guard)
    with pytest.raises(RuntimeError), guard:
        raise RuntimeError("left by an error")
    assert another_thread_may_acquire(guard)


def test_a_closed_guard_refuses_entry_but_not_acquire() -> None:
    guard = ThreadGuard()
    guard.closed = True
    with pytest.raises(IllegalStateError, match="already been closed"), guard:
        pass
    assert another_thread_may_acquire(guard)  # the refused entry did not keep it
    guard.acquire()  # close() may run twice
    guard.release()


def test_a_closed_consumer_refuses_calls_and_closes_twice() -> None:
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(bootstrap_servers="localhost:9092")
    consumer.assign([("t", 0)])
    assert not consumer.closed
    consumer.close()
    assert consumer.closed
    for call in (lambda: consumer.poll(0), lambda: consumer.assign([("t", 1)]),
                 lambda: consumer.seek(("t", 0), 5), consumer.unsubscribe):
        with pytest.raises(IllegalStateError, match="already been closed"):
            call()
    consumer.close()
    assert list(consumer) == []
