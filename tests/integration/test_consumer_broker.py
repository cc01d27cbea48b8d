"""The millrace consumer against a real ``millrace broker`` process; data produced with
librdkafka (confluent-kafka).

Assign and subscribe consumption, two millrace consumers sharing a group (no partition
owned twice, rebalance when one closes), commits surviving a consumer restart,
auto.offset.reset, seek / offsets_for_times / beginning and end offsets, pause/resume,
max.poll.interval.ms, wakeup, and a millrace and a librdkafka consumer in the same group.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.client.consumer import (
    CommitFailedError,
    ConsumerRebalanceListener,
    KafkaConsumer,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    TopicPartition,
    WakeupError,
)
from millrace.testing.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

FAST_GROUP = {"heartbeat_interval_ms": 300, "session_timeout_ms": 6000}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("consumer-broker")
    with BrokerProcess(data) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: BrokerProcess, partitions: int) -> str:
    name = unique("t")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(15)
    return name


def produce(broker: BrokerProcess, topic: str, n: int, partitions: int, start: int = 0,
            timestamp: Callable[[int], int] | None = None) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions,
                  timestamp=timestamp(i) if timestamp else 0, headers=[("i", str(i).encode())])
    assert p.flush(20) == 0


def consumer(broker: BrokerProcess, *topics: str, **config: Any) -> KafkaConsumer[Any, Any]:
    return KafkaConsumer(*topics, bootstrap_servers=broker.bootstrap, **config)


def drain(c: KafkaConsumer[Any, Any], n: int, timeout: float = 15.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(200))
    return out


class Owners(ConsumerRebalanceListener):
    """Tracks what each member owns; fails if two members ever own one partition."""

    shared: dict[TopicPartition, str]

    def __init__(self, name: str, shared: dict[TopicPartition, str]) -> None:
        self.name = name
        self.shared = shared
        self.lost: list[TopicPartition] = []

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            owner = self.shared.get(tp)
            assert owner is None, f"{tp} assigned to {self.name} while {owner} owns it"
            self.shared[tp] = self.name

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            assert self.shared.pop(tp) == self.name

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        self.lost.extend(partitions)
        for tp in partitions:
            if self.shared.get(tp) == self.name:
                del self.shared[tp]


def test_assign_consumes_everything_in_order(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 3)
    produce(broker, topic, 600, 3)
    with consumer(broker, auto_offset_reset="earliest", max_poll_records=100) as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        records = drain(c, 600)
        assert len(records) == 600
        for p in range(3):
            offsets = [r.offset for r in records if r.partition == p]
            assert offsets == list(range(200))
            assert c.position(TopicPartition(topic, p)) == 200
        first = next(r for r in records if r.partition == 0)
        assert (first.key, first.value, first.topic) == (b"k0", b"v0", topic)
        assert first.headers == (("i", b"0"),)
        assert first.timestamp > 0 and first.serialized_value_size == 2
        assert first.leader_epoch == 0
        assert c.poll(100).is_empty()
        metrics = c.metrics()
        fetch = metrics["consumer-fetch-manager-metrics"]
        assert fetch["records-consumed-total"] == 600 and fetch["fetch-total"] >= 1
        assert metrics["consumer-coordinator-metrics"]["assigned-partitions"] == 3
        assert [p.partition for p in c.partitions_for(topic)] == [0, 1, 2]
        assert topic in c.list_topics()
        assert "__consumer_offsets" not in c.list_topics()


def test_subscribe_with_a_group_consumes_and_commits(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 4)
    produce(broker, topic, 400, 4)
    group = unique("g")
    with consumer(broker, topic, group_id=group, auto_offset_reset="earliest",
                  key_deserializer="str", value_deserializer=bytes.decode) as c:
        records = drain(c, 400)
        assert sorted(int(r.key[1:]) for r in records) == list(range(400))
        assert records[0].value.startswith("v")
        assert c.assignment() == {TopicPartition(topic, p) for p in range(4)}
    # close() auto-committed the positions
    with consumer(broker, group_id=group) as c:
        committed = c.committed([TopicPartition(topic, p) for p in range(4)])
        assert {tp.partition: om.offset for tp, om in committed.items() if om} == \
            {0: 100, 1: 100, 2: 100, 3: 100}


def test_two_members_split_partitions_and_take_over_on_close(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 6)
    group = unique("g")
    owners: dict[TopicPartition, str] = {}
    config = {"group_id": group, "auto_offset_reset": "earliest", **FAST_GROUP}
    a = consumer(broker, **config)
    b = consumer(broker, **config)
    a.subscribe([topic], Owners("a", owners))
    b.subscribe([topic], Owners("b", owners))
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            a.poll(50)
            b.poll(50)
            assert not a.assignment() & b.assignment()
            if len(a.assignment()) == len(b.assignment()) == 3:
                break
        assert len(a.assignment()) == len(b.assignment()) == 3
        produce(broker, topic, 600, 6)
        seen: dict[str, list[Any]] = {"a": [], "b": []}
        deadline = time.monotonic() + 15
        while len(seen["a"]) + len(seen["b"]) < 600 and time.monotonic() < deadline:
            seen["a"].extend(a.poll(50))
            seen["b"].extend(b.poll(50))
        keys = [r.key for r in seen["a"] + seen["b"]]
        assert len(keys) == 600 and len(set(keys)) == 600, "every record exactly once"
        assert {r.partition for r in seen["a"]} == {tp.partition for tp in a.assignment()}
        a.close()
        deadline = time.monotonic() + 15
        while len(b.assignment()) < 6 and time.monotonic() < deadline:
            b.poll(100)
        assert b.assignment() == {TopicPartition(topic, p) for p in range(6)}
        assert set(owners.values()) == {"b"}
        produce(broker, topic, 60, 6, start=600)
        assert len(drain(b, 60)) == 60, "b continues from a's committed offsets"
    finally:
        a.close()
        b.close()


def test_pattern_subscription_follows_new_topics(broker: BrokerProcess) -> None:
    prefix = unique("pat")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(f"{prefix}.a", 1, 1)]).values():
        f.result(15)
    with consumer(broker, group_id=unique("g"), auto_offset_reset="earliest",
                  metadata_max_age_ms=500, **FAST_GROUP) as c:
        c.subscribe(f"^{prefix}\\..*")
        deadline = time.monotonic() + 10
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(100)
        assert c.assignment() == {TopicPartition(f"{prefix}.a", 0)}
        for f in admin.create_topics([NewTopic(f"{prefix}.b", 2, 1)]).values():
            f.result(15)
        deadline = time.monotonic() + 15
        while len(c.assignment()) < 3 and time.monotonic() < deadline:
            c.poll(100)
        assert c.subscription() == {f"{prefix}.a", f"{prefix}.b"}
        assert len(c.assignment()) == 3


def test_committed_offsets_survive_a_restart(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 1)
    tp = TopicPartition(topic, 0)
    produce(broker, topic, 100, 1)
    group = unique("g")
    with consumer(broker, topic, group_id=group, enable_auto_commit=False,
                  auto_offset_reset="earliest", max_poll_records=30) as c:
        first = drain(c, 1)
        upto = first[-1].offset + 1
        c.commit_sync({tp: OffsetAndMetadata(upto, "half way")})
        assert c.committed(tp)[tp] == OffsetAndMetadata(upto, "half way", None)
    with consumer(broker, topic, group_id=group, enable_auto_commit=False,
                  auto_offset_reset="earliest") as c:
        assert c.committed([tp])[tp].offset == upto
        rest = drain(c, 100 - upto)
        assert [r.offset for r in rest] == list(range(upto, 100))
        done: list[Any] = []
        c.commit_async(callback=lambda offsets, error: done.append((offsets, error)))
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            c.poll(50)
        assert done and done[0][1] is None and done[0][0][tp].offset == 100


def test_auto_offset_reset(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 1)
    tp = TopicPartition(topic, 0)
    produce(broker, topic, 10, 1)
    with consumer(broker, topic, group_id=unique("g"), auto_offset_reset="earliest") as c:
        assert drain(c, 1)[0].offset == 0
    with consumer(broker, topic, group_id=unique("g"), auto_offset_reset="latest") as c:
        deadline = time.monotonic() + 10
        while c.assignment() != {tp} or c.position(tp) != 10:
            assert c.poll(100).is_empty()
            assert time.monotonic() < deadline
        produce(broker, topic, 1, 1, start=10)
        assert [r.offset for r in drain(c, 1)] == [10]
    with consumer(broker, topic, group_id=unique("g"), auto_offset_reset="none") as c, \
            pytest.raises(NoOffsetForPartitionError) as e:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            c.poll(100)
    assert e.value.partitions == {tp}


def test_seek_and_offset_lookups(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 1)
    tp = TopicPartition(topic, 0)
    base = int(time.time() * 1000) - 60_000
    produce(broker, topic, 20, 1, timestamp=lambda i: base + 1000 * i)
    with consumer(broker) as c:
        c.assign([tp])
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 20}
        found = c.offsets_for_times({tp: base + 7500})
        assert found[tp] is not None and found[tp].offset == 8
        assert found[tp].timestamp == base + 8000
        assert c.offsets_for_times({tp: base + 10**9})[tp] is None
        c.seek(tp, 15)
        assert [r.offset for r in drain(c, 5)] == [15, 16, 17, 18, 19]
        c.seek_to_beginning([tp])
        assert c.position(tp) == 0
        assert drain(c, 1)[0].offset == 0
        c.seek_to_end()
        assert c.position(tp) == 20


def test_pause_and_resume(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 2)
    produce(broker, topic, 40, 2)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer(broker, auto_offset_reset="earliest") as c:
        c.assign([t0, t1])
        c.pause([t1])
        assert c.paused() == {t1}
        records = drain(c, 20)
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            records.extend(c.poll(100))
        assert {r.partition for r in records} == {0} and len(records) == 20
        c.resume([t1])
        assert {r.partition for r in drain(c, 20)} == {1}


def test_max_poll_interval_exceeded_leaves_and_rejoins(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 2)
    listener = Owners("slow", {})
    with consumer(broker, group_id=unique("g"), max_poll_interval_ms=1500,
                  auto_offset_reset="earliest", **FAST_GROUP) as c:
        c.subscribe([topic], listener)
        deadline = time.monotonic() + 10
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(100)
        assert len(c.assignment()) == 2
        time.sleep(2.5)  # "processing" longer than max.poll.interval.ms
        with pytest.raises(CommitFailedError):
            c.commit_sync()
        deadline = time.monotonic() + 10
        while not (listener.lost and len(c.assignment()) == 2) and \
                time.monotonic() < deadline:
            c.poll(100)
        assert sorted(listener.lost) == sorted(TopicPartition(topic, p) for p in range(2))
        assert len(c.assignment()) == 2


def test_wakeup_interrupts_a_blocking_poll(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 1)
    with consumer(broker) as c:
        c.assign([TopicPartition(topic, 0)])
        timer = threading.Timer(0.3, c.wakeup)
        timer.start()
        started = time.monotonic()
        with pytest.raises(WakeupError):
            c.poll(10_000)
        assert time.monotonic() - started < 5
        timer.join()
        assert c.poll(10).is_empty()


@pytest.mark.parametrize("first", ["millrace", "librdkafka"])
def test_millrace_and_librdkafka_share_a_group(broker: BrokerProcess, first: str) -> None:
    topic = create_topic(broker, 4)
    group = unique("g")
    ours = consumer(broker, group_id=group, auto_offset_reset="earliest", **FAST_GROUP)
    theirs = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "partition.assignment.strategy": "range",
                       "auto.offset.reset": "earliest", "heartbeat.interval.ms": 300,
                       "session.timeout.ms": 6000})
    got: dict[str, list[tuple[int, int]]] = {"ours": [], "theirs": []}

    def poll_theirs() -> None:
        msg = theirs.poll(0.05)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got["theirs"].append((msg.partition(), msg.offset()))

    try:
        if first == "millrace":
            ours.subscribe([topic])
            ours.poll(500)
            theirs.subscribe([topic])
        else:
            theirs.subscribe([topic])
            poll_theirs()
            ours.subscribe([topic])
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            got["ours"].extend((r.partition, r.offset) for r in ours.poll(50))
            poll_theirs()
            mine = {tp.partition for tp in ours.assignment()}
            other = {tp.partition for tp in theirs.assignment()}
            if len(mine) == len(other) == 2 and not mine & other:
                break
        assert len(mine) == len(other) == 2 and mine | other == {0, 1, 2, 3}
        produce(broker, topic, 200, 4)
        deadline = time.monotonic() + 15
        while len(got["ours"]) + len(got["theirs"]) < 200 and time.monotonic() < deadline:
            got["ours"].extend((r.partition, r.offset) for r in ours.poll(50))
            poll_theirs()
        assert {p for p, _ in got["ours"]} == mine
        assert {p for p, _ in got["theirs"]} == other
        assert len(set(got["ours"]) | set(got["theirs"])) == 200
    finally:
        ours.close()
        theirs.close()
