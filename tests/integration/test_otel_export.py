"""export_journey through the real OTLP/HTTP exporter to a real (tiny) OTLP receiver.

The receiver is an aiohttp server on loopback answering POST /v1/traces the way a
collector does; it decodes each body with OpenTelemetry's own protobuf classes.  The
journey comes from a real traced send to a broker process, so the span checked here is
the one the record's ``traceparent`` header names.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1 import trace_pb2

from millrace.client.consumer import KafkaConsumer
from millrace.client.otel import export_journey, journey_tracer_provider
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.tracing import RecordJourney
from millrace.testing.broker_process import BrokerProcess
from tests.integration.otlp_receiver import OtlpReceiver, attributes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("otel-broker")
    with BrokerProcess(data, overrides={"num.partitions": "2"}) as b:
        yield b


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


def traced_send(broker: BrokerProcess, topic: str, partition: int,
                headers: list[tuple[str, bytes]] | None = None) -> tuple[Any, RecordJourney]:
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "client.id": "otel-test"}) \
            as producer:
        future, journey = producer.send_traced(
            ProducerRecord(topic, b"v", partition=partition, headers=headers))
        metadata = future.get(30)
        assert journey.wait(10)
    return metadata, journey


def test_a_journey_arrives_as_the_producer_span_its_header_names(
        broker: BrokerProcess, receiver: OtlpReceiver) -> None:
    topic = f"otel-{uuid.uuid4().hex[:8]}"
    metadata, journey = traced_send(broker, topic, 1)
    _, other = traced_send(broker, topic, 0)  # the negative control: another record
    provider = journey_tracer_provider(OTLPSpanExporter(endpoint=receiver.endpoint),
                                       service_name="otel-test", batch=False)
    broker_events = [{"t_us": journey.stages[5]["t_us"] + 10, "stage": "leader.append",
                      "broker": 0, "detail": f"offset {metadata.offset}", "duration_us": 20}]
    try:
        export_journey(journey, broker_events, provider)
        export_journey(other, (), provider)
    finally:
        provider.shutdown()
    assert receiver.requests and set(receiver.content_types) == {"application/x-protobuf"}

    spans = receiver.spans_of(journey.trace_id)
    producer_spans = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_PRODUCER]
    assert len(producer_spans) == 1
    span = producer_spans[0]
    assert span.name == f"send {topic}"
    assert span.span_id.hex() == journey.span_id and span.parent_span_id == b""
    assert f"00-{span.trace_id.hex()}-{span.span_id.hex()}-01" == journey.traceparent
    host, port = broker.bootstrap.split(":")
    assert attributes(span) == {
        "messaging.system": "kafka", "messaging.destination.name": topic,
        "messaging.destination.partition.id": "1", "messaging.kafka.offset": metadata.offset,
        "messaging.client.id": "otel-test", "messaging.operation.type": "send",
        "messaging.operation.name": "send", "server.address": host, "server.port": int(port)}
    assert [e.name for e in span.events] == [s["stage"] for s in journey.stages]
    assert [e.time_unix_nano for e in span.events] == [s["t_us"] * 1000 for s in journey.stages]
    assert span.start_time_unix_nano == journey.stages[0]["t_us"] * 1000
    assert span.end_time_unix_nano >= span.events[-1].time_unix_nano
    assert span.status.code != trace_pb2.Status.STATUS_CODE_ERROR
    (child,) = [s for s in spans if s is not span]
    assert child.name == "broker leader.append" and child.parent_span_id == span.span_id
    assert child.kind == trace_pb2.Span.SPAN_KIND_INTERNAL
    assert attributes(child)["millrace.broker.id"] == 0
    assert child.end_time_unix_nano - child.start_time_unix_nano == 20_000

    # the other journey: its own trace, its own span; neither is mistaken for the other
    others = receiver.spans_of(other.trace_id)
    assert other.trace_id != journey.trace_id
    assert [s.span_id.hex() for s in others] == [other.span_id]
    assert attributes(others[0])["messaging.destination.partition.id"] == "0"
    assert journey.span_id not in {s.span_id.hex() for s in others}


def test_a_continued_trace_exports_under_its_parent_and_failures_carry_error_type(
        broker: BrokerProcess, receiver: OtlpReceiver) -> None:
    topic = f"otel-parent-{uuid.uuid4().hex[:8]}"
    parent = RecordJourney.start()
    _, child = traced_send(broker, topic, 0, [("traceparent", parent.traceparent.encode())])
    failed = RecordJourney.start()
    failed.topic, failed.partition = topic, 0
    failed.add("producer.partition", 1_000, lane="producer", partition=0, reason="explicit")
    failed.add("response.received", 2_000, lane="sender", error="NOT_ENOUGH_REPLICAS")
    failed.add("producer.callback", 2_010, lane="sender", error="NotEnoughReplicasError",
               detail="NotEnoughReplicasError: not enough")
    failed.error = "NotEnoughReplicasError"
    failed.finish()
    provider = journey_tracer_provider(OTLPSpanExporter(endpoint=receiver.endpoint),
                                       batch=False)
    try:
        export_journey(child, (), provider)
        export_journey(failed, (), provider)
    finally:
        provider.shutdown()
    (span,) = receiver.spans_of(parent.trace_id)
    assert span.parent_span_id.hex() == parent.span_id == child.parent_span_id
    assert span.span_id.hex() == child.span_id
    (bad,) = receiver.spans_of(failed.trace_id)
    assert attributes(bad)["error.type"] == "NOT_ENOUGH_REPLICAS"
    assert bad.status.code == trace_pb2.Status.STATUS_CODE_ERROR
    assert "messaging.kafka.offset" not in attributes(bad)


def test_a_consumer_interceptor_links_its_poll_to_the_records_it_returned(
        broker: BrokerProcess, receiver: OtlpReceiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """interceptor.classes=...TracingConsumerInterceptor: a poll span linked to each traced
    record's creation context, a commit span under it once a commit covers them; a topic
    whose records carry no traceparent gets no span (the negative control)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
    topic, plain = f"otel-c-{uuid.uuid4().hex[:8]}", f"otel-p-{uuid.uuid4().hex[:8]}"
    first_meta, first = traced_send(broker, topic, 0)
    second_meta, second = traced_send(broker, topic, 0)
    with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send(ProducerRecord(plain, b"untraced", partition=0)).get(30)
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "otel-group",
        "client.id": "otel-consumer", "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "interceptor.classes": "millrace.client.otel.TracingConsumerInterceptor"})
    try:
        consumer.subscribe([topic, plain])
        seen: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while (seen.get(topic, 0) < 2 or not seen.get(plain)) and time.monotonic() < deadline:
            for record in consumer.poll(500):
                seen[record.topic] = seen.get(record.topic, 0) + 1
        assert seen == {topic: 2, plain: 1}
        consumer.commit_sync()
    finally:
        consumer.close()   # flushes the interceptor's exporter

    spans = receiver.spans()
    polls = [s for s in spans if s.name == f"poll {topic}"]
    assert polls and all(s.kind == trace_pb2.Span.SPAN_KIND_CLIENT for s in polls)
    links = {(link.trace_id.hex(), link.span_id.hex()) for s in polls for link in s.links}
    assert links == {(first.trace_id, first.span_id), (second.trace_id, second.span_id)}
    assert {attributes(s)["messaging.consumer.group.name"] for s in polls} == {"otel-group"}
    assert {attributes(s)["messaging.operation.name"] for s in polls} == {"poll"}
    commits = [s for s in spans if s.name == f"commit {topic}"]
    assert {s.parent_span_id for s in commits} == {s.span_id for s in polls}
    assert {attributes(s)["messaging.kafka.offset"] for s in commits} == \
        {second_meta.offset + 1}
    assert first_meta.offset < second_meta.offset
    assert not [s for s in spans if plain in s.name]
