"""Consumer groups shared between millrace and other clients, on our broker.

* Committed offsets are one currency: a group's offsets committed by the millrace
  consumer are where ``kcat -G`` (librdkafka) and a kafka-python consumer resume, and
  what they commit is where millrace resumes -- a relay through one group, each client
  reading a slice and committing it.
* A mixed group (two millrace consumers with ``range``, two confluent-kafka consumers with
  ``partition.assignment.strategy=range``) splits the partitions: disjoint, complete, in
  the contiguous blocks the range assignor gives, whichever client leads the group; the
  broker's DescribeGroups shows the same assignment, and each member reads exactly its
  partitions.  (tests/integration/test_consumer_broker.py covers one member of each.)
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from millrace.client.admin import ConsumerGroupState, KafkaAdminClient, NewTopic
from millrace.client.consumer import KafkaConsumer, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

pytestmark = [pytest.mark.compat, pytest.mark.integration]

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
WAIT = 60.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create_topic(broker: BrokerProcess, partitions: int) -> str:
    topic = unique("interop")
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                          default_api_timeout_ms=15_000) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)]).all()
    return topic


def produce(broker: BrokerProcess, topic: str, partitions: int, records: int) -> None:
    """Record i (value ``v<i>``) goes to partition ``i % partitions``."""
    producer: Any = KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    with producer:
        for i in range(records):
            producer.send(ProducerRecord(topic, f"v{i}".encode(), partition=i % partitions))
        producer.flush(30)


def committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                          default_api_timeout_ms=15_000) as admin:
        return {tp.partition: o.offset
                for tp, o in admin.list_group_offsets(group, include_lag=False).items()}


def until(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")


# ---------------------------------------------------------------------- one client each
def millrace_reads(broker: BrokerProcess, topic: str, group: str, n: int) -> list[int]:
    """Read ``n`` records of partition 0 in ``group``, commit after them, leave."""
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=300)
    offsets: list[int] = []
    try:
        def more() -> bool:
            offsets.extend(r.offset for r in consumer.poll(200))
            return len(offsets) >= n

        until("millrace to read", more)
        consumer.commit_sync({TopicPartition(topic, 0): offsets[n - 1] + 1})
    finally:
        consumer.close()
    return offsets[:n]


def kcat_reads(broker: BrokerProcess, topic: str, group: str, n: int) -> list[int]:
    """``kcat -G``: a balanced consumer that commits what it printed when it exits."""
    if KCAT is None:
        pytest.fail("kcat is not installed: scripts/test.sh installs Debian's kcat package")
    done = subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-G", group, topic, "-c", str(n), "-f", "%o\n",
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000"],
        capture_output=True, timeout=WAIT, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return [int(line) for line in done.stdout.decode().split()]


def kafka_python_reads(broker: BrokerProcess, topic: str, group: str, n: int) -> list[int]:
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                   enable_auto_commit=False, auto_offset_reset="earliest",
                                   max_poll_records=n, session_timeout_ms=6000,
                                   heartbeat_interval_ms=300)
    offsets: list[int] = []
    try:
        def more() -> bool:
            for batch in consumer.poll(timeout_ms=200, max_records=n - len(offsets)).values():
                offsets.extend(r.offset for r in batch)
            return len(offsets) >= n

        until("kafka-python to read", more)
        consumer.commit()  # the positions: one past what poll returned
    finally:
        consumer.close()
    return offsets


READERS = {"millrace": millrace_reads, "kcat": kcat_reads, "kafka-python": kafka_python_reads}


@pytest.mark.parametrize("relay", [
    ["millrace", "kcat", "millrace"],
    ["millrace", "kafka-python", "millrace"],
    ["kcat", "millrace", "kafka-python", "millrace"],
], ids="->".join)
def test_committed_offsets_are_honoured_across_clients(broker: BrokerProcess,
                                                       relay: list[str]) -> None:
    topic, group = create_topic(broker, 1), unique("relay")
    produce(broker, topic, 1, 100)
    position = 0
    for step, client in enumerate(relay):
        n = 5 + step
        offsets = READERS[client](broker, topic, group, n)
        assert offsets == list(range(position, position + n)), (client, offsets)
        position += n
        assert committed(broker, group) == {0: position}, client


# ---------------------------------------------------------------------- a mixed group
@pytest.mark.parametrize("leader", ["millrace", "librdkafka"])
def test_mixed_group_splits_partitions(broker: BrokerProcess, leader: str) -> None:
    partitions, records = 8, 400
    topic, group = create_topic(broker, partitions), unique("mixed")
    ours: list[KafkaConsumer[bytes, bytes]] = [KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                          client_id=f"millrace-{i}", partition_assignment_strategy="range",
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          session_timeout_ms=6000, heartbeat_interval_ms=300)
            for i in range(2)]
    theirs = [confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "client.id": f"librdkafka-{i}", "partition.assignment.strategy": "range",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, **FAST_GROUP})
        for i in range(2)]
    names = ["millrace-0", "millrace-1", "librdkafka-0", "librdkafka-1"]
    got: dict[str, list[tuple[int, int]]] = {name: [] for name in names}

    joined: list[Any] = []

    def poll_all() -> None:
        for name, c in zip(names[:2], ours, strict=True):
            if c in joined:
                got[name].extend((r.partition, r.offset) for r in c.poll(20))
        for name, c in zip(names[2:], theirs, strict=True):
            msg = c.poll(0.02) if c in joined else None
            if msg is not None:
                assert msg.error() is None, msg.error()
                got[name].append((msg.partition(), msg.offset()))

    def assignments() -> dict[str, set[int]]:
        out = {name: {tp.partition for tp in c.assignment()}
               for name, c in zip(names[:2], ours, strict=True)}
        out.update({name: {tp.partition for tp in c.assignment()}
                    for name, c in zip(names[2:], theirs, strict=True)})
        return out

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, default_api_timeout_ms=15_000)
    try:
        # the first to join leads the group and runs the assignment
        first, rest = (ours[0], [ours[1]]) if leader == "millrace" else (theirs[0], [theirs[1]])
        first.subscribe([topic])
        joined.append(first)
        def first_owns_all() -> bool:
            poll_all()
            return sum(map(len, assignments().values())) == partitions

        until("the first member to own every partition", first_owns_all)
        for c in [*rest, *(theirs if leader == "millrace" else ours)]:
            c.subscribe([topic])
            joined.append(c)

        def split() -> bool:
            poll_all()
            owned = assignments()
            return all(len(p) == 2 for p in owned.values()) and \
                set().union(*owned.values()) == set(range(partitions))

        until("four members sharing the partitions", split)
        owned = assignments()
        assert sorted(sorted(p) for p in owned.values()) == [[0, 1], [2, 3], [4, 5], [6, 7]]
        description = admin.describe_groups([group]).all()[group]
        assert description.state is ConsumerGroupState.STABLE
        assert description.partition_assignor == "range"
        by_client = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
                     for m in description.members}
        assert by_client == owned

        produce(broker, topic, partitions, records)
        def read_all() -> bool:
            poll_all()
            return sum(map(len, got.values())) >= records

        until("every record read", read_all)
        for name, read in got.items():
            assert {p for p, _ in read} <= owned[name], name
        everything = [pair for read in got.values() for pair in read]
        assert len(everything) == len(set(everything)) == records
    finally:
        for c in ours:
            c.close()
        for c in theirs:
            c.close()
        admin.close()
