"""Hostile and broken input against a real broker process (reliability matrix §4, row 20).

One ``millrace broker`` child process serves the whole module.  Every case sends something
bad over its own socket and checks what the broker did with *that* connection (closed it,
or answered with the right error code); after every case an autouse fixture checks the
pass criteria of the matrix: the process is still alive, a fresh well-behaved client still
gets ApiVersions and Metadata answers quickly, and the broker log shows no handler crash
(no traceback).  Memory is read from ``/proc/<pid>/status``: VmRSS (now) and VmHWM (the
peak since start), so a transient allocation that was freed again is still caught.
"""

from __future__ import annotations

import functools
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import pytest

from millrace.common.errors import DecompressionLimitError
from millrace.protocol import (
    NEED_DATA,
    ApiVersionsRequest,
    ClientConnection,
    CreateTopicsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    Response,
    api_versions_fallback_response,
)
from millrace.record.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    MAGIC_OFFSET,
    RECORDS_COUNT_OFFSET,
    RecordBatch,
    RecordBatchBuilder,
    compute_crc,
)
from millrace.record.compression import DEFAULT_MAX_DECOMPRESSED, CompressionType, compress
from millrace.record.varint import encode_varint, encode_varlong
from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration]

HOST = "127.0.0.1"
IO_TIMEOUT = 5.0  # every socket operation
MAX_REQUEST = 16 * 1024 * 1024  # socket.request.max.bytes of the broker under test
MEMORY_BUDGET = 50 * 1024 * 1024  # bytes a single bad case may add to RSS / peak RSS
BOMB_SIZE = 200 * 1024 * 1024  # zeros inside one compressed record
STREAMED_BOMB_SIZE = 1024 * 1024 * 1024  # zstd streamed in chunks: never held in memory here

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87


# ---------------------------------------------------------------------------- helpers
def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _header(api_key: int, version: int, correlation_id: int = 1,
            client_id: bytes | None = b"bad-client") -> bytes:
    """Request header v1 (v0 + int16-length client id)."""
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return head + struct.pack(">h", -1)
    return head + struct.pack(">h", len(client_id)) + client_id


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
    sock.settimeout(IO_TIMEOUT)
    return sock


def _read_responses(sock: socket.socket, conn: ClientConnection, n: int,
                    timeout: float = 10.0) -> list[Response]:
    """Read exactly ``n`` responses (ClientConnection checks their correlation ids)."""
    out: list[Response] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        event = conn.next_event()
        if event is not NEED_DATA:
            assert isinstance(event, Response)
            out.append(event)
            continue
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(out)} of {n} responses within {timeout}s"
        sock.settimeout(min(remaining, IO_TIMEOUT))
        data = sock.recv(1 << 20)
        assert data, f"connection closed after {len(out)} of {n} responses"
        conn.receive_data(data)
    return out


def _call(sock: socket.socket, conn: ClientConnection, body: Any, version: int) -> Any:
    _, data = conn.send_request(body, version)
    sock.sendall(data)
    return _read_responses(sock, conn, 1)[0].body


def _rpc(port: int, body: Any, version: int) -> Any:
    """One request on a fresh connection; returns the decoded response body."""
    with _connect(port) as sock:
        return _call(sock, ClientConnection(client_id="good-client"), body, version)


def _wait_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Read until the peer closes; returns whatever arrived first.  Fails if still open."""
    got = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"connection still open after {timeout}s ({len(got)} bytes "
                                 "received)")
        sock.settimeout(remaining)
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return bytes(got)
        except TimeoutError:
            continue
        if not data:
            return bytes(got)
        got += data


def _send_and_expect_close(port: int, data: bytes) -> bytes:
    with _connect(port) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return b""  # closed before we finished writing: fine
        return _wait_closed(sock)


def _memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in bytes."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


class _MemoryWatch:
    """Asserts that RSS and peak RSS grew by less than ``budget`` over a ``with`` block."""

    def __init__(self, broker: BrokerProcess, budget: int = MEMORY_BUDGET) -> None:
        assert broker.proc is not None
        self.pid = broker.proc.pid
        self.budget = budget

    def __enter__(self) -> _MemoryWatch:
        self.rss, self.hwm = _memory(self.pid)
        return self

    def __exit__(self, et: object, e: object, tb: object) -> None:
        if et is not None:
            return
        rss, hwm = _memory(self.pid)
        mib = 1024 * 1024
        assert rss - self.rss < self.budget, (
            f"broker RSS grew {self.rss // mib} -> {rss // mib} MiB")
        assert hwm - self.hwm < self.budget, (
            f"broker peak RSS grew {self.hwm // mib} -> {hwm // mib} MiB")


def _batch(values: list[bytes], codec: CompressionType = CompressionType.NONE) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(now, f"k{i}".encode(), v)
    return b.build()


def _fix_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)


def _replace_records(batch: bytes, area: bytes) -> bytes:
    """``batch``'s header around another records area; length and CRC made to match."""
    out = bytearray(batch[:HEADER_SIZE] + area)
    struct.pack_into(">i", out, LENGTH_OFFSET, len(out) - 12)
    return _fix_crc(out)


def _produce_body(topic: str, records: bytes | None, acks: int = 1,
                  partition: int = 0) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition,
                                                                 records=records)])])


def _produce_result(body: Any) -> tuple[int, int]:
    """(error_code, base_offset) of the single partition of a ProduceResponse."""
    (topic,) = body.responses
    (part,) = topic.partition_responses
    return part.error_code, part.base_offset


def _create_topic(port: int, name: str, configs: dict[str, str] | None = None,
                  partitions: int = 1) -> None:
    cfg = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
    body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[cfg(name=k, value=v) for k, v in (configs or {}).items()])])
    (result,) = _rpc(port, body, 5).topics
    assert result.error_code == 0, (name, result.error_code, result.error_message)


@functools.cache
def _bomb_batch(codec: CompressionType, zeros: int, *, streaming_zstd: bool = False) -> bytes:
    """A valid v2 batch holding one record whose value is ``zeros`` zero bytes, compressed.

    The records area is assembled by hand and the header packed around the compressed
    blob, with the CRC computed by ``compute_crc``; nothing ever decodes it here.
    """
    body_tail = encode_varint(0)  # no headers
    body_head = (b"\x00" + encode_varlong(0) + encode_varint(0) + encode_varint(-1)
                 + encode_varint(zeros))
    record_len = len(body_head) + zeros + len(body_tail)
    prefix = encode_varint(record_len) + body_head
    if codec == CompressionType.ZSTD and streaming_zstd:
        # no content size in the frame header: the decompressor must find the size itself
        c = cramjam.zstd.Compressor()
        c.compress(prefix)
        chunk = bytes(1 << 20)
        for _ in range(zeros // len(chunk)):
            c.compress(chunk)
        c.compress(bytes(zeros % len(chunk)) + body_tail)
        blob = bytes(c.finish())
    else:
        blob = compress(codec, prefix + bytes(zeros) + body_tail)
    now = int(time.time() * 1000)
    header = struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - 12 + len(blob), -1, 2, 0,
                         int(codec), 0, now, now, -1, -1, -1, 1)
    return _fix_crc(bytearray(header + blob))


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("bad-input")
    with BrokerProcess(data, overrides={"socket.request.max.bytes": str(MAX_REQUEST)}) as b:
        _create_topic(b.port, "plain")
        _create_topic(b.port, "small", {"max.message.bytes": "2000"})
        _create_topic(b.port, "bombs", {"max.message.bytes": str(MAX_REQUEST)})
        _create_topic(b.port, "bombs-compacted", {"max.message.bytes": str(MAX_REQUEST),
                                                  "cleanup.policy": "compact"})
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


@pytest.fixture(autouse=True)
def other_clients_unaffected(broker: BrokerProcess) -> Iterator[None]:
    """After every case: broker alive, fresh clients served fast, no handler traceback."""
    log_start = len(broker.logs())
    yield
    assert broker.proc is not None and broker.proc.poll() is None, broker.logs()[-5000:]
    start = time.monotonic()
    versions = _rpc(broker.port, ApiVersionsRequest(), 0)
    assert versions.error_code == 0
    assert any(k.api_key == 18 for k in versions.api_keys)
    meta = _rpc(broker.port, MetadataRequest(topics=None), 12)
    assert {"plain", "bombs"} <= {t.name for t in meta.topics}
    assert [b.port for b in meta.brokers] == [broker.port]
    assert time.monotonic() - start < 2.0, "a well-behaved client was served slowly"
    new_logs = broker.logs()[log_start:]
    assert "Traceback" not in new_logs, new_logs[-5000:]


# ---------------------------------------------------------------------------- framing
@pytest.mark.parametrize("size", [0, -1, -(2**31), 2**31 - 1, MAX_REQUEST + 1],
                         ids=["zero", "minus-one", "int32-min", "int32-max", "max-plus-one"])
def test_bad_size_prefix_closes_the_connection_without_allocating(
        broker: BrokerProcess, size: int) -> None:
    with _MemoryWatch(broker):
        got = _send_and_expect_close(broker.port, struct.pack(">i", size) + b"\xab" * 8192)
    assert got == b""


def test_size_prefix_at_the_limit_is_accepted_as_a_frame(broker: BrokerProcess) -> None:
    """A frame of exactly socket.request.max.bytes is read: an ApiVersions v0 request padded
    with megabytes of zeros, which the broker ignores as trailing bytes (as Kafka does)."""
    conn = ClientConnection()
    _, request = conn.send_request(ApiVersionsRequest(), 0)
    payload = request[4:]
    data = struct.pack(">i", MAX_REQUEST) + payload + bytes(MAX_REQUEST - len(payload))
    with _MemoryWatch(broker, MEMORY_BUDGET + 4 * MAX_REQUEST), _connect(broker.port) as sock:
        sock.sendall(data)
        (resp,) = _read_responses(sock, conn, 1)
    assert resp.body.error_code == 0


# ---------------------------------------------------------------------------- lengths
@pytest.mark.parametrize("payload", [
    # Metadata v1, topics array claims 2**31-1 entries in a 14-byte frame
    _header(3, 1, client_id=None) + struct.pack(">i", 0x7FFFFFFF),
    # Produce v8: topic_data claims INT32_MAX topics
    _header(0, 8) + struct.pack(">hhii", -1, 1, 1000, 0x7FFFFFFF),
    # Produce v8: one topic whose partition_data claims INT32_MAX entries
    _header(0, 8) + struct.pack(">hhiih", -1, 1, 1000, 1, 1) + b"t" + struct.pack(">i", 2**31 - 1),
    # CreateTopics v4: configs of one topic claim INT32_MAX entries
    _header(19, 4) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">ihii", 1, 1, 0, 0x7FFFFFFF),
    # Metadata v12 (flexible): compact array length uvarint 2**31
    _header(3, 12) + b"\x00" + b"\x80\x80\x80\x80\x08",
    # Produce v8: records bytes claim 2**31-1 bytes
    _header(0, 8) + struct.pack(">hhiih", -1, 1, 1000, 1, 1) + b"t"
    + struct.pack(">iii", 1, 0, 0x7FFFFFFF),
], ids=["metadata-array", "produce-topics", "produce-partitions", "create-topics-configs",
        "compact-array", "records-bytes"])
def test_huge_element_count_in_a_tiny_frame_is_refused(broker: BrokerProcess,
                                                       payload: bytes) -> None:
    with _MemoryWatch(broker):
        assert _send_and_expect_close(broker.port, _frame(payload)) == b""


@pytest.mark.parametrize("payload", [
    # client id length -2 in the header
    struct.pack(">hhih", 18, 0, 1, -2),
    # Metadata v1: one topic, name length -5
    _header(3, 1) + struct.pack(">ih", 1, -5),
    # Produce v8: transactional id -3
    _header(0, 8) + struct.pack(">h", -3) + struct.pack(">hii", 1, 1000, 0),
    # Produce v8: topic name -100
    _header(0, 8) + struct.pack(">hhiih", -1, 1, 1000, 1, -100),
    # client id longer than the frame
    struct.pack(">hhih", 18, 0, 1, 30000) + b"abc",
    # invalid UTF-8 in a topic name
    _header(3, 1) + struct.pack(">ih", 1, 2) + b"\xff\xfe",
], ids=["client-id", "topic-name", "transactional-id", "produce-topic",
        "client-id-overrun", "bad-utf8"])
def test_bad_string_or_bytes_length_is_refused(broker: BrokerProcess, payload: bytes) -> None:
    assert _send_and_expect_close(broker.port, _frame(payload)) == b""


def test_negative_records_length_reads_as_null(broker: BrokerProcess) -> None:
    """Kafka's generated readers take any negative length of a nullable field as null, so a
    records length of -7 is answered like records=None: INVALID_RECORD, connection kept."""
    conn = ClientConnection()
    _, request = conn.send_request(_produce_body("plain", None), 8)
    assert request.endswith(b"\xff\xff\xff\xff")  # records is the last field of v8
    with _connect(broker.port) as sock:
        sock.sendall(request[:-4] + struct.pack(">i", -7))
        (resp,) = _read_responses(sock, conn, 1)
        assert _produce_result(resp.body)[0] == INVALID_RECORD
        assert _call(sock, conn, ApiVersionsRequest(), 0).error_code == 0


@pytest.mark.parametrize("payload", [
    # request header v2: tagged-field count is a varint that never terminates
    _header(3, 12) + b"\xff" * 12,
    # Metadata v12 body: the compact array length never terminates
    _header(3, 12) + b"\x00" + b"\xff" * 12,
    # truncated: frame ends in the middle of the header
    struct.pack(">hh", 18, 3),
    # frame ends in the middle of a Produce body
    _header(0, 8) + struct.pack(">hh", -1, 1),
], ids=["header-tags", "body-array", "short-header", "short-body"])
def test_unterminated_varints_and_short_frames_are_refused(broker: BrokerProcess,
                                                           payload: bytes) -> None:
    assert _send_and_expect_close(broker.port, _frame(payload)) == b""


# ---------------------------------------------------------------------------- api keys
@pytest.mark.parametrize(("api_key", "version"), [
    (9999, 0), (-1, 0), (32767, 1), (0, 99), (3, 99), (1, 0), (0, -1), (3, -5), (0, 2),
], ids=["key-9999", "key-minus-one", "key-32767", "produce-v99", "metadata-v99",
        "fetch-v0-disabled", "produce-v-1", "metadata-v-5", "produce-v2-refused"])
def test_unknown_key_or_unsupported_version_closes_the_connection(
        broker: BrokerProcess, api_key: int, version: int) -> None:
    body = b""
    if (api_key, version) == (0, 2):  # a well-formed Produce v2 (Kafka 4 refuses v0-2)
        body = struct.pack(">hii", 1, 1000, 0)
    assert _send_and_expect_close(broker.port, _frame(_header(api_key, version) + body)) == b""


def test_api_versions_above_our_range_gets_the_v0_fallback(broker: BrokerProcess) -> None:
    max_version = next(k.max_version for k in _rpc(broker.port, ApiVersionsRequest(), 0).api_keys
                       if k.api_key == 18)
    assert max_version == 4
    with _connect(broker.port) as sock:
        # v99 with a body the broker cannot know the layout of (header v2 + tags + junk)
        sock.sendall(_frame(_header(18, 99, 77) + b"\x00\x05junk\x00"))
        expected = api_versions_fallback_response(77, max_version)
        got = bytearray()
        deadline = time.monotonic() + IO_TIMEOUT
        while len(got) < len(expected) and time.monotonic() < deadline:
            data = sock.recv(65536)
            assert data, "closed instead of answering ApiVersions v99"
            got += data
        assert bytes(got) == expected
        _size, corr, error, n, key, lo, hi = struct.unpack(">iihihhh", got)
        assert (corr, error, n, key, lo, hi) == (77, UNSUPPORTED_VERSION, 1, 18, 0, 4)
        # the connection stays usable: the client retries at the version it was given
        conn = ClientConnection()
        resp = _call(sock, conn, ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1"), hi)
        assert resp.error_code == 0
        assert len(resp.api_keys) > 10


def test_requests_queued_before_a_bad_one_are_answered_then_closed(
        broker: BrokerProcess) -> None:
    conn = ClientConnection()
    data = b"".join(conn.send_request(ApiVersionsRequest(), 0)[1] for _ in range(3))
    data += _frame(_header(9999, 0, 3))
    data += conn.send_request(ApiVersionsRequest(), 0)[1]  # after the bad one: never served
    with _connect(broker.port) as sock:
        sock.sendall(data)
        responses = _read_responses(sock, conn, 3)
        assert [r.correlation_id for r in responses] == [0, 1, 2]
        assert _wait_closed(sock) == b""


# ---------------------------------------------------------------------------- produce
def test_produce_with_a_bad_crc_is_corrupt_message(broker: BrokerProcess) -> None:
    _create_topic(broker.port, "crc")
    good = _batch([b"value-%d" % i for i in range(5)])
    bad = bytearray(good)
    bad[HEADER_SIZE + 5] ^= 0x40  # inside the records area, covered by the CRC
    with _connect(broker.port) as sock:
        conn = ClientConnection()
        assert _produce_result(_call(sock, conn, _produce_body("crc", bytes(bad)), 8))[0] \
            == CORRUPT_MESSAGE
        # a flipped bit in the CRC field itself, and in the header part covered by it
        for pos in (CRC_OFFSET, ATTRIBUTES_OFFSET + 12):
            bad = bytearray(good)
            bad[pos] ^= 0x01
            assert _produce_result(_call(sock, conn, _produce_body("crc", bytes(bad)), 8))[0] \
                == CORRUPT_MESSAGE
        # same connection still works, and nothing of the bad batches was appended
        assert _produce_result(_call(sock, conn, _produce_body("crc", good), 8)) == (0, 0)


def _with(batch: bytes, fmt: str, pos: int, value: int, *, fix_crc: bool = True) -> bytes:
    b = bytearray(batch)
    struct.pack_into(fmt, b, pos, value)
    return _fix_crc(b) if fix_crc else bytes(b)


_GOOD = _batch([b"a" * 100, b"b" * 100, b"c" * 100])
_BAD_RECORDS = {
    "null": (None, {INVALID_RECORD}),
    "empty": (b"", {INVALID_RECORD}),
    "five-bytes": (b"\x00" * 5, {INVALID_RECORD, CORRUPT_MESSAGE}),
    "truncated-tail": (_GOOD[:-10], {INVALID_RECORD, CORRUPT_MESSAGE}),
    "header-only-half": (_GOOD[:30], {INVALID_RECORD, CORRUPT_MESSAGE}),
    "length-below-minimum": (_with(_GOOD, ">i", LENGTH_OFFSET, 5, fix_crc=False),
                             {CORRUPT_MESSAGE}),
    "length-negative": (_with(_GOOD, ">i", LENGTH_OFFSET, -2**31, fix_crc=False),
                        {CORRUPT_MESSAGE}),
    "length-beyond-buffer": (_with(_GOOD, ">i", LENGTH_OFFSET, 2**31 - 1, fix_crc=False),
                             {INVALID_RECORD, CORRUPT_MESSAGE}),
    "garbage": (bytes(range(256)) * 4, {INVALID_RECORD, CORRUPT_MESSAGE}),
    "last-offset-delta-wrong": (_with(_GOOD, ">i", LAST_OFFSET_DELTA_OFFSET, 7),
                                {INVALID_RECORD}),
    "count-int32-max": (_with(_GOOD, ">i", RECORDS_COUNT_OFFSET, 2**31 - 1),
                        {CORRUPT_MESSAGE, INVALID_RECORD}),
    "count-negative": (_with(_GOOD, ">i", RECORDS_COUNT_OFFSET, -1),
                       {CORRUPT_MESSAGE, INVALID_RECORD}),
    "unknown-codec": (_with(_GOOD, ">h", ATTRIBUTES_OFFSET, 7), {CORRUPT_MESSAGE}),
    "magic-1": (_with(_GOOD, ">b", MAGIC_OFFSET, 1, fix_crc=False), {INVALID_RECORD}),
    "magic-1-short": (_with(_GOOD, ">i", LENGTH_OFFSET, 25, fix_crc=False)[:MAGIC_OFFSET]
                      + b"\x01" + bytes(20), {INVALID_RECORD, CORRUPT_MESSAGE}),
    "magic-7": (_with(_GOOD, ">b", MAGIC_OFFSET, 7, fix_crc=False),
                {INVALID_RECORD, CORRUPT_MESSAGE}),
    "two-batches": (_GOOD + _GOOD, {INVALID_RECORD}),
    "batch-plus-garbage": (_GOOD + b"\x00" * 40, {INVALID_RECORD, CORRUPT_MESSAGE}),
    # not decompressed on a delete-policy topic, so storing it is fine too
    "corrupt-snappy": (_replace_records(_batch([b"x" * 500], CompressionType.SNAPPY),
                                        b"\x82SNAPPY\x00" + b"\xff" * 40),
                       {0, CORRUPT_MESSAGE}),
}


@pytest.mark.parametrize("case", list(_BAD_RECORDS))
def test_malformed_records_get_an_error_code_and_the_connection_stays(
        broker: BrokerProcess, case: str) -> None:
    records, allowed = _BAD_RECORDS[case]
    topic = f"rec-{case}"
    _create_topic(broker.port, topic)
    with _connect(broker.port) as sock:
        conn = ClientConnection()
        error, _ = _produce_result(_call(sock, conn, _produce_body(topic, records), 8))
        assert error in allowed, f"{case}: error {error}, expected one of {allowed}"
        # the connection is still usable and the log holds only what was accepted
        error2, offset = _produce_result(_call(sock, conn, _produce_body(topic, _GOOD), 8))
        assert error2 == 0
        assert records is not None or error != 0
        accepted = RecordBatch(records).records_count if error == 0 and records else 0
        assert offset == accepted


def test_batch_over_max_message_bytes_is_message_too_large(broker: BrokerProcess) -> None:
    big = _batch([bytes(range(256)) * 20])  # ~5 KB > max.message.bytes=2000 of "small"
    with _connect(broker.port) as sock:
        conn = ClientConnection()
        assert _produce_result(_call(sock, conn, _produce_body("small", big), 8))[0] \
            == MESSAGE_TOO_LARGE
        assert _produce_result(_call(sock, conn, _produce_body("small", _batch([b"ok"])), 8)) \
            == (0, 0)


# ---------------------------------------------------------------------------- compression bombs
@pytest.mark.parametrize(("codec", "streaming"), [
    (CompressionType.ZSTD, False), (CompressionType.ZSTD, True), (CompressionType.SNAPPY, False),
], ids=["zstd", "zstd-no-content-size", "snappy"])
def test_compression_bomb_is_stored_without_being_inflated(
        broker: BrokerProcess, codec: CompressionType, streaming: bool) -> None:
    """compression.type=producer: the broker checks the CRC and stores the blob as is.  It
    must answer, stay small, and hand the same bytes back to a fetch (inflating them is the
    consumer's business, and a capped decoder refuses)."""
    bomb = _bomb_batch(codec, STREAMED_BOMB_SIZE if streaming else BOMB_SIZE,
                       streaming_zstd=streaming)
    assert len(bomb) < MAX_REQUEST - 1024
    # a produce frame of a few MB costs some copies; the bomb's 200 MB must never appear
    budget = MEMORY_BUDGET + 4 * len(bomb)
    with _MemoryWatch(broker, budget), _connect(broker.port) as sock:
        conn = ClientConnection()
        error, base = _produce_result(_call(sock, conn, _produce_body("bombs", bomb), 8))
        assert error == 0
        fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=MAX_REQUEST, topics=[
            FetchRequest.FetchTopic(topic="bombs", partitions=[
                FetchRequest.FetchTopic.FetchPartition(
                    partition=0, fetch_offset=base, partition_max_bytes=MAX_REQUEST)])],
            forgotten_topics_data=[])
        resp = _call(sock, conn, fetch, 12)
    (part,) = resp.responses[0].partitions
    assert part.error_code == 0
    records = bytes(part.records)
    stored = RecordBatch(records)
    assert stored.base_offset == base
    assert stored.size == len(bomb)
    assert records[HEADER_SIZE:stored.size] == bomb[HEADER_SIZE:]
    stored.validate()
    with pytest.raises(DecompressionLimitError):
        stored.record_list()


@pytest.mark.parametrize(("codec", "streaming"), [
    (CompressionType.ZSTD, False), (CompressionType.ZSTD, True), (CompressionType.SNAPPY, False),
], ids=["zstd", "zstd-no-content-size", "snappy"])
def test_compression_bomb_to_a_compacted_topic_is_refused_within_the_cap(
        broker: BrokerProcess, codec: CompressionType, streaming: bool) -> None:
    """Compacted topics must look at the keys, so the broker decompresses: the 64 MiB cap
    refuses the bomb (CORRUPT_MESSAGE) and memory stays within the cap."""
    bomb = _bomb_batch(codec, STREAMED_BOMB_SIZE if streaming else BOMB_SIZE,
                       streaming_zstd=streaming)
    budget = MEMORY_BUDGET + 4 * len(bomb)
    if streaming:
        # no declared size: the bounded decoder grows its buffer 4x up to the cap, holding
        # the previous one meanwhile (about 1.8 x 64 MiB); far below the 1 GiB inside
        budget += 2 * DEFAULT_MAX_DECOMPRESSED
    with _MemoryWatch(broker, budget):
        error, _ = _produce_result(_rpc(broker.port, _produce_body("bombs-compacted", bomb), 8))
    assert error == CORRUPT_MESSAGE


# ---------------------------------------------------------------------------- slow clients
def test_slow_loris_connections_do_not_slow_other_clients(broker: BrokerProcess) -> None:
    conn_template = ClientConnection(client_id="slow")
    _, request = conn_template.send_request(MetadataRequest(topics=None), 12)
    n_slow, seconds = 20, 5
    assert len(request) > seconds
    errors: list[BaseException] = []
    answered: list[int] = []
    stop = threading.Event()

    def slow_clients() -> None:
        try:
            socks = [_connect(broker.port) for _ in range(n_slow)]
            try:
                for i in range(seconds):  # one byte per second per connection
                    for s in socks:
                        s.sendall(request[i:i + 1])
                    if stop.wait(1.0):
                        return
                for s in socks:  # finish the requests: each must still be answered
                    s.sendall(request[seconds:])
                for s in socks:
                    conn = ClientConnection(client_id="slow")
                    conn.send_request(MetadataRequest(topics=None), 12)
                    _read_responses(s, conn, 1)
                    answered.append(1)
            finally:
                for s in socks:
                    s.close()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    t = threading.Thread(target=slow_clients, daemon=True)
    t.start()
    round_trips: list[float] = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.monotonic()
            assert _rpc(broker.port, ApiVersionsRequest(client_software_name="probe",
                                                   client_software_version="1"), 3).error_code == 0
            round_trips.append(time.monotonic() - start)
            time.sleep(0.1)
    except BaseException:
        stop.set()
        raise
    finally:
        t.join(seconds + 10)
    assert not t.is_alive()
    assert not errors, errors
    assert len(answered) == n_slow
    assert len(round_trips) >= 10
    assert max(round_trips) < 1.0, round_trips


# ---------------------------------------------------------------------------- pipelining
@pytest.mark.parametrize("n", [50, 300])
def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess, n: int) -> None:
    """n requests written in one go: n responses, correlation ids ascending (300 is past the
    broker's per-connection queue of 64, so reading pauses and resumes)."""
    conn = ClientConnection()
    bodies = [(ApiVersionsRequest(), 0), (MetadataRequest(topics=None), 12),
              (ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3),
              (_produce_body("plain", _batch([b"p"])), 8)]
    data = b"".join(conn.send_request(*bodies[i % len(bodies)])[1] for i in range(n))
    send_errors: list[BaseException] = []

    def send(sock: socket.socket) -> None:
        try:
            sock.sendall(data)
        except BaseException as e:  # reported by the main thread
            send_errors.append(e)

    with _connect(broker.port) as sock:
        sender = threading.Thread(target=send, args=(sock,), daemon=True)
        sender.start()  # the broker may pause reading: write while we read
        try:
            responses = _read_responses(sock, conn, n, timeout=30.0)
        finally:
            sender.join(10)
    assert not send_errors, send_errors
    assert [r.correlation_id for r in responses] == list(range(n))
    produced = [r.body for r in responses if r.api.key == 0]
    offsets = [_produce_result(b)[1] for b in produced]
    assert all(_produce_result(b)[0] == 0 for b in produced)
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
