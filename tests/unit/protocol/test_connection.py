"""ClientConnection / ServerConnection: headers, correlation, refusals, zero-copy chunks."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import (
    API,
    NEED_DATA,
    ApiKey,
    ApiVersionsFallback,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ClientConnection,
    ControlledShutdownRequest,
    CorrelationError,
    FetchResponse,
    HeartbeatRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    Request,
    RequestDecodeError,
    Response,
    ServerConnection,
    UnsupportedRequestError,
    api_versions_fallback_response,
)
from millrace.protocol.headers import (
    RequestHeader,
    read_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
)
from tests.unit.protocol.valuegen import samples


def server_event(server: ServerConnection, data: bytes, byte_by_byte: bool = False) -> Any:
    if byte_by_byte:
        for i in range(len(data)):
            server.receive_data(data[i:i + 1])
            if i < len(data) - 1:
                assert server.next_event() is NEED_DATA
    else:
        server.receive_data(data)
    return server.next_event()


def produce(acks: int = 1, version_name: str = "t") -> Any:
    return ProduceRequest(acks=acks, timeout_ms=100, topic_data=[
        ProduceRequest.TopicProduceData(name=version_name, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"batch")])])


# ---------------------------------------------------------------- requests
@pytest.mark.parametrize(("key", "version"), [
    (ApiKey.PRODUCE, 3), (ApiKey.PRODUCE, 9), (ApiKey.PRODUCE, 13), (ApiKey.FETCH, 11),
    (ApiKey.FETCH, 12), (ApiKey.METADATA, 0), (ApiKey.METADATA, 12), (ApiKey.API_VERSIONS, 0),
    (ApiKey.API_VERSIONS, 4), (ApiKey.JOIN_GROUP, 5), (ApiKey.JOIN_GROUP, 6),
    (ApiKey.SASL_HANDSHAKE, 1), (ApiKey.DESCRIBE_PRODUCERS, 0),
])
def test_client_request_decodes_on_the_server_byte_by_byte(key: int, version: int) -> None:
    codec = API[key].request
    client = ClientConnection(client_id="cli-ü")
    for body in samples(codec, version, seed=11, n=3):
        server = ServerConnection()
        cid, data = client.send_request(body, version)
        event = server_event(server, data, byte_by_byte=True)
        assert isinstance(event, Request)
        assert event.api is API[key]
        assert (event.version, event.correlation_id) == (version, cid)
        assert event.header == RequestHeader(key, version, cid, "cli-ü")
        assert event.body == body
        assert server.next_event() is NEED_DATA


def test_correlation_ids_count_up_and_pipelined_requests_split() -> None:
    client = ClientConnection()
    server = ServerConnection()
    sent = [client.send_request(MetadataRequest(topics=None), 1),
            client.send_request(HeartbeatRequest(group_id="g"), 4),
            client.send_request(ApiVersionsRequest(), 0)]
    assert [cid for cid, _ in sent] == [0, 1, 2]
    assert client.in_flight == 3
    server.receive_data(b"".join(data for _, data in sent))
    events = [server.next_event() for _ in range(3)]
    assert [e.correlation_id for e in events] == [0, 1, 2]
    assert [e.api.key for e in events] == [ApiKey.METADATA, ApiKey.HEARTBEAT,
                                           ApiKey.API_VERSIONS]
    assert server.next_event() is NEED_DATA


def test_null_client_id() -> None:
    client = ClientConnection(client_id=None)
    _, data = client.send_request(MetadataRequest(topics=[]), 4)
    assert data[12:14] == b"\xff\xff"
    event = server_event(ServerConnection(), data)
    assert event.header.client_id is None


# ---------------------------------------------------------------- header versions
def test_request_header_v1_for_non_flexible_versions() -> None:
    client = ClientConnection(client_id="ab")
    cid, data = client.send_request(MetadataRequest(topics=None), 8)
    size, key, version, got_cid = struct.unpack_from(">ihhi", data)
    assert (size, key, version, got_cid) == (len(data) - 4, 3, 8, cid)
    assert data[12:16] == b"\x00\x02ab"  # int16-length client_id
    assert data[16:20] == b"\xff\xff\xff\xff"  # body starts: null topics array (int32)
    assert request_header_version(ApiKey.METADATA, 8) == 1


def test_request_header_v2_for_flexible_versions_keeps_int16_client_id() -> None:
    client = ClientConnection(client_id="ab")
    _, data = client.send_request(MetadataRequest(topics=None), 9)
    assert data[12:16] == b"\x00\x02ab"  # still an int16 length, not compact
    assert data[16] == 0  # the header's empty tag section
    assert data[17] == 0  # body starts: compact null topics
    assert request_header_version(ApiKey.METADATA, 9) == 2
    header, pos = read_request_header(data[4:])
    assert (header.client_id, pos) == ("ab", 13)


@pytest.mark.parametrize(("key", "version", "expected"), [
    (ApiKey.METADATA, 8, 0), (ApiKey.METADATA, 9, 1), (ApiKey.PRODUCE, 9, 1),
    (ApiKey.SASL_HANDSHAKE, 1, 0), (ApiKey.API_VERSIONS, 0, 0), (ApiKey.API_VERSIONS, 3, 0),
    (ApiKey.API_VERSIONS, 4, 0),
])
def test_response_header_version(key: int, version: int, expected: int) -> None:
    assert response_header_version(key, version) == expected


def _serve(client: ClientConnection, body: Any, version: int) -> tuple[int, Request]:
    cid, data = client.send_request(body, version)
    event = server_event(ServerConnection(), data)
    assert isinstance(event, Request)
    return cid, event


def test_flexible_response_has_a_tag_section_after_the_correlation_id() -> None:
    client = ClientConnection()
    cid, request = _serve(client, MetadataRequest(topics=None), 9)
    data = ServerConnection.encode_response(request, MetadataResponse())
    assert struct.unpack_from(">ii", data) == (len(data) - 4, cid)
    assert data[8] == 0  # response header v1: empty tag section
    assert read_response_header(data[4:], 1) == (cid, 5)


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_response_uses_header_v0_even_when_flexible(version: int) -> None:
    client = ClientConnection()
    cid, request = _serve(client, ApiVersionsRequest(client_software_name="m",
                                                     client_software_version="1"), version)
    body = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    data = ServerConnection.encode_response(request, body)
    assert struct.unpack_from(">i", data, 4)[0] == cid
    # No tag byte: the body (error_code int16 = 0, compact array of 1 = 0x02) follows.
    assert data[8:11] == b"\x00\x00\x02"
    assert data[8:] == API[ApiKey.API_VERSIONS].response.encode(body, version)
    client.receive_data(data)
    response = client.next_event()
    assert isinstance(response, Response)
    assert (response.correlation_id, response.version, response.body) == (cid, version, body)


# ---------------------------------------------------------------- responses on the client
def test_responses_matched_by_correlation_id_in_order() -> None:
    client = ClientConnection()
    server = ServerConnection()
    _, d1 = client.send_request(MetadataRequest(topics=None), 12)
    _, d2 = client.send_request(produce(), 9)
    server.receive_data(d1 + d2)
    r1, r2 = server.next_event(), server.next_event()
    m = MetadataResponse(cluster_id="c", controller_id=1)
    p = ProduceResponse(throttle_time_ms=3)
    p_bytes = ServerConnection.encode_response(r2, p)
    stream = ServerConnection.encode_response(r1, m) + p_bytes
    timed = []
    for i in range(len(stream)):  # byte by byte on the client side too
        client.receive_data(stream[i:i + 1])
        while (event := client.next_event()) is not NEED_DATA:
            timed.append((i, event))
    # Each response is handed out on the byte that completes it, not before.
    assert [i for i, _ in timed] == [len(stream) - len(p_bytes) - 1, len(stream) - 1]
    got: list[Any] = [event for _, event in timed]
    assert [(g.correlation_id, g.api.key, g.version) for g in got] == [
        (0, ApiKey.METADATA, 12), (1, ApiKey.PRODUCE, 9)]
    assert got[0].body == m and got[1].body == p
    assert client.in_flight == 0
    assert client.next_event() is NEED_DATA


def test_response_with_the_wrong_correlation_id_is_refused() -> None:
    client = ClientConnection()
    client.send_request(MetadataRequest(topics=None), 1)
    client.send_request(MetadataRequest(topics=None), 1)
    body = API[ApiKey.METADATA].response.encode(MetadataResponse(), 1)
    client.receive_data(struct.pack(">ii", 4 + len(body), 1) + body)  # answers #1 before #0
    with pytest.raises(CorrelationError, match="expected the response to correlation id 0"):
        client.next_event()
    assert issubclass(CorrelationError, ProtocolDecodeError)


def test_response_without_a_request_in_flight_is_refused() -> None:
    client = ClientConnection()
    client.receive_data(b"\x00\x00\x00\x04\x00\x00\x00\x00")
    with pytest.raises(CorrelationError, match="no request is in flight"):
        client.next_event()


def test_acks_0_produce_is_not_awaited() -> None:
    client = ClientConnection()
    cid0, _ = client.send_request(produce(acks=0), 9, expect_response=False)
    assert client.in_flight == 0
    cid1, _ = client.send_request(MetadataRequest(topics=None), 12)
    assert (cid0, cid1) == (0, 1)  # the id is still consumed
    assert client.in_flight == 1
    body = API[ApiKey.METADATA].response.encode(MetadataResponse(), 12)
    client.receive_data(struct.pack(">i", 5 + len(body)) + struct.pack(">i", 1) + b"\x00" + body)
    event = client.next_event()
    assert isinstance(event, Response) and event.correlation_id == 1


def test_bad_response_body_raises_decode_error() -> None:
    client = ClientConnection()
    client.send_request(MetadataRequest(topics=None), 1)
    client.receive_data(struct.pack(">ii", 6, 0) + b"\x7f\x7f")
    with pytest.raises(ProtocolDecodeError):
        client.next_event()


# ---------------------------------------------------------------- ApiVersions fallback
def test_api_versions_above_our_maximum_yields_fallback() -> None:
    data = (struct.pack(">hhi", 18, 5, 77) + b"\x00\x03cli" + b"\x00"
            + b"future body we cannot parse")
    event = server_event(ServerConnection(), struct.pack(">i", len(data)) + data)
    assert isinstance(event, ApiVersionsFallback)
    assert event.header == RequestHeader(18, 5, 77, "cli")


def test_fallback_response_bytes() -> None:
    data = api_versions_fallback_response(77, 4)
    assert data == (struct.pack(">i", 16)       # size
                    + struct.pack(">i", 77)     # correlation id (header v0)
                    + struct.pack(">h", 35)     # UNSUPPORTED_VERSION
                    + struct.pack(">i", 1)      # array of one (int32 count: v0 layout)
                    + struct.pack(">hhh", 18, 0, 4))  # ApiVersions 0..4; no throttle time


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_client_reads_the_fallback_as_v0(version: int) -> None:
    client = ClientConnection()
    cid, _ = client.send_request(ApiVersionsRequest(), version)
    client.receive_data(api_versions_fallback_response(cid, 2))
    event = client.next_event()
    assert isinstance(event, Response)
    assert event.version == 0
    assert event.body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in event.body.api_keys] == [
        (18, 0, 2)]


def test_broken_api_versions_v0_response_is_not_retried() -> None:
    client = ClientConnection()
    client.send_request(ApiVersionsRequest(), 0)
    client.receive_data(struct.pack(">ii", 7, 0) + b"\x00\x23\x00")
    with pytest.raises(ProtocolDecodeError):
        client.next_event()


# ---------------------------------------------------------------- refusals on the server
def _request_frame(key: int, version: int, cid: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhi", key, version, cid) + b"\x00\x01c" + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("key", [34, 38, 68, 1000, -1])  # 34: AlterReplicaLogDirs, not declared
def test_unknown_api_key_is_refused_with_its_header(key: int) -> None:
    with pytest.raises(UnsupportedRequestError, match=f"unknown api key {key}") as info:
        server_event(ServerConnection(), _request_frame(key, 0, 42))
    assert info.value.header == RequestHeader(key, 0, 42, "c")


@pytest.mark.parametrize(("key", "version"), [
    (ApiKey.PRODUCE, 2), (ApiKey.PRODUCE, 14), (ApiKey.FETCH, 3), (ApiKey.METADATA, -1),
])
def test_version_outside_the_declared_range_is_refused(key: int, version: int) -> None:
    with pytest.raises(UnsupportedRequestError, match="not supported") as info:
        server_event(ServerConnection(), _request_frame(key, version, 9))
    assert info.value.header.correlation_id == 9
    assert info.value.header.api_version == version


# ---------------------------------------------------------------- ControlledShutdown v0
def test_controlled_shutdown_v0_uses_request_header_v0_without_client_id() -> None:
    assert [request_header_version(ApiKey.CONTROLLED_SHUTDOWN, v) for v in range(4)] == [
        0, 1, 1, 2]
    assert [response_header_version(ApiKey.CONTROLLED_SHUTDOWN, v) for v in range(4)] == [
        0, 0, 0, 1]
    client = ClientConnection(client_id="broker-1")
    cid, data = client.send_request(ControlledShutdownRequest(broker_id=3), 0)
    # size, api key 7, version 0, correlation id, then straight to the body: broker_id 3.
    assert data == struct.pack(">ihhi", 12, 7, 0, cid) + b"\x00\x00\x00\x03"
    event = server_event(ServerConnection(), data, byte_by_byte=True)
    assert isinstance(event, Request)
    assert event.header == RequestHeader(7, 0, cid, None)
    assert event.body == ControlledShutdownRequest(broker_id=3)


def test_controlled_shutdown_v1_keeps_the_client_id() -> None:
    client = ClientConnection(client_id="b")
    cid, data = client.send_request(ControlledShutdownRequest(broker_id=3), 1)
    assert data == struct.pack(">ihhi", 15, 7, 1, cid) + b"\x00\x01b" + b"\x00\x00\x00\x03"
    event = server_event(ServerConnection(), data)
    assert event.header == RequestHeader(7, 1, cid, "b")


def test_unserved_controlled_shutdown_v0_is_refused_without_reading_a_client_id() -> None:
    # broker_id 0x00050000 read as a client id would be a 5-byte string past the frame's end.
    frame = struct.pack(">ihhi", 12, 7, 0, 77) + b"\x00\x05\x00\x00"
    with pytest.raises(UnsupportedRequestError, match="unknown api key 7") as info:
        server_event(ServerConnection(enabled={}), frame)
    assert info.value.header == RequestHeader(7, 0, 77, None)
    with pytest.raises(UnsupportedRequestError, match="not supported") as info:
        server_event(ServerConnection(enabled={ApiKey.CONTROLLED_SHUTDOWN: (1, 3)}), frame)
    assert info.value.header == RequestHeader(7, 0, 77, None)


def test_disabled_versions_and_apis_are_refused() -> None:
    server = ServerConnection(enabled={ApiKey.METADATA: (4, 8), ApiKey.API_VERSIONS: (0, 2)})
    with pytest.raises(UnsupportedRequestError, match="enabled: 4-8"):
        server_event(server, _request_frame(ApiKey.METADATA, 9, 1))
    with pytest.raises(UnsupportedRequestError, match="unknown api key 0"):
        server_event(ServerConnection(enabled={}), _request_frame(ApiKey.PRODUCE, 9, 1))
    # ApiVersions above the enabled max is answered, not refused.
    event = server_event(ServerConnection(enabled={ApiKey.API_VERSIONS: (0, 2)}),
                         _request_frame(ApiKey.API_VERSIONS, 3, 5))
    assert isinstance(event, ApiVersionsFallback) and event.header.correlation_id == 5
    event = server_event(server, _request_frame(ApiKey.METADATA, 4, 2, b"\xff\xff\xff\xff\x01"))
    assert isinstance(event, Request) and event.body.topics is None


def test_garbage_body_carries_the_correlation_id() -> None:
    with pytest.raises(RequestDecodeError) as info:
        server_event(ServerConnection(), _request_frame(ApiKey.METADATA, 4, 31337, b"\x00\x00"))
    assert info.value.header.correlation_id == 31337
    assert info.value.header.api_key == ApiKey.METADATA
    assert isinstance(info.value, ProtocolDecodeError)


def test_trailing_bytes_after_a_request_body_are_ignored_like_kafka() -> None:
    # librdkafka 2.x appends bytes after a Metadata v13 body; Kafka's broker ignores them.
    event = server_event(ServerConnection(),
                         _request_frame(ApiKey.METADATA, 1, 3, b"\xff\xff\xff\xffXX"))
    assert isinstance(event, Request) and event.body.topics is None
    assert event.correlation_id == 3


def test_frame_shorter_than_a_header_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError):
        server_event(ServerConnection(), b"\x00\x00\x00\x03abc")


def test_oversized_request_frame_is_refused_before_the_body() -> None:
    server = ServerConnection(max_frame_size=64)
    server.receive_data(struct.pack(">i", 65))
    with pytest.raises(ProtocolDecodeError, match="exceeds the maximum"):
        server.next_event()


# ---------------------------------------------------------------- zero-copy responses
class Region:
    """Stands in for the broker's file-range handle: has a length, is not bytes."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_encode_response_chunks_leaves_records_regions_in_place(version: int) -> None:
    client = ClientConnection()
    cid, _ = client.send_request(API[ApiKey.FETCH].request.cls(), version)
    request = Request(RequestHeader(ApiKey.FETCH, version, cid, "c"), API[ApiKey.FETCH], None)
    region = Region(1000)
    P = FetchResponse.FetchableTopicResponse.PartitionData
    body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[P(partition_index=0, records=region),
                               P(partition_index=1, records=b"inline")])])
    parts = ServerConnection.encode_response_chunks(request, body)
    assert len(parts) == 3
    head, middle, tail = parts
    assert isinstance(head, bytes) and middle is region and isinstance(tail, bytes)
    assert struct.unpack_from(">i", head)[0] == len(head) - 4 + len(region) + len(tail)
    assert struct.unpack_from(">i", head, 4)[0] == cid
    # Replace the region by 1000 bytes and the result decodes as the same response.
    data = head + b"R" * 1000 + tail
    client.receive_data(data)
    event = client.next_event()
    parts_back = event.body.responses[0].partitions
    assert parts_back[0].records == b"R" * 1000
    assert parts_back[1].records == b"inline"
    with pytest.raises(TypeError, match="encode_response_chunks"):
        ServerConnection.encode_response(request, body)


def test_encode_response_chunks_without_regions_is_one_chunk() -> None:
    request = Request(RequestHeader(ApiKey.PRODUCE, 9, 1, None), API[ApiKey.PRODUCE], None)
    parts = ServerConnection.encode_response_chunks(request, ProduceResponse())
    assert parts == [ServerConnection.encode_response(request, ProduceResponse())]
    assert len(parts) == 1 and struct.unpack_from(">i", parts[0])[0] == len(parts[0]) - 4


def test_client_refuses_file_regions() -> None:
    body = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(records=Region(3))])])
    with pytest.raises(TypeError):
        ClientConnection().send_request(body, 9)
