"""send_traced against a real broker process: the journey's stages, and the record read back.

Each traced record is sent by our producer to ``millrace broker`` (a child process), then
read back by our consumer: the ``traceparent`` header it carries is the journey's, and
the journey's partition, node and offset agree with the RecordMetadata and with where the
consumer found the record.  Untraced records sent around it land as before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.client.cluster import TopicPartition
from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.producer._internals.built_in_partitioner import partition_for_key
from millrace.client.tracing import STAGES, RecordJourney, journey_context
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 3
# pairs that must be in this time order (one causes the other); the app thread's stages
# and the sender's can interleave only in ways these do not constrain
CAUSAL = [
    ("producer.interceptors", "producer.serialize"),
    ("producer.serialize", "producer.partition"),
    ("producer.partition", "accumulator.append"),
    ("accumulator.append", "batch.ready"),
    ("batch.ready", "sender.drain"),
    ("sender.drain", "request.sent"),
    ("request.sent", "response.received"),
    ("response.received", "producer.callback"),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("journey-broker")
    with BrokerProcess(data, overrides={"num.partitions": str(PARTITIONS)}) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


def read_back(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[Any]:
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(config={
        "bootstrap.servers": bootstrap, "enable.auto.commit": False,
        "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.poll(500))
        return out
    finally:
        consumer.close()


def check_journey(journey: RecordJourney, metadata: Any, acks: int, leader: Any) -> None:
    stages = journey.stages
    names = [s["stage"] for s in stages]
    assert sorted(names) == sorted(STAGES), names  # each stage exactly once
    by = {s["stage"]: s for s in stages}
    for before, after in CAUSAL:
        assert by[before]["t_us"] <= by[after]["t_us"], (before, after, stages)
    assert [s["lane"] for s in stages if s["stage"] in STAGES[:4]] == ["producer"] * 4
    assert [s["lane"] for s in stages if s["stage"] in STAGES[4:]] == ["sender"] * 5
    assert by["producer.partition"]["partition"] == metadata.partition
    assert by["sender.drain"]["node"] == by["request.sent"]["node"] == \
        by["response.received"]["node"] == leader.id
    assert by["request.sent"]["address"] == leader.address
    assert by["request.sent"]["acks"] == acks
    assert by["request.sent"]["correlation_id"] >= 0
    assert by["response.received"]["error"] == "NONE"
    assert by["response.received"]["offset"] == metadata.offset
    assert by["response.received"]["base_offset"] <= metadata.offset
    assert (journey.topic, journey.partition, journey.offset) == \
        (metadata.topic, metadata.partition, metadata.offset)
    assert journey.done.is_set() and journey.error is None
    # epoch microseconds, so they line up with the broker's clock on this host
    assert abs(by["request.sent"]["t_us"] / 1e6 - time.time()) < 120


@pytest.mark.parametrize("acks", ["1", "all"])
def test_traced_records_to_our_broker(broker: BrokerProcess, acks: str) -> None:
    topic = f"journey-{acks}-{uuid.uuid4().hex[:8]}"
    settings = {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": acks}
    callbacks: list[Any] = []
    with KafkaProducer(settings) as producer:
        before = producer.send(ProducerRecord(topic, b"untraced-before", partition=1))
        keyed = producer.send_traced(ProducerRecord(topic, b"keyed", key=b"the-key"),
                                     lambda m, e: callbacks.append(("keyed", m, e)))
        sticky = producer.send_traced(ProducerRecord(topic, b"sticky"))
        explicit = producer.send_traced(ProducerRecord(topic, b"explicit", partition=1))
        after = producer.send(ProducerRecord(topic, b"untraced-after", partition=1))
        traced = {"keyed": keyed, "sticky": sticky, "explicit": explicit}
        results = {name: (future.get(30), journey) for name, (future, journey) in
                   traced.items()}
        for _, journey in results.values():
            assert journey.wait(10)
        untraced = [before.get(30), after.get(30)]
        cluster = producer._metadata.fetch()
        leaders = {name: cluster.leader_for(metadata.topic_partition)
                   for name, (metadata, _) in results.items()}
    acks_value = 1 if acks == "1" else -1
    for name, (metadata, journey) in results.items():
        assert leaders[name].address == broker.bootstrap
        check_journey(journey, metadata, acks_value, leaders[name])
    reasons = {name: journey.stage("producer.partition")["reason"]  # type: ignore[index]
               for name, (_, journey) in results.items()}
    assert reasons == {"keyed": "key-hash", "sticky": "sticky", "explicit": "explicit"}
    assert results["keyed"][0].partition == partition_for_key(b"the-key", PARTITIONS)
    assert [c[0] for c in callbacks] == ["keyed"] and callbacks[0][1] == results["keyed"][0]
    # the untraced records around the explicit one, on its partition, in send order: the
    # keyed and the sticky record went between them when they landed there too
    between = sum(results[name][0].partition == 1 for name in ("keyed", "sticky"))
    assert results["explicit"][0].offset == untraced[0].offset + 1 + between
    assert untraced[1].offset == results["explicit"][0].offset + 1

    consumed = read_back(broker.bootstrap, topic, 5)
    assert len(consumed) == 5
    found = {(r.partition, r.offset): r for r in consumed}
    for metadata, journey in results.values():
        record = found[(metadata.partition, metadata.offset)]
        headers = dict(record.headers)
        assert headers["traceparent"] == journey.traceparent.encode()
        assert journey_context(record) == (journey.trace_id, journey.span_id)
    for metadata in untraced:
        assert found[(metadata.partition, metadata.offset)].headers == ()
    # three distinct traces: a journey is never another's
    assert len({j.trace_id for _, j in results.values()}) == 3


def test_a_traced_record_continues_the_trace_it_carries(broker: BrokerProcess) -> None:
    topic = f"journey-parent-{uuid.uuid4().hex[:8]}"
    parent = RecordJourney.start()
    with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as producer:
        future, journey = producer.send_traced(ProducerRecord(
            topic, b"v", partition=0, headers=[("traceparent", parent.traceparent.encode()),
                                               ("other", b"kept")]))
        metadata = future.get(30)
        assert journey.wait(10)
    assert (journey.trace_id, journey.parent_span_id) == (parent.trace_id, parent.span_id)
    assert journey.span_id != parent.span_id
    (record,) = read_back(broker.bootstrap, topic, 1)
    assert record.offset == metadata.offset
    assert list(record.headers) == [("other", b"kept"),
                                    ("traceparent", journey.traceparent.encode())]
