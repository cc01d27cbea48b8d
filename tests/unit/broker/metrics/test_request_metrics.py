"""Per-request metrics (``millrace.broker.metrics.request_metrics``): error counts walked
out of real response structs of ``millrace.protocol``, each phase of a handmade
``RequestTimes`` landing in its own histogram, the FetchConsumer / FetchFollower split
and how a Fetch is told to come from a replica (v12: ``replica_id``; v15+:
``replica_state``), decoded from the bytes a client sends."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.broker.metrics import request_metrics
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.request_metrics import (
    PHASES,
    RequestMetrics,
    RequestTimes,
    error_counts,
    error_name,
    is_follower_fetch,
)
from millrace.broker.metrics.yammer import Histogram, Meter
from millrace.common.errors import Errors
from millrace.protocol import API, ApiKey
from millrace.protocol.types import (
    FetchRequest,
    FetchResponse,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)

NOT_LEADER = Errors.NOT_LEADER_OR_FOLLOWER.value
PartitionProduce = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def produce_response(*codes_by_topic: list[int]) -> ProduceResponse:
    return ProduceResponse(responses=[
        ProduceResponse.TopicProduceResponse(name=f"t{i}", partition_responses=[
            PartitionProduce(index=p, error_code=code) for p, code in enumerate(codes)])
        for i, codes in enumerate(codes_by_topic)])


def wire(api: ApiKey, obj: Any, version: int, response: bool = True) -> Any:
    """``obj`` encoded at ``version`` and decoded back: what the broker really holds."""
    codec = API[api].response if response else API[api].request
    return codec.decode(codec.encode(obj, version), version)


# ----------------------------------------------------------------------- error counts
def test_a_produce_response_counts_each_partitions_error() -> None:
    body = wire(ApiKey.PRODUCE, produce_response([0, NOT_LEADER]), 9)
    assert error_counts(ApiKey.PRODUCE, 9, body) == {0: 1, NOT_LEADER: 1}


def test_errors_of_every_topic_and_partition_add_up() -> None:
    body = produce_response([0, 0, NOT_LEADER], [NOT_LEADER, 0], [])
    assert error_counts(ApiKey.PRODUCE, 9, body) == {0: 3, NOT_LEADER: 2}
    assert error_counts(ApiKey.PRODUCE, 9, produce_response()) == {}


def test_a_fetch_response_counts_its_top_level_error_and_each_partition() -> None:
    """As Kafka's ``FetchResponse.errorCounts``: the response's own error plus one per
    partition."""
    part = FetchResponse.FetchableTopicResponse.PartitionData
    body = FetchResponse(error_code=0, responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[part(partition_index=0, error_code=0),
                               part(partition_index=1, error_code=NOT_LEADER),
                               part(partition_index=2, error_code=NOT_LEADER)])])
    assert error_counts(ApiKey.FETCH, 12, wire(ApiKey.FETCH, body, 12)) == {0: 2, NOT_LEADER: 2}


def test_nested_errors_at_two_depths() -> None:
    unknown = Errors.UNKNOWN_TOPIC_OR_PARTITION.value
    leader = Errors.LEADER_NOT_AVAILABLE.value
    body = MetadataResponse(topics=[
        MetadataResponse.MetadataResponseTopic(name="a", error_code=unknown),
        MetadataResponse.MetadataResponseTopic(name="b", error_code=0, partitions=[
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                partition_index=0, error_code=leader)])])
    assert error_counts(ApiKey.METADATA, 12, wire(ApiKey.METADATA, body, 12)) == {
        unknown: 1, 0: 1, leader: 1}


def test_a_field_the_version_lacks_is_not_counted() -> None:
    """Metadata has a top-level ``error_code`` from v13 on, Fetch from v7 on: below
    those versions the struct holds its default 0, which is no response's NONE."""
    topic = MetadataResponse.MetadataResponseTopic(name="a", error_code=0)
    assert error_counts(ApiKey.METADATA, 12, MetadataResponse(topics=[topic])) == {0: 1}
    assert error_counts(ApiKey.METADATA, 13, MetadataResponse(topics=[topic])) == {0: 2}
    part = FetchResponse.FetchableTopicResponse.PartitionData
    body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[part(partition_index=0, error_code=NOT_LEADER)])])
    assert error_counts(ApiKey.FETCH, 6, body) == {NOT_LEADER: 1}
    assert error_counts(ApiKey.FETCH, 7, body) == {0: 1, NOT_LEADER: 1}


def test_no_body_or_raw_bytes_count_nothing() -> None:
    assert error_counts(ApiKey.PRODUCE, 9, None) == {}
    assert error_counts(ApiKey.FETCH, 12, b"\x00\x01") == {}


def test_error_names_are_kafkas() -> None:
    assert error_name(0) == "NONE"
    assert error_name(NOT_LEADER) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert error_name(31_000) == "UNKNOWN_SERVER_ERROR"  # a code Kafka does not know


# ----------------------------------------------------------------------- recording
def times(*, arrived: float = 100.0, queue_ms: float = 2.0, handler_ms: float = 40.0,
          remote_ms: float = 30.0, encode_ms: float = 1.5, send_ms: float = 4.0,
          throttle_ms: int = 0) -> RequestTimes:
    t = RequestTimes(arrived)
    t.dequeued = arrived + queue_ms / 1000
    t.remote_s = remote_ms / 1000
    t.handled = t.dequeued + handler_ms / 1000
    t.written = t.handled + encode_ms / 1000
    t.sent = t.written + send_ms / 1000
    t.throttle_ms = throttle_ms
    return t


def phase(registry: KafkaMetricsRegistry, name: str, request: str) -> Histogram:
    h = registry.find("kafka.network", "RequestMetrics", name, {"request": request})
    assert isinstance(h, Histogram), (name, request)
    return h


def meter(registry: KafkaMetricsRegistry, name: str, **tags: object) -> Meter:
    m = registry.find("kafka.network", "RequestMetrics", name, tags)
    assert isinstance(m, Meter), (name, tags)
    return m


def test_each_phase_lands_in_its_own_histogram() -> None:
    registry = KafkaMetricsRegistry()
    RequestMetrics(registry).record(ApiKey.PRODUCE, "Produce", 9, produce_response([0]),
                                    times(throttle_ms=7))
    expected = {"RequestQueueTimeMs": 2.0,
                "LocalTimeMs": 10.0,  # 40 ms in the handler, 30 of them parked
                "RemoteTimeMs": 30.0,
                "ThrottleTimeMs": 7.0,
                "ResponseQueueTimeMs": 1.5,
                "ResponseSendTimeMs": 4.0,
                "TotalTimeMs": 47.5}
    assert set(expected) == set(PHASES)
    for name, ms in expected.items():
        h = phase(registry, name, "Produce")
        assert h.count == 1, name
        assert h.sum == pytest.approx(ms, abs=1e-6), name
    # negative control: the phases are distinct values, so a swap would be seen
    assert len(set(expected.values())) == len(expected)


def test_a_request_that_never_parked_is_all_local() -> None:
    registry = KafkaMetricsRegistry()
    RequestMetrics(registry).record(ApiKey.PRODUCE, "Produce", 9, produce_response([0]),
                                    times(remote_ms=0.0, handler_ms=12.0))
    assert phase(registry, "LocalTimeMs", "Produce").sum == pytest.approx(12.0)
    assert phase(registry, "RemoteTimeMs", "Produce").sum == 0.0


def test_no_response_written_acks_0() -> None:
    """A produce with acks=0 is never answered: no written instant, sent when the
    worker finished; the time after the handler is all ResponseSendTimeMs (zero queue)."""
    registry = KafkaMetricsRegistry()
    t = times(remote_ms=0.0)
    t.written = 0.0
    t.sent = t.handled + 0.003
    RequestMetrics(registry).record(ApiKey.PRODUCE, "Produce", 3, None, t)
    assert phase(registry, "ResponseQueueTimeMs", "Produce").sum == 0.0
    assert phase(registry, "ResponseSendTimeMs", "Produce").sum == pytest.approx(3.0)
    assert phase(registry, "TotalTimeMs", "Produce").sum == pytest.approx(45.0)
    assert meter(registry, "RequestsPerSec", request="Produce", version=3).count == 1
    assert not any(n.name == "ErrorsPerSec" for n in registry.metrics)


def test_park_and_wake_sum_the_remote_time(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [10.0]
    monkeypatch.setattr(request_metrics, "clock", lambda: now[0])
    t = RequestTimes(10.0)
    t.wake()  # not parked: nothing
    assert t.remote_s == 0.0
    t.park()
    now[0] = 10.25
    t.wake()
    t.wake()  # woken twice counts once
    now[0] = 11.0
    t.park()
    now[0] = 11.5
    t.wake()
    assert t.remote_s == pytest.approx(0.75)


def test_rates_per_version_and_errors_per_code() -> None:
    registry = KafkaMetricsRegistry()
    metrics = RequestMetrics(registry)
    for version in (9, 9, 10):
        metrics.record(ApiKey.PRODUCE, "Produce", version,
                       produce_response([0, NOT_LEADER], [0]), times())
    assert meter(registry, "RequestsPerSec", request="Produce", version=9).count == 2
    assert meter(registry, "RequestsPerSec", request="Produce", version=10).count == 1
    assert meter(registry, "ErrorsPerSec", request="Produce", error="NONE").count == 6
    assert meter(registry, "ErrorsPerSec", request="Produce",
                 error="NOT_LEADER_OR_FOLLOWER").count == 3
    assert phase(registry, "TotalTimeMs", "Produce").count == 3


def fetch_request(version: int, replica: int) -> Any:
    """A Fetch as the broker decodes it: a replica's id in ``replica_id`` before v15,
    in ``replica_state`` since."""
    if version >= 15:
        body = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=replica,
                                                                    replica_epoch=3))
    else:
        body = FetchRequest(replica_id=replica)
    return wire(ApiKey.FETCH, body, version, response=False)


@pytest.mark.parametrize(("version", "replica", "follower"), [
    (12, 1, True), (12, 0, True), (12, -1, False),
    (15, 2, True), (15, -1, False), (17, 0, True), (17, -1, False),
    (4, 3, True), (4, -1, False),
])
def test_a_replicas_fetch_is_told_from_a_consumers(version: int, replica: int,
                                                   follower: bool) -> None:
    assert is_follower_fetch(ApiKey.FETCH, fetch_request(version, replica)) is follower


def test_a_v15_fetch_has_no_replica_id_field_on_the_wire() -> None:
    """Negative control for the v15 case: the id set in ``replica_id`` of a v15 request
    does not reach the broker, so only ``replica_state`` can tell a follower."""
    body = wire(ApiKey.FETCH, FetchRequest(replica_id=2), 15, response=False)
    assert body.replica_id == -1
    assert is_follower_fetch(ApiKey.FETCH, body) is False


def test_other_apis_are_not_fetches() -> None:
    assert is_follower_fetch(ApiKey.PRODUCE, ProduceRequest()) is None


def test_fetches_are_recorded_under_fetch_and_their_kind() -> None:
    registry = KafkaMetricsRegistry()
    metrics = RequestMetrics(registry)
    metrics.record(ApiKey.FETCH, "Fetch", 12, None, times(remote_ms=5.0),
                   follower=is_follower_fetch(ApiKey.FETCH, fetch_request(12, 1)))
    for _ in range(2):
        metrics.record(ApiKey.FETCH, "Fetch", 15, None, times(remote_ms=20.0),
                       follower=is_follower_fetch(ApiKey.FETCH, fetch_request(15, -1)))
    assert phase(registry, "TotalTimeMs", "Fetch").count == 3
    assert phase(registry, "TotalTimeMs", "FetchFollower").count == 1
    assert phase(registry, "TotalTimeMs", "FetchConsumer").count == 2
    assert phase(registry, "RemoteTimeMs", "FetchFollower").sum == pytest.approx(5.0)
    assert phase(registry, "RemoteTimeMs", "FetchConsumer").sum == pytest.approx(40.0)
    # Kafka marks the request rate under the split names too (RequestChannel)
    assert meter(registry, "RequestsPerSec", request="Fetch", version=12).count == 1
    assert meter(registry, "RequestsPerSec", request="Fetch", version=15).count == 2
    assert meter(registry, "RequestsPerSec", request="FetchFollower", version=12).count == 1
    assert meter(registry, "RequestsPerSec", request="FetchConsumer", version=15).count == 2
    # a Produce is never split
    metrics.record(ApiKey.PRODUCE, "Produce", 9, None, times())
    assert phase(registry, "TotalTimeMs", "FetchConsumer").count == 2
