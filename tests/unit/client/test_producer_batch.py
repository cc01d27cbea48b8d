"""ProducerBatch: its bytes equal RecordBatchBuilder's; limits, completion, splitting."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.client.cluster import TopicPartition
from millrace.client.errors import KafkaTimeoutError
from millrace.client.producer._internals.producer_batch import (
    FinalState,
    ProducerBatch,
    increment_sequence,
)
from millrace.common.errors import NotLeaderOrFollowerError
from millrace.record import CompressionType, RecordBatch, RecordBatchBuilder, validate_batch

TP = TopicPartition("t", 0)
T0 = 1_700_000_000_000

keys = st.none() | st.binary(max_size=300)
values = st.none() | st.binary(max_size=20_000)
headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)),
                   max_size=3)
records = st.lists(st.tuples(st.integers(0, 100_000), keys, values, headers),
                   min_size=1, max_size=20)


def _build_both(recs: list, codec: CompressionType = CompressionType.NONE,
                producer: tuple[int, int, int] | None = None) -> tuple[bytes, bytes]:
    batch = ProducerBatch(TP, 0, 1 << 30, compression=codec)
    builder = RecordBatchBuilder(compression=codec)
    for delta, key, value, hdrs in recs:
        assert batch.try_append(T0 + delta, key, value, hdrs, None, 0) is not None
        builder.append(T0 + delta, key, value, hdrs)
    if producer is not None:
        batch.set_producer_state(*producer)
        builder.set_producer_state(*producer, False)
    return batch.records(), builder.build()


@settings(max_examples=150, deadline=None)
@given(records)
def test_bytes_equal_record_batch_builder(recs: list) -> None:
    ours, theirs = _build_both(recs)
    assert ours == theirs
    validate_batch(ours, check_offsets=True)


@settings(max_examples=20, deadline=None)
@given(records, st.sampled_from(list(CompressionType)))
def test_compressed_batches_equal_builder_and_decode(recs: list, codec: CompressionType) -> None:
    ours, theirs = _build_both(recs, codec, producer=(7, 1, 40))
    assert ours == theirs
    decoded = RecordBatch(ours).record_list()
    assert [(r.key, r.value, r.headers) for r in decoded] == \
        [(k, v, tuple(h)) for _, k, v, h in recs]


def test_large_offsets_and_negative_deltas_take_the_slow_varint_path() -> None:
    recs = [(100_000_000 if i == 1 else 5, b"k" * 20000, b"v", []) for i in range(3)]
    recs.append((0, None, None, []))  # a timestamp before the base: negative delta
    ours, theirs = _build_both(recs)
    assert ours == theirs
    batch = ProducerBatch(TP, 0, 1 << 40)
    for _i in range(20000):
        batch.try_append(T0, None, b"", (), None, 0)
    builder = RecordBatchBuilder()
    for _i in range(20000):
        builder.append(T0, None, b"", ())
    assert batch.records() == builder.build()


def test_first_record_always_fits_and_the_limit_holds_after() -> None:
    batch = ProducerBatch(TP, 0, 200)
    assert batch.try_append(T0, None, b"x" * 1000, (), None, 0) is not None
    assert batch.full
    assert batch.try_append(T0, None, b"y", (), None, 0) is None
    small = ProducerBatch(TP, 0, 300)
    n = 0
    while small.try_append(T0, None, b"x" * 50, (), None, 0) is not None:
        n += 1
    assert n == 4 and small.appended_size() <= 300


def test_closed_batch_takes_no_more_records() -> None:
    batch = ProducerBatch(TP, 0, 10_000)
    batch.try_append(T0, None, b"x", (), None, 0)
    batch.close()
    assert batch.try_append(T0, None, b"x", (), None, 0) is None


def test_negative_first_timestamp_is_refused() -> None:
    with pytest.raises(ValueError):
        ProducerBatch(TP, 0, 100).try_append(-5, None, b"x", (), None, 0)


def test_completion_sets_every_future_and_runs_callbacks_in_order() -> None:
    batch = ProducerBatch(TP, 0, 10_000)
    seen: list = []
    futures = [batch.try_append(T0 + i, b"k" if i else None, b"v" * i, (),
                                (lambda m, e, i=i: seen.append((i, m.offset, e))) if i % 2 else None,
                                0) for i in range(4)]
    assert all(f is not None and not f.done() for f in futures)
    assert batch.complete(100, -1)
    assert [f.get(0).offset for f in futures] == [100, 101, 102, 103]  # type: ignore[union-attr]
    md = futures[1].get(0)  # type: ignore[union-attr]
    assert (md.topic, md.partition, md.timestamp, md.serialized_key_size,
            md.serialized_value_size) == ("t", 0, T0 + 1, 1, 1)
    assert futures[0].get(0).serialized_key_size == -1  # type: ignore[union-attr]
    assert seen == [(1, 101, None), (3, 103, None)]
    assert not batch.complete(200, -1)  # only once
    assert batch.final_state is FinalState.SUCCEEDED


def test_log_append_time_replaces_the_create_time() -> None:
    batch = ProducerBatch(TP, 0, 10_000)
    future = batch.try_append(T0, None, b"v", (), None, 0)
    batch.complete(0, T0 + 999)
    assert future is not None and future.get(0).timestamp == T0 + 999


def test_failure_raises_from_get_and_reaches_callbacks(caplog: pytest.LogCaptureFixture) -> None:
    batch = ProducerBatch(TP, 0, 10_000)
    got: list = []

    def bad_callback(metadata: object, error: object) -> None:
        got.append(error)
        raise RuntimeError("user bug")

    future = batch.try_append(T0, None, b"v", (), bad_callback, 0)
    error = NotLeaderOrFollowerError("moved")
    with caplog.at_level(logging.ERROR):
        assert batch.complete_exceptionally(error)
    assert "user callback" in caplog.text
    assert got == [error]
    assert future is not None
    with pytest.raises(NotLeaderOrFollowerError):
        future.get(0)
    assert future.exception(0) is error
    assert not batch.complete(5, -1)  # a late success is ignored


def test_get_times_out_while_pending() -> None:
    batch = ProducerBatch(TP, 0, 10_000)
    future = batch.try_append(T0, None, b"v", (), None, 0)
    assert future is not None
    with pytest.raises(KafkaTimeoutError):
        future.get(0.01)
    with pytest.raises(KafkaTimeoutError):
        future.exception(0.01)


def test_split_keeps_every_record_and_redirects_futures() -> None:
    batch = ProducerBatch(TP, 0, 1 << 20)
    calls: list = []
    futures = [batch.try_append(T0 + i, str(i).encode(), b"x" * 100, [("h", b"1")],
                                lambda m, e, i=i: calls.append((i, m.offset)), 0)
               for i in range(30)]
    batch.set_producer_state(5, 0, 10)
    batch.records()
    parts = batch.split(1000)
    assert len(parts) > 3 and all(p.is_split_batch for p in parts)
    assert sum(p.record_count for p in parts) == 30
    assert all(f is not None and not f.done() for f in futures)
    offset = 50
    for part in parts:
        part.complete(offset, -1)
        offset += part.record_count
    assert [f.get(0).offset for f in futures] == list(range(50, 80))  # type: ignore[union-attr]
    assert sorted(calls) == [(i, 50 + i) for i in range(30)]
    decoded = [r for p in parts for r in RecordBatch(p.records()).record_list()]
    assert [r.key for r in decoded] == [str(i).encode() for i in range(30)]
    assert decoded[0].headers == (("h", b"1"),)


def test_sequence_numbers_wrap_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 5) == 3
    batch = ProducerBatch(TP, 0, 1000)
    batch.try_append(T0, None, b"v", (), None, 0)
    batch.try_append(T0, None, b"v", (), None, 0)
    batch.set_producer_state(1, 0, 2**31 - 1)
    assert batch.last_sequence == 0


def test_delivery_timeout_and_backoff_bookkeeping() -> None:
    batch = ProducerBatch(TP, 1000, 1000)
    assert not batch.has_reached_delivery_timeout(500, 1499)
    assert batch.has_reached_delivery_timeout(500, 1500)
    batch.reenqueued(2000, 150)
    assert (batch.attempts, batch.last_attempt_ms, batch.retry_backoff_ms, batch.in_retry) == \
        (1, 2000, 150, True)
    assert batch.waited_time_ms(2100) == 100
