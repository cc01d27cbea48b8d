"""RecordJourney and send_traced: traceparent rules, stage recording, the producer's stages.

The producer tests run on the in-process FakeCluster with a MockTime and a stepped Sender
(fakes.py), so each stage's cause is controlled: linger, a full batch, flush, a retry.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from millrace.client.cluster import Cluster, TopicPartition
from millrace.client.consumer.consumer_record import ConsumerRecord
from millrace.client.errors import SerializationError
from millrace.client.producer import Partitioner, ProducerInterceptor, ProducerRecord
from millrace.client.producer._internals.journey import with_traceparent
from millrace.client.serialization import Serializer
from millrace.client.tracing import (
    STAGES,
    RecordJourney,
    journey_context,
    parse_traceparent,
)
from millrace.common.errors import Errors
from tests.unit.client.fakes import FakeCluster, make_producer, step, warm
from tests.unit.client.test_producer_sender import run_until

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
GOOD = f"00-{TRACE}-{SPAN}-01"


# ---------------------------------------------------------------------- traceparent
def test_start_makes_a_new_trace_or_continues_a_valid_parent() -> None:
    fresh = RecordJourney.start()
    assert len(fresh.trace_id) == 32 and len(fresh.span_id) == 16
    assert fresh.parent_span_id is None
    assert fresh.traceparent == f"00-{fresh.trace_id}-{fresh.span_id}-01"
    assert parse_traceparent(fresh.traceparent) == (fresh.trace_id, fresh.span_id, 1)
    assert RecordJourney.start().trace_id != fresh.trace_id

    child = RecordJourney.start(GOOD.encode())
    assert (child.trace_id, child.parent_span_id) == (TRACE, SPAN)
    assert child.span_id not in (SPAN, fresh.span_id)

    orphan = RecordJourney.start(GOOD.upper())  # invalid: a new trace, no parent
    assert orphan.trace_id != TRACE and orphan.parent_span_id is None


def test_with_traceparent_replaces_the_header_and_keeps_the_others() -> None:
    for headers in ([("a", b"1"), ("traceparent", b"old"), ("b", None)],
                    {"a": b"1", "traceparent": b"old", "b": None}):
        assert with_traceparent(headers, GOOD) == [("a", b"1"), ("b", None),
                                                   ("traceparent", GOOD.encode())]
    assert with_traceparent(None, GOOD) == [("traceparent", GOOD.encode())]


def test_journey_context_reads_a_consumed_records_header() -> None:
    record = ConsumerRecord("t", 0, 5, key=None, value=b"v",
                            headers=(("x", b"1"), ("traceparent", GOOD.encode())))
    assert journey_context(record) == (TRACE, SPAN)
    assert journey_context(ConsumerRecord("t", 0, 6, value=b"v")) is None
    bad = ConsumerRecord("t", 0, 7, value=b"v", headers=(("traceparent", b"garbage"),))
    assert journey_context(bad) is None


# ---------------------------------------------------------------------- recording
def test_add_from_many_threads_loses_nothing_and_stages_come_out_in_time_order() -> None:
    journey = RecordJourney.start()
    threads, per_thread = 8, 500
    barrier = threading.Barrier(threads)

    def add(lane: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            # times interleave across threads: sorting is the reader's job
            journey.add(f"s{lane}", i * threads + lane, lane=f"lane{lane}", seq=i)

    workers = [threading.Thread(target=add, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stages = journey.stages
    assert len(stages) == threads * per_thread
    assert [s["t_us"] for s in stages] == list(range(threads * per_thread))
    for lane in range(threads):
        assert [s["seq"] for s in stages if s["lane"] == f"lane{lane}"] == \
            list(range(per_thread))


def test_ties_keep_the_causal_order_and_to_json_has_the_contract_fields() -> None:
    journey = RecordJourney.start()
    journey.add("accumulator.append", 10, lane="producer", new_batch=True)
    journey.add("producer.partition", 10, lane="producer", partition=2, reason="sticky")
    journey.add("producer.serialize", 5, lane="producer", duration_us=3, detail="d")
    assert [s["stage"] for s in journey.stages] == [
        "producer.serialize", "producer.partition", "accumulator.append"]
    journey.topic, journey.partition, journey.offset = "t", 2, 41
    out = journey.to_json()
    assert set(out) == {"trace_id", "span_id", "parent_span_id", "topic", "partition",
                        "offset", "client_id", "error", "stages"}
    assert json.loads(json.dumps(out)) == out  # plain JSON
    assert {k: out[k] for k in ("trace_id", "span_id", "parent_span_id", "topic",
                                "partition", "offset", "error")} == {
        "trace_id": journey.trace_id, "span_id": journey.span_id, "parent_span_id": None,
        "topic": "t", "partition": 2, "offset": 41, "error": None}
    assert out["stages"][0] == {"stage": "producer.serialize", "t_us": 5, "duration_us": 3,
                                "lane": "producer", "detail": "d"}
    out["stages"][0]["stage"] = "changed"  # a copy: the journey is not changed through it
    assert journey.stages[0]["stage"] == "producer.serialize"
    assert not journey.wait(0)
    journey.finish()
    assert journey.wait(0) and journey.done.is_set()


# ---------------------------------------------------------------------- the producer
def _names(journey: RecordJourney) -> list[str]:
    return [s["stage"] for s in journey.stages]


def _producer(config: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Any, Any, Any]:
    cluster = FakeCluster(topics={"t": 3})
    producer, _, clock = make_producer(cluster, {"linger.ms": 5, **(config or {})}, **kwargs)
    warm(producer, "t", clock)
    return producer, cluster, clock


def test_send_traced_records_every_stage_once_in_order() -> None:
    producer, cluster, clock = _producer()
    calls: list[Any] = []
    record = ProducerRecord("t", b"value", key=b"key", headers=[("h", b"1")])
    future, journey = producer.send_traced(record, lambda m, e: calls.append((m, e)))
    assert record.headers == [("h", b"1")]  # the caller's record is not changed
    run_until(producer, clock, journey.done.is_set)
    metadata = future.get(0)
    assert calls == [(metadata, None)]
    assert _names(journey) == list(STAGES)
    times = [s["t_us"] for s in journey.stages]
    assert times == sorted(times)
    by = {s["stage"]: s for s in journey.stages}
    assert {s["lane"] for s in journey.stages if s["stage"].startswith(
        ("producer.i", "producer.s", "producer.p", "accumulator"))} == {"producer"}
    assert by["batch.ready"]["lane"] == by["producer.callback"]["lane"] == "sender"
    assert by["producer.interceptors"]["interceptors"] == 0
    assert by["producer.serialize"].items() >= {"key_serializer": "ByteArraySerializer",
                                                "key_bytes": 3, "value_bytes": 5}.items()
    assert by["producer.partition"]["reason"] == "key-hash"
    assert by["producer.partition"]["partition"] == metadata.partition
    assert by["accumulator.append"]["new_batch"] is True
    assert by["accumulator.append"]["batch_records"] == 1
    assert by["accumulator.append"]["batch_size"] == 16384
    assert by["batch.ready"]["reason"] == "linger" and by["batch.ready"]["age_ms"] >= 5
    assert by["sender.drain"]["node"] == by["request.sent"]["node"] == \
        by["response.received"]["node"] == 0
    assert by["request.sent"]["address"] == "fake:9092"
    assert by["request.sent"]["acks"] == -1 and by["request.sent"]["correlation_id"] > 0
    assert by["response.received"]["error"] == "NONE"
    assert by["response.received"]["offset"] == metadata.offset
    assert (journey.topic, journey.partition, journey.offset) == \
        ("t", metadata.partition, metadata.offset)
    # the record went with the journey's traceparent, the other header kept
    stored = cluster.records(TopicPartition("t", metadata.partition))[metadata.offset]
    assert list(stored.headers) == [("h", b"1"), ("traceparent", journey.traceparent.encode())]


def test_partition_reasons_and_a_record_joining_an_open_batch() -> None:
    producer, _, clock = _producer()
    _, explicit = producer.send_traced(ProducerRecord("t", b"a", partition=1))
    untraced = producer.send(ProducerRecord("t", b"b", partition=1))
    _, joined = producer.send_traced(ProducerRecord("t", b"c", partition=1))
    _, sticky = producer.send_traced(ProducerRecord("t", b"d"))
    run_until(producer, clock, lambda: joined.done.is_set() and sticky.done.is_set())
    assert explicit.stage("producer.partition")["reason"] == "explicit"  # type: ignore[index]
    append = joined.stage("accumulator.append")
    assert append is not None and append["new_batch"] is False
    assert append["batch_records"] == 3  # the untraced record is in the batch between them
    assert (joined.offset, explicit.offset) == (untraced.get(0).offset + 1,
                                                untraced.get(0).offset - 1)
    partition = sticky.stage("producer.partition")
    assert partition is not None and partition["reason"] == "sticky"
    assert partition["partition"] == sticky.partition


def test_custom_partitioner_and_interceptors_are_named() -> None:
    class Last(Partitioner):
        def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
                      value_bytes: bytes | None, cluster: Cluster) -> int:
            return 2

    class Tag(ProducerInterceptor):
        def on_send(self, record: Any) -> Any:
            record.headers = [*(record.headers or []), ("tag", b"1")]
            return record

        def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
            pass

    producer, cluster, clock = _producer({"partitioner.class": Last,
                                          "interceptor.classes": [Tag]})
    _, journey = producer.send_traced(ProducerRecord("t", b"v", key=b"k"))
    run_until(producer, clock, journey.done.is_set)
    assert journey.stage("producer.partition")["reason"] == "custom:Last"  # type: ignore[index]
    assert journey.stage("producer.interceptors")["interceptors"] == ["Tag"]  # type: ignore[index]
    stored = cluster.records(TopicPartition("t", 2))[0]
    assert dict(stored.headers) == {"traceparent": journey.traceparent.encode(), "tag": b"1"}


def test_batch_ready_reasons_full_and_flush() -> None:
    producer, _, clock = _producer({"batch.size": 200, "linger.ms": 60_000})
    _, first = producer.send_traced(ProducerRecord("t", b"x" * 150, partition=0))
    _, second = producer.send_traced(ProducerRecord("t", b"y" * 10, partition=0))
    step(producer)
    assert first.stage("batch.ready")["reason"] == "full"  # type: ignore[index]
    producer._accumulator.begin_flush()  # what flush() does before it waits
    run_until(producer, clock, second.done.is_set)
    assert second.stage("batch.ready")["reason"] == "flush"  # type: ignore[index]
    assert second.stage("batch.ready")["age_ms"] < 60_000  # type: ignore[index]


def test_a_retry_repeats_the_sender_stages_and_a_failure_still_finishes() -> None:
    producer, cluster, clock = _producer({"retry.backoff.ms": 10})
    cluster.fail_next[TopicPartition("t", 0)].append(Errors.NOT_ENOUGH_REPLICAS)
    _, retried = producer.send_traced(ProducerRecord("t", b"v", partition=0))
    run_until(producer, clock, retried.done.is_set)
    readies = [s for s in retried.stages if s["stage"] == "batch.ready"]
    assert [s["reason"] for s in readies] == ["linger", "retry"]
    responses = [s for s in retried.stages if s["stage"] == "response.received"]
    assert [s["error"] for s in responses] == ["NOT_ENOUGH_REPLICAS", "NONE"]
    assert retried.error is None and retried.offset == 0

    cluster.fail_next[TopicPartition("t", 1)].append(Errors.INVALID_TOPIC_EXCEPTION)
    calls: list[Any] = []
    future, failed = producer.send_traced(ProducerRecord("t", b"v", partition=1),
                                          lambda m, e: calls.append(e))
    run_until(producer, clock, failed.done.is_set)
    assert future.exception(0) is calls[0]
    assert failed.error == type(calls[0]).__name__
    callback = failed.stage("producer.callback")
    assert callback is not None and callback["error"] == failed.error
    assert failed.stage("response.received")["error"] == "INVALID_TOPIC_EXCEPTION"  # type: ignore[index]
    assert failed.offset is None and failed.partition == 1


def test_a_send_that_raises_finishes_the_journey_with_the_error() -> None:
    class Refuse(Serializer[Any]):
        def serialize(self, topic: str, data: Any, headers: Any = None) -> bytes | None:
            raise ValueError("no")

    producer, _, _ = _producer(value_serializer=Refuse())
    journey = RecordJourney.start()
    with pytest.raises(SerializationError):
        producer.send_traced(ProducerRecord("t", "v"), journey=journey)
    assert journey.done.is_set() and journey.error == "SerializationError"


def test_untraced_sends_leave_no_journey_on_their_batches() -> None:
    producer, _, clock = _producer()
    producer.send(ProducerRecord("t", b"v", partition=0))
    producer._send(ProducerRecord("t", b"w", partition=1, headers=[("h", b"1")]))
    batches = producer._accumulator.incomplete_batches()
    assert len(batches) == 2 and all(b.journeys is None for b in batches)
    producer.send_traced(ProducerRecord("t", b"x", partition=1))
    traced = [b for b in producer._accumulator.incomplete_batches() if b.journeys]
    assert len(traced) == 1 and traced[0].journeys[0][1] == 1  # the second record
    run_until(producer, clock, lambda: not producer._accumulator.has_incomplete())


def test_a_split_batch_takes_its_traced_records_along() -> None:
    producer, cluster, clock = _producer({"linger.ms": 0})
    tp = TopicPartition("t", 0)
    cluster.fail_next[tp].append(Errors.MESSAGE_TOO_LARGE)  # MESSAGE_TOO_LARGE: the batch is split in two
    for _ in range(3):
        producer.send(ProducerRecord("t", b"u" * 3000, partition=0))
    _, journey = producer.send_traced(ProducerRecord("t", b"t" * 3000, partition=0))
    producer._accumulator._topics["t"].batches[0][0].close()  # no more appends
    run_until(producer, clock, journey.done.is_set)
    assert journey.offset == 3
    responses = [s["error"] for s in journey.stages if s["stage"] == "response.received"]
    assert responses == ["MESSAGE_TOO_LARGE", "NONE"]
