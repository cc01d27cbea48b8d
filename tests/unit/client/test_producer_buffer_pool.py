"""BufferPool: buffer.memory accounting, blocking up to max.block.ms, fairness."""

from __future__ import annotations

import threading
import time

import pytest

from millrace.client.errors import BufferExhaustedError, IllegalStateError, KafkaTimeoutError
from millrace.client.metrics import Metrics
from millrace.client.producer._internals.buffer_pool import BufferPool


def test_allocate_and_deallocate_keep_the_books() -> None:
    pool = BufferPool(1000, 100)
    assert pool.allocate(300, 0) == 300
    assert pool.allocate(700, 0) == 700
    assert pool.available_memory() == 0
    pool.deallocate(300)
    assert pool.available_memory() == 300


def test_more_than_the_total_is_refused_outright() -> None:
    with pytest.raises(ValueError, match="hard limit"):
        BufferPool(100, 10).allocate(101, 1000)


def test_exhausted_pool_blocks_then_raises_a_timeout() -> None:
    sensor = Metrics().sensor("bufferpool-wait-time")
    pool = BufferPool(100, 100, sensor)
    pool.allocate(100, 0)
    start = time.monotonic()
    with pytest.raises(BufferExhaustedError) as info:
        pool.allocate(10, 50)
    waited = time.monotonic() - start
    assert 0.045 <= waited < 1.0
    assert isinstance(info.value, KafkaTimeoutError) and isinstance(info.value, TimeoutError)
    assert "within the configured max blocking time 50 ms" in str(info.value)
    assert pool.available_memory() == 0 and pool.queued() == 0
    assert sensor.lifetime_count == 1


def test_blocked_allocation_proceeds_when_memory_is_freed() -> None:
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(pool.allocate(60, 5000)))
    t.start()
    for _ in range(200):
        if pool.queued():
            break
        time.sleep(0.005)
    assert pool.queued() == 1
    pool.deallocate(30)
    pool.deallocate(70)
    t.join(5)
    assert got == [60] and pool.available_memory() == 40


def test_waiters_are_served_first_come_first_served() -> None:
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)
    order: list[str] = []

    def take(name: str, size: int) -> None:
        pool.allocate(size, 5000)
        order.append(name)

    first = threading.Thread(target=take, args=("first", 80))
    first.start()
    while pool.queued() < 1:
        time.sleep(0.002)
    second = threading.Thread(target=take, args=("second", 10))
    second.start()
    while pool.queued() < 2:
        time.sleep(0.002)
    pool.deallocate(50)  # not enough for the first; the second must still wait its turn
    time.sleep(0.05)
    assert order == []
    pool.deallocate(50)
    first.join(5)
    second.join(5)
    assert order == ["first", "second"]


def test_close_wakes_waiters_with_an_error() -> None:
    pool = BufferPool(10, 10)
    pool.allocate(10, 0)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            pool.allocate(5, 10_000)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    while pool.queued() < 1:
        time.sleep(0.002)
    pool.close()
    t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], IllegalStateError)
    with pytest.raises(IllegalStateError):
        pool.allocate(1, 0)
