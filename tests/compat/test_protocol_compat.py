"""Our codec against kafka-python's (3.x) protocol classes, in both directions.

kafka-python builds its message classes from the same upstream JSON schemas, with an
independent encoder and decoder: a value we encode must decode there to the same field
values, and bytes it encodes must decode here to the same value -- byte for byte the
same encoding, since both follow Kafka's rules (tags in ascending order, defaults
omitted).  Bodies are checked for the APIs and versions the brief names and then for
every message at every version; whole frames (size + header + body) are compared for
requests and responses, flexible and not, including ApiVersions' header-v0 rule and
the UNSUPPORTED_VERSION fallback.

kafka-python's deliberate differences, translated here: it exposes the
``*authorized_operations`` int32 bit fields as a set of bit numbers (None for
INT32_MIN) and renames Metadata's/DescribeCluster's to ``authorized_operations``; it
decodes any ApiVersions response whose error_code is non-zero in the v0 layout.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import struct
import warnings
from typing import Any

import pytest

from millrace.protocol import (
    API,
    ApiKey,
    ApiVersionsResponse,
    ClientConnection,
    Request,
    Response,
    ServerConnection,
    api_versions_fallback_response,
)
from millrace.protocol.codec import MessageCodec
from millrace.protocol.headers import RequestHeader
from millrace.protocol.schema import Field
from millrace.protocol.struct import Struct
from tests.unit.protocol.valuegen import all_messages, message_id, random_message

pytestmark = pytest.mark.compat

INT32_MIN = -(2**31)


def _kafka_python_classes() -> dict[str, Any]:
    # kafka-python reads its schemas with importlib.resources.read_text (deprecated).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.api_message import ApiMessage

        found: dict[str, Any] = {}
        modules = [importlib.import_module("kafka.protocol.sasl")]
        for sub in ("producer", "consumer", "metadata", "admin"):
            pkg = importlib.import_module(f"kafka.protocol.{sub}")
            modules += [importlib.import_module(f"kafka.protocol.{sub}.{m.name}")
                        for m in pkgutil.iter_modules(pkg.__path__)]
    for mod in modules:
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                found[obj.__name__] = obj
    return found


KP = _kafka_python_classes()

# The cluster APIs kafka-python has no class for (ZooKeeper-mode inter-broker APIs, gone in
# Kafka 4.0, and controller-only AlterPartition): tests/unit/protocol/test_cluster_messages.py
# holds their layouts with hand-derived bytes instead.
NO_KAFKA_PYTHON = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                   ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION}
COMPARED = [(c, v) for c, v in all_messages() if c.message.api_key not in NO_KAFKA_PYTHON]
# APIs kafka-python (built from Kafka 4.x's JSON) has a newer version of than Kafka 3.9,
# the broker we follow, serves: DescribeLogDirs v5 (IsCordoned, KIP-1066).
NEWER_IN_KAFKA_PYTHON = {ApiKey.DESCRIBE_LOG_DIRS: 5}

# (message, our field name) -> kafka-python's name, for fields it patches into bit sets.
BITFIELDS = {
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("MetadataResponse", "topic_authorized_operations"): "authorized_operations",
    ("DescribeClusterResponse", "cluster_authorized_operations"): "authorized_operations",
    ("DescribeGroupsResponse", "authorized_operations"): "authorized_operations",
}

# The versions the brief names: non-flexible and flexible ones of the busiest APIs.
NAMED_VERSIONS = {
    ApiKey.PRODUCE: (3, 7, 9, 11), ApiKey.FETCH: (4, 11, 12, 17),
    ApiKey.METADATA: (1, 5, 9, 12), ApiKey.JOIN_GROUP: (0, 5, 6, 9),
    ApiKey.SYNC_GROUP: (0, 3, 4, 5), ApiKey.OFFSET_COMMIT: (2, 7, 8, 9),
    ApiKey.API_VERSIONS: (0, 2, 3, 4),
}


# ---------------------------------------------------------------- translation
def to_bitset(value: int) -> set[int] | None:
    if value == INT32_MIN:
        return None
    return {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}


def from_bitset(bits: set[int] | None) -> int:
    if bits is None:
        return INT32_MIN
    value = sum(1 << i for i in bits)
    return value - 2**32 if value >= 2**31 else value


def kp_name(message: str, f: Field) -> str:
    return BITFIELDS.get((message, f.name), f.name)


def to_kafka_python(value: Struct, fields: tuple[Field, ...], kp_cls: Any, version: int,
                    message: str) -> Any:
    """Build kafka-python's object holding the same values as ours at ``version``."""
    kwargs: dict[str, Any] = {}
    defaults = type(value)()
    for f in fields:
        if not f.present_in(version):
            continue
        x = getattr(value, f.name)
        if f.tagged_in(version) and x == getattr(defaults, f.name):
            continue  # unset tagged field: leave kafka-python's default
        if (message, f.name) in BITFIELDS:
            x = to_bitset(x)
        elif f.is_struct and x is not None:
            sub = getattr(kp_cls, f.element_type)
            x = ([to_kafka_python(e, f.fields, sub, version, message) for e in x] if f.is_array
                 else to_kafka_python(x, f.fields, sub, version, message))
        kwargs[kp_name(message, f)] = x
    return kp_cls(version=version, **kwargs)


def differences(ours: Struct, theirs: Any, fields: tuple[Field, ...], version: int,
                message: str, path: str = "") -> list[str]:
    """Field-by-field differences between our value and kafka-python's at ``version``."""
    out: list[str] = []
    defaults = type(ours)()
    for f in fields:
        if not f.present_in(version):
            continue
        where = f"{path}.{f.name}"
        a, b = getattr(ours, f.name), getattr(theirs, kp_name(message, f))
        if (message, f.name) in BITFIELDS:
            b = from_bitset(b)
        if f.tagged_in(version) and a == getattr(defaults, f.name) and b is None:
            continue  # kafka-python's default for an unset tagged struct is None
        if f.is_struct and a is not None and b is not None:
            if not f.is_array:
                out += differences(a, b, f.fields, version, message, where)
            elif len(a) != len(b):
                out.append(f"{where}: {len(a)} elements != {len(b)}")
            else:
                for i, (x, y) in enumerate(zip(a, b)):
                    out += differences(x, y, f.fields, version, message, f"{where}[{i}]")
        elif f.type in ("bytes", "records") and a is not None and b is not None:
            if bytes(a) != bytes(b):
                out.append(f"{where}: {a!r} != {b!r}")
        elif a != b:
            out.append(f"{where}: {a!r} != {b!r}")
    return out


def sample_values(codec: MessageCodec, version: int, n: int, seed: int) -> list[Struct]:
    rng = random.Random(f"compat/{codec.message.name}/{version}/{seed}")
    values = [codec.cls()]
    for _ in range(n):
        value = random_message(codec, version, rng)
        if codec.message.name == "ApiVersionsResponse" and version > 0:
            value.error_code = 0  # kafka-python reads error != 0 in the v0 layout
        values.append(value)
    return values


def check_both_ways(codec: MessageCodec, version: int, n: int, seed: int) -> None:
    name = codec.message.name
    kp_cls = KP[name]
    fields = codec.message.fields
    for value in sample_values(codec, version, n, seed):
        ours = codec.encode(value, version)
        decoded = kp_cls.decode(ours, version=version)
        assert differences(value, decoded, fields, version, name) == [], value
        theirs = bytes(to_kafka_python(value, fields, kp_cls, version, name).encode(
            version=version))
        assert codec.decode(theirs, version) == value
        assert theirs == ours


def _named_cases() -> list[Any]:
    return [pytest.param(codec, v, id=message_id(codec, v))
            for key, versions in NAMED_VERSIONS.items()
            for codec in (API[key].request, API[key].response) for v in versions]


@pytest.mark.parametrize(("codec", "version"), _named_cases())
def test_named_versions_interoperate(codec: MessageCodec, version: int) -> None:
    check_both_ways(codec, version, n=12, seed=1)


@pytest.mark.parametrize(("codec", "version"), COMPARED,
                         ids=[message_id(c, v) for c, v in COMPARED])
def test_every_message_interoperates(codec: MessageCodec, version: int) -> None:
    check_both_ways(codec, version, n=3, seed=2)


def test_every_message_has_a_kafka_python_class() -> None:
    for api in API.values():
        if api.key in NO_KAFKA_PYTHON:
            assert f"{api.name}Request" not in KP  # else: compare it
            continue
        for codec in (api.request, api.response):
            kp_cls = KP[codec.message.name]
            assert api.key == kp_cls.API_KEY
            assert kp_cls.max_version == NEWER_IN_KAFKA_PYTHON.get(
                api.key, codec.message.versions.high)


def test_bitset_translation() -> None:
    for value in (0, 1, -1, 2**31 - 1, INT32_MIN + 1, 0x0FF0):
        assert from_bitset(to_bitset(value)) == value
    assert to_bitset(INT32_MIN) is None


# ---------------------------------------------------------------- whole frames
CLIENT_ID = "compat-ü"


@pytest.mark.parametrize(("key", "version"), [
    (ApiKey.METADATA, 8), (ApiKey.METADATA, 9), (ApiKey.PRODUCE, 7), (ApiKey.PRODUCE, 9),
    (ApiKey.FETCH, 11), (ApiKey.FETCH, 12), (ApiKey.API_VERSIONS, 2), (ApiKey.API_VERSIONS, 3),
    (ApiKey.JOIN_GROUP, 5), (ApiKey.JOIN_GROUP, 6), (ApiKey.SASL_HANDSHAKE, 1),
])
def test_request_frames_match_kafka_python(key: int, version: int) -> None:
    codec = API[key].request
    name = codec.message.name
    for value in sample_values(codec, version, n=3, seed=3):
        client = ClientConnection(client_id=CLIENT_ID)
        client.send_request(codec.cls(), version)  # use up correlation id 0
        cid, ours = client.send_request(value, version)
        kp_obj = to_kafka_python(value, codec.message.fields, KP[name], version, name)
        kp_obj.with_header(correlation_id=cid, client_id=CLIENT_ID)
        theirs = bytes(kp_obj.encode(version=version, header=True, framed=True))
        assert theirs == ours
        decoded = KP[name].decode(ours, version=version, header=True, framed=True)
        header = decoded.header
        assert (header.request_api_key, header.request_api_version, header.correlation_id,
                header.client_id) == (key, version, cid, CLIENT_ID)
        server = ServerConnection()
        server.receive_data(theirs)
        event = server.next_event()
        assert isinstance(event, Request)
        assert event.header == RequestHeader(key, version, cid, CLIENT_ID)
        assert event.body == value


@pytest.mark.parametrize(("key", "version"), [
    (ApiKey.METADATA, 8), (ApiKey.METADATA, 12), (ApiKey.PRODUCE, 8), (ApiKey.PRODUCE, 11),
    (ApiKey.FETCH, 11), (ApiKey.FETCH, 17), (ApiKey.API_VERSIONS, 2), (ApiKey.API_VERSIONS, 3),
    (ApiKey.API_VERSIONS, 4), (ApiKey.SYNC_GROUP, 3), (ApiKey.SYNC_GROUP, 4),
])
def test_response_frames_match_kafka_python(key: int, version: int) -> None:
    codec = API[key].response
    name = codec.message.name
    for value in sample_values(codec, version, n=3, seed=4):
        client = ClientConnection()
        cid, request_bytes = client.send_request(API[key].request.cls(), version)
        server = ServerConnection()
        server.receive_data(request_bytes)
        request = server.next_event()
        assert isinstance(request, Request)
        ours = ServerConnection.encode_response(request, value)
        kp_obj = to_kafka_python(value, codec.message.fields, KP[name], version, name)
        kp_obj.with_header(correlation_id=cid)
        # (the version comes from the constructor: kafka-python cannot re-set it on a
        # response once it has a header)
        theirs = bytes(kp_obj.encode(header=True, framed=True))
        assert theirs == ours
        decoded = KP[name].decode(ours, version=version, header=True, framed=True)
        assert decoded.header.correlation_id == cid
        assert differences(value, decoded, codec.message.fields, version, name) == []
        client.receive_data(theirs)
        event = client.next_event()
        assert isinstance(event, Response)
        assert (event.correlation_id, event.version, event.body) == (cid, version, value)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_v0_for_kafka_python_too(version: int) -> None:
    body = ApiVersionsResponse(api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=a.versions.low,
                                       max_version=a.versions.high)
        for k, a in sorted(API.items())])
    request = Request(RequestHeader(ApiKey.API_VERSIONS, version, 9, "c"),
                      API[ApiKey.API_VERSIONS], None)
    ours = ServerConnection.encode_response(request, body)
    assert ours[8:10] == b"\x00\x00"  # the error code follows the correlation id directly
    decoded = KP["ApiVersionsResponse"].decode(ours, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 9
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [
        (k, a.versions.low, a.versions.high) for k, a in sorted(API.items())]


def test_kafka_python_reads_our_unsupported_version_fallback() -> None:
    data = api_versions_fallback_response(12, 4)
    decoded = KP["ApiVersionsResponse"].decode(data, version=3, header=True, framed=True)
    assert decoded.header.correlation_id == 12
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]
    # kafka-python's own v0 error response has the same bytes.
    kp_obj = KP["ApiVersionsResponse"](version=0, error_code=35, api_keys=[
        KP["ApiVersionsResponse"].ApiVersion(api_key=18, min_version=0, max_version=4)])
    kp_obj.with_header(correlation_id=12)
    assert bytes(kp_obj.encode(header=True, framed=True)) == data


def test_kafka_python_api_versions_request_above_our_max_gets_the_fallback() -> None:
    kp_obj = KP["ApiVersionsRequest"](version=4, client_software_name="kafka-python",
                                      client_software_version="3.0")
    kp_obj.with_header(correlation_id=5, client_id="kp")
    data = bytearray(kp_obj.encode(version=4, header=True, framed=True))
    struct.pack_into(">h", data, 6, 5)  # claim version 5, which nobody knows yet
    server = ServerConnection()
    server.receive_data(bytes(data))
    event = server.next_event()
    assert type(event).__name__ == "ApiVersionsFallback"
    assert (event.header.correlation_id, event.header.client_id) == (5, "kp")
