"""kill -9 of a real broker process, then restart on the same log directory.

(a) A librdkafka producer (acks=1) writes while the broker is SIGKILLed at a random moment,
    twice; after each restart a consumer reads every partition from the beginning with
    ``assign`` and every delivery-confirmed record must be at its confirmed offset with its
    value, offsets dense, no consumer error.  (A killed process loses nothing that reached
    the page cache, so on one machine acks=1 confirmations must all survive.)
(b) After a kill, the active segment of a partition gets a torn half batch, garbage, or a
    whole last batch with a broken CRC appended by hand; the restarted broker must truncate
    exactly to the last whole batch, say so in its log, serve everything before it, and put
    the next produce at the right offset.
"""

from __future__ import annotations

import random
import re
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

from millrace.protocol import (  # noqa: E402
    NEED_DATA,
    ClientConnection,
    CreateTopicsRequest,
    FetchRequest,
    ProduceRequest,
    Response,
)
from millrace.record.batch import (  # noqa: E402
    CRC_OFFSET,
    HEADER_SIZE,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)
from millrace.testing.broker_process import BrokerProcess, free_port  # noqa: E402

pytestmark = [pytest.mark.integration]

HOST = "127.0.0.1"
IO_TIMEOUT = 5.0


# ---------------------------------------------------------------------------- raw client
def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
    sock.settimeout(IO_TIMEOUT)
    return sock


def _call(sock: socket.socket, conn: ClientConnection, body: Any, version: int) -> Any:
    _, data = conn.send_request(body, version)
    sock.sendall(data)
    deadline = time.monotonic() + 10.0
    while True:
        event = conn.next_event()
        if event is not NEED_DATA:
            assert isinstance(event, Response)
            return event.body
        assert time.monotonic() < deadline, "no response within 10s"
        data = sock.recv(1 << 20)
        assert data, "connection closed"
        conn.receive_data(data)


def _rpc(port: int, body: Any, version: int) -> Any:
    with _connect(port) as sock:
        return _call(sock, ClientConnection(), body, version)


def _create_topic(port: int, name: str, partitions: int) -> None:
    body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[])])
    (result,) = _rpc(port, body, 5).topics
    assert result.error_code == 0, result


def _batch(values: list[bytes]) -> bytes:
    b = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for v in values:
        b.append(now, None, v)
    return b.build()


def _produce(port: int, topic: str, records: bytes) -> int:
    """Produce one batch (acks=1, v8) to partition 0; returns its base offset."""
    body = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    (topic_resp,) = _rpc(port, body, 8).responses
    (part,) = topic_resp.partition_responses
    assert part.error_code == 0, part
    return int(part.base_offset)


def _fetch_all(port: int, topic: str) -> tuple[list[tuple[int, bytes]], int]:
    """Every (offset, value) of partition 0 up to the high watermark, CRCs checked."""
    out: list[tuple[int, bytes]] = []
    offset, hw = 0, -1
    with _connect(port) as sock:
        conn = ClientConnection()
        for _ in range(1000):
            body = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
                FetchRequest.FetchTopic(topic=topic, partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[])
            (part,) = _call(sock, conn, body, 12).responses[0].partitions
            assert part.error_code == 0, part
            hw = part.high_watermark
            if offset >= hw:
                break
            records = bytes(part.records or b"")
            assert records, f"no records at {offset} below the high watermark {hw}"
            for pos, _ in iter_batches(records):
                batch = RecordBatch(records, pos)
                batch.validate()
                for rec in batch.record_list():
                    if rec.offset >= offset:
                        out.append((rec.offset, rec.value or b""))
                offset = max(offset, batch.next_offset)
        else:
            raise AssertionError("fetch loop did not reach the high watermark")
    return out, hw


def _start_broker(tmp_path: Path, run: int, port: int) -> BrokerProcess:
    """A broker on ``tmp_path/logs`` (shared by every run) with its own broker.log.

    Each run gets a data_dir of its own because ``BrokerProcess.start`` waits for the
    "started" line in ``<data_dir>/broker.log``, which is appended to: on a reused data_dir
    the previous run's line would make it return before the new process is up.
    """
    return BrokerProcess(tmp_path / f"run-{run}", port=port,
                         overrides={"log.dirs": str(tmp_path / "logs")}).start()


# ---------------------------------------------------------------------------- (a)
class _Writer:
    """A confluent-kafka producer (acks=1) writing in a background thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tag: str) -> None:
        self.topic, self.partitions, self.tag = topic, partitions, tag
        self.confirmed: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.sent = 0
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 2,
            "message.timeout.ms": 4000, "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200, "enable.idempotence": False,
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.confirmed.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed += 1

    def _run(self) -> None:
        try:
            i = 0
            while not self.stop.is_set():
                for _ in range(20):  # ~4000 records/s: keeps two cores for the broker
                    value = f"{self.tag}-{i}".encode()
                    try:
                        self.producer.produce(self.topic, value=value,
                                              partition=i % self.partitions,
                                              on_delivery=self._on_delivery)
                        i += 1
                    except BufferError:
                        break
                self.sent = i
                self.producer.poll(0.005)
        except BaseException as e:  # reported by the main thread
            self.errors.append(e)

    def start(self) -> None:
        self.thread.start()

    def wait_confirmed(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.confirmed) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.confirmed) >= n, f"only {len(self.confirmed)} confirmed"

    def finish(self) -> None:
        """Stop writing; give callbacks of acknowledged records a moment, drop the rest."""
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.producer.flush(1.0)
        self.producer.purge()
        self.producer.flush(1.0)  # serves the purge callbacks
        assert not self.errors, self.errors


def _read_partitions(bootstrap: str, topic: str, partitions: int,
                     timeout: float = 20.0) -> dict[int, list[tuple[int, bytes]]]:
    """Everything in every partition, from offset 0 to its end, via assign (no group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-verifier",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "check.crcs": True})
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"read did not finish: {ends}, done {done}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            p, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                if offset >= ends[p]:
                    done.add(p)
                continue
            got[p].append((offset, msg.value() or b""))
            if offset + 1 >= ends[p]:
                done.add(p)
    finally:
        consumer.close()
    return got


def test_confirmed_records_survive_kill_9_during_produce(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    topic, partitions, port = "crash", 3, free_port()
    confirmed: list[tuple[int, int, bytes]] = []
    broker = _start_broker(tmp_path, 0, port)
    try:
        _create_topic(port, topic, partitions)
        for round_no in range(2):
            writer = _Writer(broker.bootstrap, topic, partitions, f"r{round_no}")
            writer.start()
            writer.wait_confirmed(50, timeout=10)
            time.sleep(rnd.uniform(0.2, 1.5))  # then kill at a random moment mid-stream
            broker.kill()
            time.sleep(0.2)  # the producer keeps writing into the dead broker for a while
            writer.finish()
            assert writer.sent > len(writer.confirmed) > 0
            confirmed += writer.confirmed
            del writer

            broker = _start_broker(tmp_path, round_no + 1, port)
            assert "no clean shutdown marker" in broker.logs()
            got = _read_partitions(broker.bootstrap, topic, partitions)
            for p, records in got.items():
                offsets = [o for o, _ in records]
                assert offsets == list(range(len(offsets))), (
                    f"seed {seed}: partition {p} offsets not dense from 0")
                values = [v for _, v in records]
                assert all(re.fullmatch(rb"r[01]-\d+", v) for v in values), f"seed {seed}"
            lost = [(p, o, v) for p, o, v in confirmed
                    if o >= len(got[p]) or got[p][o][1] != v]
            assert not lost, (f"seed {seed}: {len(lost)} of {len(confirmed)} confirmed "
                              f"records missing or changed, e.g. {lost[:5]}")
        assert len(confirmed) >= 100
    finally:
        broker.kill()


# ---------------------------------------------------------------------------- (b)
def _active_segment(log_dir: Path, topic: str) -> Path:
    segments = sorted((log_dir / f"{topic}-0").glob("*.log"))
    assert segments and all(re.fullmatch(r"\d{20}\.log", s.name) for s in segments)
    return segments[-1]


def _stored_batch(values: list[bytes], base_offset: int) -> bytes:
    """A batch as the broker would have written it at ``base_offset`` (epoch 0)."""
    b = bytearray(_batch(values))
    struct.pack_into(">q", b, 0, base_offset)
    struct.pack_into(">i", b, 12, 0)
    return bytes(b)


@pytest.mark.parametrize("damage", ["torn-half-batch", "garbage", "bad-crc-last-batch"])
def test_damaged_segment_tail_is_truncated_on_restart(tmp_path: Path, damage: str) -> None:
    topic, port = "torn", free_port()
    broker = _start_broker(tmp_path, 0, port)
    try:
        _create_topic(port, topic, 1)
        expected: list[tuple[int, bytes]] = []
        for i in range(20):
            values = [f"v{i}-{j}".encode() * 10 for j in range(5)]
            base = _produce(port, topic, _batch(values))
            assert base == i * 5
            expected += [(base + j, v) for j, v in enumerate(values)]
        end = len(expected)
        broker.kill()

        segment = _active_segment(tmp_path / "logs", topic)
        whole = segment.stat().st_size
        extra = _stored_batch([b"torn" * 200, b"half" * 200], end)
        if damage == "torn-half-batch":
            tail = extra[:len(extra) // 2]
        elif damage == "garbage":
            tail = random.Random(7).randbytes(3000)
        else:
            bad = bytearray(extra)
            bad[HEADER_SIZE + 3] ^= 0xFF
            assert bad[CRC_OFFSET:CRC_OFFSET + 4] == extra[CRC_OFFSET:CRC_OFFSET + 4]
            tail = bytes(bad)
        with open(segment, "ab") as f:
            f.write(tail)

        broker = _start_broker(tmp_path, 1, port)
        restart_log = broker.logs()
        assert re.search("truncat", restart_log, re.IGNORECASE), restart_log
        assert segment.stat().st_size == whole, "not truncated to the last whole batch"

        got, hw = _fetch_all(port, topic)
        assert hw == end
        assert got == expected
        # the log continues right after the last whole batch
        assert _produce(port, topic, _batch([b"after-1", b"after-2"])) == end
        got, hw = _fetch_all(port, topic)
        assert hw == end + 2
        assert got == [*expected, (end, b"after-1"), (end + 1, b"after-2")]
        broker.stop()
        assert broker.proc is not None and broker.proc.returncode == 0
    finally:
        broker.kill()
