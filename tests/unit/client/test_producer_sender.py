"""The Sender stepped with a MockTime against an in-process fake cluster (no sockets).

Everything below the Sender is real: NetworkClient, ApiVersions negotiation, the request
and response codecs; only the selector is replaced (``fakes.FakeSelector``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from millrace.client.cluster import TopicPartition
from millrace.client.errors import KafkaTimeoutError
from millrace.client.producer import ProducerRecord
from millrace.common.errors import (
    InvalidTopicError,
    NetworkError,
    NotEnoughReplicasError,
    RecordTooLargeError,
    RequestTimedOutError,
)
from millrace.record import RecordBatch
from tests.unit.client.fakes import FakeCluster, make_producer, step, warm

TP0 = TopicPartition("t", 0)
NOT_ENOUGH_REPLICAS = 19
NOT_LEADER = 6
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC = 17


def run_until(producer: Any, clock: Any, done: Callable[[], bool], advance_ms: int = 10,
              limit: int = 500) -> None:
    for _ in range(limit):
        if done():
            return
        step(producer)
        clock.sleep(advance_ms)
    raise AssertionError("condition not reached")


def send(producer: Any, value: bytes, partition: int | None = 0, **kw: Any) -> Any:
    return producer.send(ProducerRecord("t", value, partition=partition, **kw))


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(nodes=2, topics={"t": 2})


def setup(cluster: FakeCluster, **config: Any) -> tuple[Any, Any, Any]:
    settings = {"linger.ms": 0, "enable.idempotence": False, "acks": "1", **config}
    producer, selector, clock = make_producer(cluster, settings)
    warm(producer, "t", clock)
    return producer, selector, clock


def test_records_arrive_with_offsets_and_metadata(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    futures = [send(producer, f"v{i}".encode(), key=b"k", headers=[("h", b"1")],
                    timestamp=1000 + i) for i in range(3)]
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    md = [f.get(0) for f in futures]
    assert [m.offset for m in md] == [0, 1, 2]
    assert [m.timestamp for m in md] == [1000, 1001, 1002]
    assert (md[0].serialized_key_size, md[0].serialized_value_size) == (1, 2)
    records = cluster.records(TP0)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (b"k", f"v{i}".encode(), (("h", b"1"),), 1000 + i) for i in range(3)]
    producer.close()


def test_linger_holds_a_batch_back(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"linger.ms": 50})
    future = send(producer, b"v")
    step(producer, 3)
    assert cluster.produce_requests() == []
    clock.sleep(49)
    step(producer)
    assert cluster.produce_requests() == []
    clock.sleep(1)
    step(producer, 2)
    assert len(cluster.produce_requests()) == 1 and future.done()
    producer.close()


def test_a_full_batch_goes_without_waiting_for_linger(cluster: FakeCluster) -> None:
    producer, _, _clock = setup(cluster, **{"linger.ms": 60_000, "batch.size": 1000})
    futures = [send(producer, b"x" * 100) for _ in range(12)]
    step(producer, 3)
    requests = cluster.produce_requests()
    assert len(requests) == 1
    sent = RecordBatch(requests[0][2].topic_data[0].partition_data[0].records)
    assert 0 < sent.records_count < 12
    assert sum(f.done() for f in futures) == sent.records_count  # the full batch only
    producer.close(0)


def test_acks_zero_completes_with_offset_minus_one(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, acks="0")
    future = send(producer, b"v")
    run_until(producer, clock, future.done)
    assert future.get(0).offset == -1
    assert cluster.values(TP0) == [b"v"]
    assert cluster.produce_requests()[0][2].acks == 0
    producer.close()


def test_retriable_error_is_retried_after_the_backoff(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"retry.backoff.ms": 100,
                                           "retry.backoff.max.ms": 100})
    cluster.fail_next[TP0].extend([NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS])
    future = send(producer, b"v")
    step(producer, 2)
    assert len(cluster.produce_requests()) == 1 and not future.done()
    clock.sleep(79)  # 100 ms with 20% jitter: never before 80
    step(producer, 2)
    assert len(cluster.produce_requests()) == 1
    run_until(producer, clock, future.done, advance_ms=5)
    assert len(cluster.produce_requests()) == 3
    assert future.get(0).offset == 0
    metrics = producer.metrics()["producer-metrics"]
    assert metrics["record-retry-total"] == 2 and metrics["record-error-total"] == 0
    producer.close()


def test_non_retriable_error_fails_the_records(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    cluster.fail_next[TP0].append(INVALID_TOPIC)
    seen: list = []
    future = producer.send(ProducerRecord("t", b"v", partition=0),
                           lambda md, e: seen.append((md.topic, md.partition, md.offset, e)))
    run_until(producer, clock, future.done)
    with pytest.raises(InvalidTopicError):
        future.get(0)
    assert seen[0][:3] == ("t", 0, -1) and isinstance(seen[0][3], InvalidTopicError)
    assert len(cluster.produce_requests()) == 1
    assert producer.metrics()["producer-metrics"]["record-error-total"] == 1
    producer.close()


def test_retries_run_out(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, retries=2)
    cluster.fail_next[TP0].extend([NOT_ENOUGH_REPLICAS] * 5)
    future = send(producer, b"v")
    run_until(producer, clock, future.done, advance_ms=50)
    with pytest.raises(NotEnoughReplicasError):
        future.get(0)
    assert len(cluster.produce_requests()) == 3  # the first try and two retries
    producer.close()


def test_delivery_timeout_expires_a_queued_batch(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"delivery.timeout.ms": 1000,
                                           "request.timeout.ms": 900, "linger.ms": 100})
    cluster.down.update({0, 1})
    for node_id in (0, 1):
        producer._client.disconnect(node_id)
    future = send(producer, b"v")
    run_until(producer, clock, future.done, advance_ms=50)
    with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
        future.get(0)
    producer.close(0)


def test_delivery_timeout_expires_an_in_flight_batch(cluster: FakeCluster) -> None:
    producer, selector, clock = setup(cluster, **{"delivery.timeout.ms": 1000,
                                                  "request.timeout.ms": 900})
    cluster.hold = True
    future = send(producer, b"v")
    step(producer, 2)
    assert selector.held == 1
    clock.sleep(999)
    step(producer)
    assert not future.done()
    clock.sleep(1)
    step(producer)
    with pytest.raises(KafkaTimeoutError, match="has passed since batch creation"):
        future.get(0)
    selector.release()
    step(producer, 2)  # the late answer is ignored
    producer.close(0)


def test_request_timeout_disconnects_and_retries(cluster: FakeCluster) -> None:
    producer, _selector, clock = setup(cluster, **{"request.timeout.ms": 500})
    cluster.hold = True
    future = send(producer, b"v")
    step(producer, 2)
    clock.sleep(501)
    step(producer)
    assert not future.done() and len(cluster.produce_requests()) == 1
    cluster.hold = False
    run_until(producer, clock, future.done, advance_ms=50)
    assert len(cluster.produce_requests()) == 2  # the retry after reconnecting
    assert future.get(0).offset in (0, 1)
    producer.close()


def test_request_timeout_without_retries_is_the_error(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"request.timeout.ms": 500, "retries": 0})
    cluster.hold = True
    future = send(producer, b"v")
    step(producer, 2)
    clock.sleep(501)
    step(producer, 2)
    with pytest.raises(RequestTimedOutError, match="due to timeout"):
        future.get(0)
    producer.close(0)


def test_disconnect_fails_in_flight_requests_retriably(cluster: FakeCluster) -> None:
    producer, selector, clock = setup(cluster, retries=0)
    cluster.hold = True
    future = send(producer, b"v")
    step(producer, 2)
    metadata_requests = sum(1 for r in cluster.requests if r[1] == "Metadata")
    selector.drop_connection(0)
    step(producer, 2)
    with pytest.raises(NetworkError, match="Disconnected from node 0"):
        future.get(0)
    clock.sleep(200)
    step(producer, 2)  # a disconnect may mean stale metadata: it is refreshed
    assert sum(1 for r in cluster.requests if r[1] == "Metadata") > metadata_requests
    producer.close(0)


def test_not_leader_refreshes_metadata_and_follows_the_leader(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    cluster.leaders["t"][0] = 1  # partition 0 moved from node 0 to node 1
    future = send(producer, b"v")
    run_until(producer, clock, future.done, advance_ms=20)
    nodes = [node for node, _, _ in cluster.produce_requests()]
    assert nodes[0] == 0 and nodes[-1] == 1
    assert future.get(0).offset == 0
    metadata_requests = [r for r in cluster.requests if r[1] == "Metadata"]
    assert len(metadata_requests) >= 2
    producer.close()


def test_in_flight_requests_are_limited_per_connection(cluster: FakeCluster) -> None:
    producer, selector, clock = setup(cluster, **{"max.in.flight.requests.per.connection": 2,
                                                  "batch.size": 200})
    cluster.hold = True
    futures = [send(producer, b"x" * 150) for _ in range(5)]
    step(producer, 10)
    assert selector.held == 2 and producer._client.in_flight_request_count(0) == 2
    selector.release(1)
    step(producer, 3)
    assert selector.held == 2 and len(cluster.produce_requests()) == 3
    cluster.hold = False
    selector.release()
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    assert [f.get(0).offset for f in futures] == [0, 1, 2, 3, 4]
    producer.close()


def test_retries_may_reorder_without_idempotence(cluster: FakeCluster) -> None:
    """Seed 002: retries > 0 and more than one request in flight can reorder."""
    producer, selector, clock = setup(cluster, **{"max.in.flight.requests.per.connection": 5})
    first, second = _two_in_flight_first_fails(producer, selector, cluster)
    assert selector.held == 2  # both requests went out before any answer came back
    cluster.hold = False
    selector.release()
    run_until(producer, clock, lambda: first.done() and second.done())
    assert cluster.values(TP0) == [b"second", b"first"]
    assert first.get(0).offset == 1 and second.get(0).offset == 0
    producer.close()


def _two_in_flight_first_fails(producer: Any, selector: Any, cluster: FakeCluster
                               ) -> tuple[Any, Any]:
    cluster.hold = True
    cluster.fail_next[TP0].append(NOT_ENOUGH_REPLICAS)  # the first request to arrive
    first = send(producer, b"first")
    step(producer)
    second = send(producer, b"second")
    step(producer)
    return first, second


def test_one_request_in_flight_keeps_the_order(cluster: FakeCluster) -> None:
    producer, selector, clock = setup(cluster, **{"max.in.flight.requests.per.connection": 1})
    first, second = _two_in_flight_first_fails(producer, selector, cluster)
    assert selector.held == 1  # the second waits for the first
    cluster.hold = False
    selector.release()
    run_until(producer, clock, lambda: first.done() and second.done())
    assert cluster.values(TP0) == [b"first", b"second"]
    producer.close()


def test_message_too_large_splits_the_batch(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"batch.size": 1000, "linger.ms": 1000})
    futures = [send(producer, b"x" * 40) for _ in range(18)]
    assert len(producer._accumulator.incomplete_batches()) == 1
    # a batch.size of 1000 holds them all; pretend the broker's limit is lower
    cluster.fail_next[TP0].append(MESSAGE_TOO_LARGE)
    producer._accumulator.batch_size = 300
    clock.sleep(1000)
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    assert [f.get(0).offset for f in futures] == list(range(18))
    assert len(cluster.batches[TP0]) >= 3
    assert producer.metrics()["producer-metrics"]["batch-split-total"] == 1
    producer.close()


def test_a_single_record_too_large_for_the_broker_fails(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    cluster.fail_next[TP0].append(MESSAGE_TOO_LARGE)
    future = send(producer, b"x" * 40)
    run_until(producer, clock, future.done)
    with pytest.raises(RecordTooLargeError):
        future.get(0)
    producer.close()


def test_metrics_after_a_few_requests(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"compression.type": "gzip"})
    futures = [send(producer, b"x" * 100) for _ in range(50)]
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    m = producer.metrics()["producer-metrics"]
    for name in ("record-send-rate", "record-error-rate", "record-retry-rate",
                 "batch-size-avg", "records-per-request-avg", "record-queue-time-avg",
                 "request-latency-avg", "request-latency-max", "buffer-available-bytes",
                 "compression-rate-avg"):
        assert name in m
    assert m["record-send-total"] == 50 and m["record-send-rate"] > 0
    assert m["records-per-request-avg"] >= 1 and m["batch-size-avg"] > 0
    assert 0 < m["compression-rate-avg"] < 1
    assert m["buffer-available-bytes"] == 33554432
    producer.close()


def test_close_sends_what_is_buffered(cluster: FakeCluster) -> None:
    producer, _selector, _clock = setup(cluster, **{"linger.ms": 60_000})
    future = send(producer, b"v")
    producer._sender.initiate_close()
    step(producer, 3)
    assert future.get(0).offset == 0


def test_force_close_aborts_what_is_left(cluster: FakeCluster) -> None:
    producer, selector, _clock = setup(cluster, **{"linger.ms": 60_000})
    future = send(producer, b"v")
    producer._sender.force_close()
    producer._sender.run()  # returns at once: forced
    with pytest.raises(Exception, match="closed forcefully"):
        future.get(0)
    assert selector.closed
