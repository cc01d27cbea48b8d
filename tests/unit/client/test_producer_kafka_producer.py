"""KafkaProducer: configuration rules, serializers, interceptors, blocking, the thread."""

from __future__ import annotations

import json
import logging
import re
import struct
import threading
import time
from typing import Any

import pytest

from millrace.client.cluster import Cluster, TopicPartition
from millrace.client.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaTimeoutError,
    SerializationError,
)
from millrace.client.producer import (
    KafkaProducer,
    Partitioner,
    ProducerConfig,
    ProducerInterceptor,
    ProducerRecord,
    RecordMetadata,
)
from millrace.client.serialization import Serializer
from millrace.common.errors import ConfigError, RecordTooLargeError
from millrace.common.time import SYSTEM_TIME
from tests.unit.client.fakes import FakeCluster, FakeSelector, make_producer, step, warm
from tests.unit.client.test_producer_sender import run_until

TP0 = TopicPartition("t", 0)
BOOT = {"bootstrap.servers": "fake:9092"}


# ---------------------------------------------------------------------- configuration
def test_kafka_defaults() -> None:
    cfg = ProducerConfig(BOOT)
    assert (cfg.acks, cfg["linger.ms"], cfg["batch.size"], cfg["buffer.memory"]) == \
        (-1, 5, 16384, 33554432)
    assert (cfg["max.block.ms"], cfg["retries"], cfg["retry.backoff.ms"],
            cfg["retry.backoff.max.ms"], cfg["delivery.timeout.ms"],
            cfg["request.timeout.ms"]) == (60000, 2147483647, 100, 1000, 120000, 30000)
    assert (cfg["max.in.flight.requests.per.connection"], cfg["max.request.size"],
            cfg["metadata.max.age.ms"], cfg["reconnect.backoff.ms"],
            cfg["reconnect.backoff.max.ms"]) == (5, 1048576, 300000, 50, 1000)
    assert cfg.idempotence and cfg["compression.type"] == "none"
    assert cfg["partitioner.adaptive.partitioning.enable"] is True
    assert cfg["partitioner.ignore.keys"] is False
    assert cfg["partitioner.availability.timeout.ms"] == 0


def test_unknown_keys_and_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=re.escape("lingr.ms")):
        ProducerConfig({**BOOT, "lingr.ms": 5})
    with pytest.raises(ConfigError, match="acks"):
        ProducerConfig({**BOOT, "acks": "2"})
    with pytest.raises(ConfigError, match=re.escape("compression.type")):
        ProducerConfig({**BOOT, "compression.type": "brotli"})
    with pytest.raises(ConfigError, match=re.escape("bootstrap.servers")):
        ProducerConfig({})


@pytest.mark.parametrize(("key", "value"), [
    ("acks", "1"), ("retries", 0), ("max.in.flight.requests.per.connection", 6)])
def test_explicit_idempotence_with_a_conflict_is_an_error(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        ProducerConfig({**BOOT, "enable.idempotence": True, key: value})


@pytest.mark.parametrize(("key", "value"), [
    ("acks", "1"), ("acks", "0"), ("retries", 0),
    ("max.in.flight.requests.per.connection", 6)])
def test_default_idempotence_yields_to_a_conflict(key: str, value: Any) -> None:
    assert not ProducerConfig({**BOOT, key: value}).idempotence
    assert ProducerConfig({**BOOT, "acks": "all", "retries": 3}).idempotence


def test_delivery_timeout_must_cover_linger_and_request_timeout() -> None:
    with pytest.raises(ConfigError, match=re.escape("delivery.timeout.ms")):
        ProducerConfig({**BOOT, "delivery.timeout.ms": 1000, "request.timeout.ms": 1000,
                        "linger.ms": 1})
    cfg = ProducerConfig({**BOOT, "request.timeout.ms": 200_000})
    assert cfg["delivery.timeout.ms"] == 200_005  # raised silently when not set


def test_transactional_id_needs_idempotence() -> None:
    cfg = ProducerConfig({**BOOT, "transactional.id": "tx"})
    assert cfg.transactional_id == "tx" and cfg.idempotence
    assert cfg["transaction.timeout.ms"] == 60000
    message = "Cannot set a transactional.id without also enabling idempotence."
    with pytest.raises(ConfigError, match=re.escape(message)):
        ProducerConfig({**BOOT, "transactional.id": "tx", "enable.idempotence": False})
    with pytest.raises(ConfigError, match=re.escape(message)):
        ProducerConfig({**BOOT, "transactional.id": "tx", "acks": "1"})  # idempotence off
    with pytest.raises(ConfigError, match=re.escape("acks")):
        ProducerConfig({**BOOT, "transactional.id": "tx", "acks": "1",
                        "enable.idempotence": True})
    with pytest.raises(ConfigError, match=re.escape("transactional.id")):
        ProducerConfig({**BOOT, "transactional.id": ""})


def test_bad_bootstrap_servers() -> None:
    for bad in ("nohost", "host:abc", "host:0", ":9092"):
        with pytest.raises(ConfigError, match=re.escape("bootstrap.servers")):
            KafkaProducer({"bootstrap.servers": bad}, _start_thread=False,
                          _selector=FakeSelector(FakeCluster()))


# ---------------------------------------------------------------------- serializers
@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(nodes=1, topics={"t": 3})


def ready(cluster: FakeCluster, config: dict[str, Any] | None = None, **kw: Any) -> tuple:
    producer, selector, clock = make_producer(
        cluster, {"linger.ms": 0, "enable.idempotence": False, "acks": "1", **(config or {})},
        **kw)
    warm(producer, "t", clock)
    return producer, selector, clock


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("str", "héllo", "héllo".encode()),
    ("int", -2, struct.pack(">i", -2)),
    ("long", 2**40, struct.pack(">q", 2**40)),
    ("double", 1.5, struct.pack(">d", 1.5)),
    ("json", {"a": [1, 2]}, b'{"a":[1,2]}'),
    ("org.apache.kafka.common.serialization.StringSerializer", "x", b"x"),
    ("bytes", bytearray(b"ab"), b"ab"),
])
def test_built_in_serializers(cluster: FakeCluster, name: str, value: Any,
                              expected: bytes) -> None:
    producer, _, clock = ready(cluster, {"key.serializer": name, "value.serializer": name})
    future = producer.send(ProducerRecord("t", value, key=value, partition=0))
    run_until(producer, clock, future.done)
    record = cluster.records(TP0)[0]
    assert record.key == expected and record.value == expected
    md = future.get(0)
    assert md.serialized_key_size == md.serialized_value_size == len(expected)
    producer.close()


class Upper(Serializer[str]):
    def serialize(self, topic: str, data: Any, headers: Any = None) -> bytes | None:
        return None if data is None else data.upper().encode()


def test_user_serializer_classes_objects_and_functions(cluster: FakeCluster) -> None:
    producer, _, clock = ready(cluster, {"key.serializer": Upper},
                               value_serializer=lambda v: json.dumps(v).encode())
    future = producer.send(ProducerRecord("t", [1], key="abc", partition=0))
    run_until(producer, clock, future.done)
    assert (cluster.records(TP0)[0].key, cluster.records(TP0)[0].value) == (b"ABC", b"[1]")
    producer.close()
    path = f"{__name__}.Upper"
    producer, _, clock = ready(cluster, {"value.serializer": path})
    future = producer.send(ProducerRecord("t", "x", partition=1))
    run_until(producer, clock, future.done)
    assert cluster.records(TopicPartition("t", 1))[0].value == b"X"
    producer.close()


@pytest.mark.parametrize(("name", "value"), [
    ("int", "not a number"), ("int", 2**31), ("str", b"bytes"), ("json", {1, 2}),
    ("bytes", "text"), ("double", "1.0")])
def test_a_serializer_error_raises_from_send_and_buffers_nothing(
        cluster: FakeCluster, name: str, value: Any) -> None:
    producer, _, _ = ready(cluster, {"value.serializer": name})
    available = producer.metrics()["producer-metrics"]["buffer-available-bytes"]
    with pytest.raises(SerializationError):
        producer.send(ProducerRecord("t", value, partition=0))
    assert not producer._accumulator.has_incomplete()
    assert producer.metrics()["producer-metrics"]["buffer-available-bytes"] == available
    assert producer.metrics()["producer-metrics"]["record-error-total"] == 1
    producer.close()


def test_a_failing_user_serializer_is_wrapped(cluster: FakeCluster) -> None:
    def boom(value: Any) -> bytes:
        raise KeyError("nope")

    producer, _, _ = ready(cluster, value_serializer=boom)
    with pytest.raises(SerializationError, match="nope"):
        producer.send(ProducerRecord("t", "v", partition=0))
    producer.close()


def test_unknown_serializer_class_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=re.escape("key.serializer")):
        make_producer(FakeCluster(), {"key.serializer": "no.such.module.Thing"})


def test_bad_headers_are_refused(cluster: FakeCluster) -> None:
    producer, _, clock = ready(cluster)
    with pytest.raises(SerializationError):
        producer.send(ProducerRecord("t", b"v", partition=0, headers=[("k", 5)]))
    future = producer.send(ProducerRecord("t", b"v", partition=0,
                                          headers={"a": "text", "b": None}))
    run_until(producer, clock, future.done)
    assert cluster.records(TP0)[0].headers == (("a", b"text"), ("b", None))
    producer.close()


# ---------------------------------------------------------------------- interceptors
class Recorder(ProducerInterceptor):
    instances: list[Recorder] = []

    def __init__(self) -> None:
        self.acks: list[tuple[Any, Any]] = []
        self.closed = False
        self.configured: dict[str, Any] = {}
        Recorder.instances.append(self)

    def configure(self, configs: Any) -> None:
        self.configured = dict(configs)

    def on_send(self, record: ProducerRecord[Any, Any]) -> ProducerRecord[Any, Any]:
        return ProducerRecord(record.topic, record.value + b"!", key=record.key,
                              partition=record.partition)

    def on_acknowledgement(self, metadata: RecordMetadata | None, exception: Any) -> None:
        self.acks.append((metadata.offset if metadata else None, exception))

    def close(self) -> None:
        self.closed = True


class Broken(ProducerInterceptor):
    def on_send(self, record: ProducerRecord[Any, Any]) -> ProducerRecord[Any, Any]:
        raise RuntimeError("on_send bug")

    def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
        raise RuntimeError("on_acknowledgement bug")


def test_interceptors_change_records_and_see_every_outcome(
        cluster: FakeCluster, caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    producer, _, clock = ready(cluster, {"interceptor.classes": [Broken, recorder]})
    assert recorder.configured["linger.ms"] == 0
    seen: list = []
    with caplog.at_level(logging.WARNING):
        ok = producer.send(ProducerRecord("t", b"v", partition=0),
                           lambda md, e: seen.append((md.offset, e)))
        run_until(producer, clock, ok.done)
        cluster.fail_next[TP0].append(17)  # INVALID_TOPIC_EXCEPTION
        bad = producer.send(ProducerRecord("t", b"w", partition=0))
        run_until(producer, clock, lambda: ok.done() and bad.done())
    assert "on_send bug" in caplog.text and "on_acknowledgement" in caplog.text
    assert cluster.values(TP0) == [b"v!"]  # the broken one was skipped, not fatal
    assert recorder.acks[0] == (0, None)
    assert recorder.acks[1][0] == -1 and recorder.acks[1][1] is not None
    assert seen == [(0, None)]
    with pytest.raises(SerializationError):  # a send error reaches the interceptors too
        producer.send(ProducerRecord("t", 5, partition=0))
    assert isinstance(recorder.acks[-1][1], SerializationError)
    producer.close()
    assert recorder.closed


def test_interceptor_classes_by_name(cluster: FakeCluster) -> None:
    Recorder.instances.clear()
    producer, _, _ = ready(cluster, {"interceptor.classes": f"{__name__}.Recorder"})
    assert len(Recorder.instances) == 1
    producer.close()


# ---------------------------------------------------------------------- partitioning
class Fixed(Partitioner):
    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
                  value_bytes: bytes | None, cluster: Cluster) -> int:
        return 2


def test_partitioning_choices(cluster: FakeCluster) -> None:
    producer, _, clock = ready(cluster)
    keyed = [producer.send(ProducerRecord("t", b"v", key=str(i).encode())) for i in range(20)]
    explicit = producer.send(ProducerRecord("t", b"v", partition=1))
    run_until(producer, clock, lambda: all(f.done() for f in keyed) and explicit.done())
    from millrace.client.producer._internals.built_in_partitioner import partition_for_key
    assert [f.get(0).partition for f in keyed] == [partition_for_key(str(i).encode(), 3)
                                                  for i in range(20)]
    assert explicit.get(0).partition == 1
    producer.close()
    producer, _, clock = ready(cluster, {"partitioner.class": Fixed})
    future = producer.send(ProducerRecord("t", b"v", key=b"k"))
    run_until(producer, clock, future.done)
    assert future.get(0).partition == 2
    producer.close()


def test_ignore_keys_makes_keyed_records_sticky(cluster: FakeCluster) -> None:
    producer, _, clock = ready(cluster, {"partitioner.ignore.keys": True, "linger.ms": 100})
    futures = [producer.send(ProducerRecord("t", b"v", key=str(i).encode()))
               for i in range(20)]
    clock.sleep(100)
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    assert len({f.get(0).partition for f in futures}) == 1
    producer.close()


def test_partition_out_of_range_waits_then_times_out(cluster: FakeCluster) -> None:
    producer, _, _ = ready(cluster, {"max.block.ms": 50})
    with pytest.raises(KafkaTimeoutError, match="Partition 7 of topic t with partition count 3"):
        producer.send(ProducerRecord("t", b"v", partition=7))
    producer.close()


def test_unknown_topic_times_out_after_max_block_ms() -> None:
    cluster = FakeCluster(nodes=1, topics={"t": 1}, auto_create_partitions=None)
    producer, _, _ = ready(cluster, {"max.block.ms": 80})
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="Topic missing not present in metadata after 80"):
        producer.send(ProducerRecord("missing", b"v"))
    assert 0.075 < time.monotonic() - start < 2
    producer.close()


def test_record_too_large(cluster: FakeCluster) -> None:
    producer, _, _ = ready(cluster, {"max.request.size": 1000})
    with pytest.raises(RecordTooLargeError, match=re.escape("max.request.size")):
        producer.send(ProducerRecord("t", b"x" * 1000, partition=0))
    producer.close()
    producer, _, _ = ready(cluster, {"buffer.memory": 1000, "batch.size": 100})
    with pytest.raises(RecordTooLargeError, match=re.escape("buffer.memory")):
        producer.send(ProducerRecord("t", b"x" * 1000, partition=0))
    producer.close()


def test_full_buffer_blocks_send_for_max_block_ms(cluster: FakeCluster) -> None:
    producer, _, _ = ready(cluster, {"buffer.memory": 2048, "batch.size": 1024,
                                     "max.block.ms": 100, "linger.ms": 10_000})
    producer.send(ProducerRecord("t", b"x" * 900, partition=0))
    producer.send(ProducerRecord("t", b"x" * 900, partition=1))
    start = time.monotonic()
    with pytest.raises(BufferExhaustedError):  # nobody drains: the sender is not stepped
        producer.send(ProducerRecord("t", b"x" * 900, partition=2))
    assert 0.095 < time.monotonic() - start < 2
    assert producer.metrics()["producer-metrics"]["buffer-available-bytes"] == 0
    producer.close(0)


def test_partitions_for(cluster: FakeCluster) -> None:
    producer, _, _ = ready(cluster)
    infos = producer.partitions_for("t")
    assert [(p.topic, p.partition, p.leader.id if p.leader else None) for p in infos] == \
        [("t", 0, 0), ("t", 1, 0), ("t", 2, 0)]
    producer.close()


def test_send_after_close_is_refused(cluster: FakeCluster) -> None:
    producer, _, _ = ready(cluster)
    producer.close()
    producer.close()  # idempotent
    with pytest.raises(IllegalStateError):
        producer.send(ProducerRecord("t", b"v"))


# ---------------------------------------------------------------------- with the thread
def threaded(cluster: FakeCluster, config: dict[str, Any] | None = None) -> KafkaProducer:
    selector = FakeSelector(cluster, blocking=True)
    settings = {**BOOT, "linger.ms": 5, **(config or {})}
    return KafkaProducer(settings, time=SYSTEM_TIME, _selector=selector)


def test_the_sender_thread_end_to_end(cluster: FakeCluster) -> None:
    done = threading.Event()
    with threaded(cluster) as producer:
        futures = [producer.send(ProducerRecord("t", str(i).encode(), key=b"k"))
                   for i in range(100)]
        producer.send(ProducerRecord("t", b"last", key=b"k"), lambda md, e: done.set())
        producer.flush(10)
        assert all(f.done() for f in futures)
        assert done.wait(5)
        assert [f.get(0).offset for f in futures] == list(range(100))
    thread = producer._io_thread
    assert thread is not None and not thread.is_alive()


def test_close_flushes_and_joins(cluster: FakeCluster) -> None:
    producer = threaded(cluster, {"linger.ms": 60_000})
    future = producer.send(ProducerRecord("t", b"v", partition=0))
    producer.close(10)
    assert future.get(0).offset == 0


def test_close_with_zero_timeout_aborts(cluster: FakeCluster) -> None:
    cluster.hold = True
    producer = threaded(cluster, {"linger.ms": 60_000})
    future = producer.send(ProducerRecord("t", b"v", partition=0))
    producer.close(0)
    with pytest.raises(Exception, match="closed forcefully"):
        future.get(5)


def test_flush_and_close_from_a_callback(cluster: FakeCluster) -> None:
    errors: list = []
    producer = threaded(cluster)

    def callback(metadata: Any, exception: Any) -> None:
        try:
            producer.flush()
        except IllegalStateError as e:
            errors.append(e)
        producer.close(5)  # from the sender thread: becomes a forced close

    producer.send(ProducerRecord("t", b"v", partition=0), callback).get(10)
    assert errors and "deadlock" in str(errors[0])
    producer._io_thread.join(5)  # type: ignore[union-attr]
    assert not producer._io_thread.is_alive()  # type: ignore[union-attr]


def test_many_threads_send_at_once(cluster: FakeCluster) -> None:
    with threaded(cluster) as producer:
        futures: list = []
        lock = threading.Lock()

        def work(n: int) -> None:
            mine = [producer.send(ProducerRecord("t", f"{n}-{i}".encode(), partition=n % 3))
                    for i in range(200)]
            with lock:
                futures.extend(mine)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        producer.flush(10)
    assert all(f.exception(0) is None for f in futures)
    for p in range(3):
        values = cluster.values(TopicPartition("t", p))
        assert len(values) == 400
        for n in range(p, 6, 3):  # each thread's records stay in order
            mine = [v for v in values if v is not None and v.startswith(f"{n}-".encode())]
            assert mine == [f"{n}-{i}".encode() for i in range(200)]


def test_step_helper_still_works_without_a_thread(cluster: FakeCluster) -> None:
    producer, _, clock = ready(cluster)
    producer._metadata.add("u", clock.milliseconds())
    clock.sleep(200)
    step(producer, 5)
    producer.close()
