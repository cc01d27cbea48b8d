"""Record batches against third-party implementations, every codec.

(a) batches we build decode with kafka-python's reader; (b) kafka-python's builders (v2 and
legacy v0/v1) decode with ours; (c) librdkafka (confluent-kafka) produces into a tiny
in-test fake broker that speaks just ApiVersions, Metadata and Produce, and we decode the
record batches it captured.  The fake broker encodes its responses by hand with ``struct``
(field lists from the Kafka protocol reference), independent of ``millrace.protocol``.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from collections.abc import Iterator
from types import TracebackType

import pytest

from millrace.record.batch import Record, RecordBatch, RecordBatchBuilder, validate_batch
from millrace.record.compression import CompressionType
from millrace.record.memory_records import MemoryRecords

pytestmark = pytest.mark.compat

kafka_record = pytest.importorskip("kafka.record.default_records")
kafka_legacy = pytest.importorskip("kafka.record.legacy_records")
kafka_memory = pytest.importorskip("kafka.record.memory_records")

CODECS = list(CompressionType)
CODEC_IDS = [c.name.lower() for c in CODECS]

RECORDS: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (1_700_000_000_000, b"key-0", b"value-0" * 30, [("trace", b"abc"), ("n", b"")]),
    (1_700_000_000_007, None, b"keyless" * 30, []),
    (1_699_999_999_000, b"tombstone", None, [("ü", b"\x00\xff")]),
    (1_700_000_000_001, b"", b"", []),
    (1_700_000_000_002, b"big", bytes(range(256)) * 600, [("h" * 200, b"v" * 1000)]),
]


def _kafka_python_headers(
    headers: list[tuple[str, bytes | None]],
) -> list[tuple[str, bytes | None]]:
    return [(k, v) for k, v in headers if v is not None]


# ------------------------------------------------------------------ (a) ours → kafka-python
@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_our_batches_decode_with_kafka_python(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(compression=codec, base_offset=1000)
    for timestamp, key, value, headers in RECORDS:
        builder.append(timestamp, key, value, headers)
    data = builder.build()

    theirs = kafka_record.DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == int(codec)
    assert (theirs.base_offset, theirs.last_offset_delta) == (1000, len(RECORDS) - 1)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [(1000 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)]

    batches = kafka_memory.MemoryRecords(data + data)
    assert batches.valid_bytes() == 2 * len(data)
    assert len(list(batches.next_batch())) == len(RECORDS)


# ------------------------------------------------------------------ (b) kafka-python → ours
@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_batches_decode_with_ours(codec: CompressionType) -> None:
    builder = kafka_record.DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for i, (timestamp, key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp, key, value, _kafka_python_headers(headers))
    data = bytes(builder.build())

    header = validate_batch(data, check_offsets=True)
    assert header.compression == codec  # the payloads compress, so kafka-python keeps the codec
    records = RecordBatch(data).record_list()
    assert records == [Record(i, ts, k, v, tuple(_kafka_python_headers(h)))
                       for i, (ts, k, v, h) in enumerate(RECORDS)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS[:4], ids=CODEC_IDS[:4])  # no zstd before magic 2
def test_kafka_python_legacy_message_sets_decode_with_ours(
    codec: CompressionType, magic: int
) -> None:
    if magic == 0 and codec == CompressionType.LZ4:
        # kafka-python writes the broken KAFKA-3160 header checksum here, using xxhash
        pytest.importorskip("xxhash")
    builder = kafka_legacy.LegacyRecordBatchBuilder(
        magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i, (timestamp, key, value, _) in enumerate(RECORDS):
        builder.append(i + 50 if codec else i, timestamp, key, value)
    data = bytes(builder.build())

    got = list(MemoryRecords(data).records())
    assert [(r.key, r.value) for r in got] == [(k, v) for _, k, v, _ in RECORDS]
    assert [r.timestamp for r in got] == [ts if magic else -1 for ts, _, _, _ in RECORDS]
    for batch in MemoryRecords(data).batches():
        batch.validate()
        assert batch.compression == codec


# ------------------------------------------------------------------ (c) librdkafka → ours
API_RANGES = {  # api key: (min, max) advertised by the fake broker
    0: (0, 7),  # Produce: min 0 or librdkafka < 2.11.1 silently disables compression
    1: (4, 11),  # Fetch: 4 = MsgVer2, 10 = ZSTD
    3: (0, 4),  # Metadata
    10: (0, 2),  # FindCoordinator: 0 gates LZ4 in old librdkafka feature checks
    18: (0, 3),  # ApiVersions
}
TOPIC = "records-compat"


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos : pos + n].decode(), pos + n


class FakeBroker:
    """Just enough of a Kafka broker for ``confluent_kafka.Producer`` to deliver.

    One thread, one selector, non-blocking accept; every loop is bounded by the stop event
    and a short select timeout, so the test cannot hang.
    """

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.produced: list[bytes] = []  # guarded by _lock
        self.produce_versions: list[int] = []  # guarded by _lock
        self.errors: list[BaseException] = []
        self._next_offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-broker", daemon=True)

    def __enter__(self) -> FakeBroker:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        assert not self._thread.is_alive(), "fake broker thread did not stop"
        self._listener.close()

    def captured(self) -> list[bytes]:
        with self._lock:
            return list(self.produced)

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        conns: dict[socket.socket, bytearray] = {}
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(0.05):
                    if key.data is None:
                        with contextlib.suppress(BlockingIOError):
                            conn, _ = self._listener.accept()
                            conn.settimeout(2.0)
                            conns[conn] = bytearray()
                            sel.register(conn, selectors.EVENT_READ, "conn")
                        continue
                    conn = key.fileobj  # type: ignore[assignment]
                    try:
                        chunk = conn.recv(1 << 16)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sel.unregister(conn)
                        conn.close()
                        del conns[conn]
                        continue
                    buf = conns[conn]
                    buf += chunk
                    while len(buf) >= 4:
                        (size,) = struct.unpack_from(">i", buf, 0)
                        if len(buf) < 4 + size:
                            break
                        frame = bytes(buf[4 : 4 + size])
                        del buf[: 4 + size]
                        response = self._handle(frame)
                        if response is not None:
                            conn.sendall(struct.pack(">i", len(response)) + response)
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)
        finally:
            for conn in conns:
                conn.close()
            sel.close()

    def _handle(self, frame: bytes) -> bytes | None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
        _, pos = _read_string(frame, 8)  # client id; the bodies we parse are non-flexible
        head = struct.pack(">i", correlation_id)  # response header v0 for all three APIs
        if api_key == 18:
            return head + self._api_versions(version)
        if api_key == 3:
            return head + self._metadata()
        if api_key == 0:
            return self._produce(version, frame, pos, head)
        raise AssertionError(f"fake broker got unexpected api key {api_key} v{version}")

    @staticmethod
    def _api_versions(version: int) -> bytes:
        if version > API_RANGES[18][1]:  # UNSUPPORTED_VERSION, v0 body: the client retries
            body = struct.pack(">hi", 35, len(API_RANGES))
            for key, (lo, hi) in API_RANGES.items():
                body += struct.pack(">hhh", key, lo, hi)
            return body
        if version >= 3:  # flexible body: compact array, tagged fields
            body = struct.pack(">h", 0) + bytes([len(API_RANGES) + 1])
            for key, (lo, hi) in API_RANGES.items():
                body += struct.pack(">hhh", key, lo, hi) + b"\x00"
            return body + struct.pack(">i", 0) + b"\x00"
        body = struct.pack(">hi", 0, len(API_RANGES))
        for key, (lo, hi) in API_RANGES.items():
            body += struct.pack(">hhh", key, lo, hi)
        return body + (struct.pack(">i", 0) if version >= 1 else b"")

    def _metadata(self) -> bytes:
        # v4: throttle, brokers [id, host, port, rack], cluster id, controller id,
        # topics [error, name, internal, partitions [error, index, leader, replicas, isr]]
        return (
            struct.pack(">ii", 0, 1)
            + struct.pack(">i", 0) + _string("127.0.0.1") + struct.pack(">i", self.port)
            + _string(None)
            + _string("fake-cluster") + struct.pack(">i", 0)
            + struct.pack(">i", 1) + struct.pack(">h", 0) + _string(TOPIC) + b"\x00"
            + struct.pack(">i", 1) + struct.pack(">hii", 0, 0, 0)
            + struct.pack(">ii", 1, 0) + struct.pack(">ii", 1, 0)
        )

    def _produce(self, version: int, frame: bytes, pos: int, head: bytes) -> bytes | None:
        assert version >= 3, f"librdkafka sent Produce v{version}"
        _, pos = _read_string(frame, pos)  # transactional id
        acks, _timeout, topic_count = struct.unpack_from(">hii", frame, pos)
        pos += 10
        answer = struct.pack(">i", topic_count)
        for _ in range(topic_count):
            name, pos = _read_string(frame, pos)
            (partition_count,) = struct.unpack_from(">i", frame, pos)
            pos += 4
            answer += _string(name) + struct.pack(">i", partition_count)
            for _ in range(partition_count):
                partition, size = struct.unpack_from(">ii", frame, pos)
                pos += 8
                records = frame[pos : pos + size]
                pos += size
                with self._lock:
                    self.produced.append(records)
                    self.produce_versions.append(version)
                base = self._next_offset
                self._next_offset += 1000
                answer += struct.pack(">ihq", partition, 0, base)
                answer += struct.pack(">q", -1) if version >= 2 else b""
                answer += struct.pack(">q", 0) if version >= 5 else b""
        answer += struct.pack(">i", 0)  # throttle time
        return None if acks == 0 else head + answer


@pytest.fixture
def fake_broker() -> Iterator[FakeBroker]:
    with FakeBroker() as broker:
        yield broker
    assert not broker.errors, broker.errors


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_librdkafka_batches_decode_with_ours(
    fake_broker: FakeBroker, codec: CompressionType
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    delivered: list[object] = []
    failed: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        (failed if err is not None else delivered).append(err or msg)

    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{fake_broker.port}",
        "compression.type": codec.name.lower(),
        "linger.ms": 0,
        "message.timeout.ms": 5000,
        "socket.timeout.ms": 5000,
        "broker.address.family": "v4",
        "log_level": 3,
    })
    sent = []
    try:
        for i in range(6):
            key = None if i == 3 else f"key-{i}".encode()
            value = None if i == 4 else f"value {i} ".encode() * 40
            headers = [("idx", str(i).encode()), ("empty", b""), ("nothing", None)]
            timestamp = 1_700_000_000_000 + i
            producer.produce(TOPIC, key=key, value=value, headers=headers, timestamp=timestamp,
                             on_delivery=on_delivery)
            sent.append((timestamp, key, value, tuple(headers)))  # decoded: a tuple
        assert producer.flush(10) == 0, "librdkafka could not deliver to the fake broker"
    finally:
        producer.close()
    assert not failed, failed
    assert len(delivered) == len(sent)

    received = []
    for records in fake_broker.captured():
        assert list(MemoryRecords(records).batches()), "no batch in a Produce request"
        for batch in MemoryRecords(records).batches():
            assert isinstance(batch, RecordBatch)
            batch.validate()
            validate_batch(batch.buffer, check_offsets=True)
            assert batch.compression == codec
            received += [(r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    assert received == sent
    assert all(v >= 3 for v in fake_broker.produce_versions)
