"""RecordAccumulator: linger, full batches, drain limits, expiry, retries, memory."""

from __future__ import annotations

import random
import threading
import time

import pytest

from millrace.client.cluster import Cluster, Node, PartitionInfo, TopicPartition
from millrace.client.errors import BufferExhaustedError, IllegalStateError
from millrace.client.producer._internals.buffer_pool import BufferPool
from millrace.client.producer._internals.record_accumulator import RecordAccumulator
from millrace.client.producer._internals.transaction_manager import TransactionManager
from millrace.record import CompressionType

N0, N1 = Node(0, "a", 1), Node(1, "b", 1)
T0 = 1_700_000_000_000
V = b"x" * 100


def cluster(partitions: int = 2, leaders: tuple[Node | None, ...] | None = None) -> Cluster:
    leaders = leaders or tuple(N0 if i % 2 == 0 else N1 for i in range(partitions))
    return Cluster([N0, N1], [PartitionInfo("t", i, leaders[i]) for i in range(partitions)])


def accumulator(**kw: object) -> RecordAccumulator:
    settings: dict = {"buffer_pool": BufferPool(1 << 30, 1000), "batch_size": 1000,
                      "linger_ms": 10, "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000,
                      "delivery_timeout_ms": 5000, "rng": random.Random(1)}
    settings.update(kw)
    return RecordAccumulator(**settings)


def append(acc: RecordAccumulator, cl: Cluster, partition: int = 0, now: int = 0,
           value: bytes = V) -> tuple:
    return acc.append("t", partition, T0 + now, None, value, (), None, 1000, now, cl)


def test_a_lingering_batch_is_not_ready_until_linger_ms() -> None:
    acc, cl = accumulator(), cluster()
    _future, wake = append(acc, cl)
    assert wake  # a new batch wakes the sender
    result = acc.ready(cl, 0)
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == 10
    assert acc.ready(cl, 9).next_ready_check_delay_ms == 1
    assert acc.ready(cl, 10).ready_nodes == {N0}


def test_a_full_batch_is_ready_at_once() -> None:
    acc, cl = accumulator(), cluster()
    wakes = [append(acc, cl)[1] for _ in range(12)]
    assert wakes[0] and any(wakes[1:])  # ... and again when a batch fills up
    assert not all(wakes[1:])  # but not for every record
    assert acc.ready(cl, 0).ready_nodes == {N0}


def test_drain_takes_one_batch_per_partition_within_max_request_size() -> None:
    acc = accumulator(batch_size=500)
    cl = cluster(4, leaders=(N0, N0, N0, N0))
    for p in range(4):
        for _ in range(8):  # two batches per partition
            append(acc, cl, p)
    drained = acc.drain(cl, {N0}, 1100, 100)
    batches = drained[0]
    assert len({b.topic_partition for b in batches}) == len(batches) == 2  # 1100 bytes
    again = acc.drain(cl, {N0}, 10_000, 100)[0]
    # rotation: the partitions skipped last time go first now
    assert {b.topic_partition.partition for b in again} == {0, 1, 2, 3}
    assert again[0].topic_partition.partition not in {b.topic_partition.partition
                                                      for b in batches[:1]}
    assert all(b.closed for b in batches + again)


def test_an_oversized_single_batch_is_still_drained() -> None:
    acc, cl = accumulator(), cluster()
    append(acc, cl, value=b"x" * 5000)
    assert [b.record_count for b in acc.drain(cl, {N0}, 100, 0)[0]] == [1]


def test_unknown_leaders_are_reported() -> None:
    acc, cl = accumulator(), cluster(2, leaders=(None, N1))
    append(acc, cl, 0)
    result = acc.ready(cl, 100)
    assert result.unknown_leader_topics == {"t"} and result.ready_nodes == set()


def test_expired_batches_leave_the_queue() -> None:
    acc, cl = accumulator(), cluster()
    append(acc, cl, 0, now=0)
    append(acc, cl, 1, now=3000)
    assert acc.expired_batches(4999) == []
    acc.reset_next_batch_expiry_time()  # as the sender does before each pass
    expired = acc.expired_batches(5000)
    assert [b.topic_partition.partition for b in expired] == [0]
    assert acc.next_expiry_time_ms == 8000


def test_reenqueued_batch_goes_first_and_waits_its_backoff() -> None:
    acc, cl = accumulator(), cluster()
    append(acc, cl, 0)
    (batch,) = acc.drain(cl, {N0}, 10_000, 10)[0]
    append(acc, cl, 0, now=20)
    acc.reenqueue(batch, 50)
    assert 80 <= batch.retry_backoff_ms <= 120  # retry.backoff.ms with 20% jitter
    assert acc.ready(cl, 60).ready_nodes == set()  # backing off (though the next lingered)
    assert acc.drain(cl, {N0}, 10_000, 60) == {}
    now = 50 + batch.retry_backoff_ms
    assert acc.ready(cl, now).ready_nodes == {N0}
    assert acc.drain(cl, {N0}, 10_000, now)[0] == [batch]


def test_retry_backoff_grows_exponentially_to_the_maximum() -> None:
    acc, cl = accumulator(retry_backoff_ms=100, retry_backoff_max_ms=1000), cluster()
    append(acc, cl, 0)
    (batch,) = acc.drain(cl, {N0}, 10_000, 10)[0]
    backoffs = []
    for _ in range(7):
        acc.reenqueue(batch, 0)
        backoffs.append(batch.retry_backoff_ms)
        acc.drain(cl, {N0}, 10_000, 10_000)
    for expected, got in zip([100, 200, 400, 800, 1000, 1000, 1000], backoffs):
        assert expected * 0.8 - 1 <= got <= min(expected * 1.2, 1000)


def test_exhausted_memory_and_flush_make_batches_ready() -> None:
    pool = BufferPool(2000, 1000)
    acc, cl = accumulator(buffer_pool=pool), cluster()
    append(acc, cl, 0)
    append(acc, cl, 1)
    assert acc.ready(cl, 0).ready_nodes == set()
    acc.begin_flush()
    assert acc.ready(cl, 0).ready_nodes == {N0, N1}
    done = threading.Thread(target=acc.await_flush_completion)
    done.start()
    for b in acc.drain(cl, {N0, N1}, 10_000, 0).values():
        for batch in b:
            batch.complete(0, -1)
            acc.deallocate(batch)
    done.join(5)
    assert not acc.flush_in_progress() and pool.available_memory() == 2000
    # a thread blocked on memory makes everything sendable
    append(acc, cl, 0)
    append(acc, cl, 1)
    outcome: list[BaseException] = []

    def blocked_send() -> None:
        try:
            acc.append("t", 0, T0, None, b"y" * 1500, (), None, 300, 0, cl)
        except BaseException as e:
            outcome.append(e)

    blocked = threading.Thread(target=blocked_send)
    blocked.start()
    while pool.queued() == 0:
        time.sleep(0.002)
    assert acc.ready(cl, 0).ready_nodes == {N0, N1}
    blocked.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], BufferExhaustedError)


def test_a_send_blocks_for_memory_up_to_max_block_ms() -> None:
    acc, cl = accumulator(buffer_pool=BufferPool(1000, 1000)), cluster()
    append(acc, cl, 0)
    start = time.monotonic()
    with pytest.raises(BufferExhaustedError):
        acc.append("t", 1, T0, None, V, (), None, 60, 0, cl)
    assert 0.055 < time.monotonic() - start < 1.0
    assert not acc.has_undrained() or len(acc.incomplete_batches()) == 1


def test_muted_partitions_are_neither_ready_nor_drained() -> None:
    acc, cl = accumulator(linger_ms=0), cluster()
    append(acc, cl, 0)
    acc.mute(TopicPartition("t", 0))
    assert acc.ready(cl, 0).ready_nodes == set()
    assert acc.drain(cl, {N0}, 10_000, 0) == {}
    acc.unmute(TopicPartition("t", 0))
    assert acc.ready(cl, 0).ready_nodes == {N0}


def test_sticky_partition_fills_a_batch_then_moves_on() -> None:
    acc = accumulator(batch_size=1000, linger_ms=1000)
    cl = cluster(4, leaders=(N0, N0, N0, N0))
    partitions = []
    for i in range(60):
        future, _ = acc.append("t", -1, T0, None, V, (), None, 1000, i, cl)
        partitions.append(future.topic_partition.partition)
    runs = [partitions[0]]
    for p in partitions[1:]:
        if p != runs[-1]:
            runs.append(p)
    assert len(runs) >= 4  # it moved on several times ...
    assert partitions.count(partitions[0]) >= 8  # ... after about batch.size bytes each


def test_sequences_are_assigned_at_drain_and_retries_wait_their_turn() -> None:
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(42, 0)
    acc, cl = accumulator(transaction_manager=tm, linger_ms=0, batch_size=300), cluster()
    for _ in range(6):
        append(acc, cl, 0)
    first = acc.drain(cl, {N0}, 10_000, 0)[0][0]
    second = acc.drain(cl, {N0}, 10_000, 0)[0][0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (42, 0, 0)
    assert second.base_sequence == first.record_count
    # the first fails and is retried: it must go before anything else of the partition
    acc.reenqueue(first, 0)
    acc.reenqueue(second, 0)
    assert acc.drain(cl, {N0}, 10_000, 1000)[0] == [first]
    # the second waits until the first is acknowledged
    assert acc.drain(cl, {N0}, 10_000, 1000) == {}
    tm.handle_completed_batch(first, 0)
    assert acc.drain(cl, {N0}, 10_000, 1000)[0] == [second]


def test_no_producer_id_means_nothing_is_drained() -> None:
    acc, cl = accumulator(transaction_manager=TransactionManager(), linger_ms=0), cluster()
    append(acc, cl, 0)
    assert acc.drain(cl, {N0}, 10_000, 0) == {}


def test_compressed_batches_hold_more_records_as_the_ratio_is_learned() -> None:
    acc = accumulator(compression=CompressionType.GZIP, batch_size=2000, linger_ms=0)
    cl = cluster()
    counts = []
    for _ in range(5):  # waves: each learns from the batches built before it
        for _ in range(300):
            append(acc, cl, 0)
        drained = acc.drain(cl, {N0}, 1 << 20, 0)[0]
        counts.append(drained[0].record_count)
        while drained:
            for batch in drained:
                batch.records()
                acc.record_built(batch)
            drained = acc.drain(cl, {N0}, 1 << 20, 0).get(0, [])
    assert counts[0] <= 20 < counts[-1]  # 100-byte records of b"x" compress well


def test_closed_accumulator_refuses_appends_and_aborts() -> None:
    acc, cl = accumulator(), cluster()
    future, _ = append(acc, cl, 0)
    acc.close()
    with pytest.raises(IllegalStateError):
        append(acc, cl, 0)
    acc.abort_incomplete_batches(RuntimeError("closing"))
    with pytest.raises(RuntimeError, match="closing"):
        future.get(0)
    assert not acc.has_incomplete()
