"""Every message at every version round-trips, and its decoder refuses damaged input.

Values come from ``valuegen``: the all-defaults value, then seeded random values built
from the declaration for that version.  For each we check

* ``decode(encode(x)) == x`` (fields absent in the version hold defaults on both sides)
  and ``encode(decode(b)) == b``;
* trailing bytes after a whole message raise ``ProtocolDecodeError`` naming them;
* every proper prefix (a truncated frame) raises ``ProtocolDecodeError`` and nothing else.
"""

from __future__ import annotations

import random
import uuid

import pytest

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import API, ApiKey, ProduceRequest
from millrace.protocol.codec import MessageCodec
from millrace.protocol.schema import F, request
from tests.unit.protocol.valuegen import (
    all_messages,
    message_id,
    present_values,
    random_message,
    samples,
)

MESSAGES = all_messages()
IDS = [message_id(c, v) for c, v in MESSAGES]
RANDOM_SAMPLES = 6


@pytest.mark.parametrize(("codec", "version"), MESSAGES, ids=IDS)
def test_defaults_round_trip(codec: MessageCodec, version: int) -> None:
    value = codec.cls()
    data = codec.encode(value, version)
    back = codec.decode(data, version)
    assert back == value
    assert codec.encode(back, version) == data


@pytest.mark.parametrize(("codec", "version"), MESSAGES, ids=IDS)
def test_random_values_round_trip(codec: MessageCodec, version: int) -> None:
    fields = codec.message.fields
    for value in samples(codec, version, seed=1, n=RANDOM_SAMPLES):
        data = codec.encode(value, version)
        back = codec.decode(data, version)
        assert present_values(back, fields, version) == present_values(value, fields, version)
        assert back == value  # absent fields: defaults on both sides
        assert codec.encode(back, version) == data


@pytest.mark.parametrize(("codec", "version"), MESSAGES, ids=IDS)
def test_trailing_bytes_are_refused(codec: MessageCodec, version: int) -> None:
    for value in samples(codec, version, seed=2, n=2):
        data = codec.encode(value, version)
        for garbage in (b"\x00", b"\xff\xff\xff\xff", b"junk"):
            with pytest.raises(ProtocolDecodeError, match=rf"{len(garbage)} trailing bytes"):
                codec.decode(data + garbage, version)
        # ... unless the caller asks for a prefix decode.
        obj, end = codec.decode_prefix(data + b"junk", version)
        assert end == len(data)
        assert obj == value


@pytest.mark.parametrize(("codec", "version"), MESSAGES, ids=IDS)
def test_every_truncation_is_a_decode_error(codec: MessageCodec, version: int) -> None:
    for value in samples(codec, version, seed=3, n=3):
        data = codec.encode(value, version)
        for cut in range(len(data)):
            try:
                codec.decode(data[:cut], version)
            except ProtocolDecodeError:
                continue
            pytest.fail(f"{codec.message.name} v{version}: prefix of {cut}/{len(data)} bytes "
                        "decoded without error")


@pytest.mark.parametrize(("codec", "version"), MESSAGES, ids=IDS)
def test_decode_accepts_any_buffer_type_and_offset(codec: MessageCodec, version: int) -> None:
    value = next(iter(samples(codec, version, seed=4, n=1)))
    data = codec.encode(value, version)
    assert codec.decode(bytearray(data), version) == codec.decode(data, version)
    assert codec.decode(memoryview(data), version) == codec.decode(data, version)
    assert codec.decode(b"HEAD" + data, version, pos=4) == codec.decode(data, version)


# ---------------------------------------------------------------- hand-checked layouts
def test_produce_v3_bytes_are_the_classic_layout() -> None:
    body = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=b"RB")])])
    data = API[ApiKey.PRODUCE].request.encode(body, 3)
    assert data == (b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x03\xe8"
                    + b"\x00\x00\x00\x01" + b"\x00\x01t"
                    + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x02RB")


def test_produce_v9_bytes_are_compact_with_tag_sections() -> None:
    body = ProduceRequest(transactional_id="tx", acks=1, timeout_ms=5, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=None)])])
    data = API[ApiKey.PRODUCE].request.encode(body, 9)
    assert data == (b"\x03tx" + b"\x00\x01" + b"\x00\x00\x00\x05"
                    + b"\x02" + b"\x02t" + b"\x02" + b"\x00\x00\x00\x00" + b"\x00"  # null records
                    + b"\x00"  # partition tags
                    + b"\x00"  # topic tags
                    + b"\x00")  # body tags


def test_produce_v13_uses_topic_id_instead_of_name() -> None:
    tid = uuid.UUID("0123456789abcdef0123456789abcdef")
    body = ProduceRequest(acks=1, timeout_ms=5, topic_data=[
        ProduceRequest.TopicProduceData(name="ignored", topic_id=tid, partition_data=[])])
    codec = API[ApiKey.PRODUCE].request
    data = codec.encode(body, 13)
    assert tid.bytes in data and b"ignored" not in data
    back = codec.decode(data, 13)
    assert back.topic_data[0].topic_id == tid
    assert back.topic_data[0].name == ""  # absent in v13: the default


def test_tagged_fields_are_written_only_when_set_and_in_tag_order() -> None:
    codec = API[ApiKey.API_VERSIONS].response
    cls = codec.cls
    plain = codec.encode(cls(error_code=0, api_keys=[], throttle_time_ms=0), 3)
    assert plain == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    body = cls(finalized_features_epoch=7, zk_migration_ready=True,
               supported_features=[cls.SupportedFeatureKey(name="f", min_version=1,
                                                           max_version=2)])
    data = codec.encode(body, 3)
    tags = data[7:]
    assert tags[0] == 3  # three tagged fields: 0, 1, 3 (2 is at its default)
    assert tags[1] == 0  # SupportedFeatures first
    assert tags.endswith(b"\x01\x08" + (7).to_bytes(8, "big") + b"\x03\x01\x01")
    assert codec.decode(data, 3) == body


def test_unknown_tagged_fields_are_skipped() -> None:
    codec = API[ApiKey.API_VERSIONS].request
    # client_software_name "a", version "b", then a tag section with unknown tag 9 (3 bytes).
    data = b"\x02a\x02b" + b"\x01" + b"\x09\x03xyz"
    body = codec.decode(data, 3)
    assert (body.client_software_name, body.client_software_version) == ("a", "b")


def test_tagged_field_whose_size_overruns_its_value_is_refused() -> None:
    codec = API[ApiKey.API_VERSIONS].response
    # finalized_features_epoch (tag 1, int64) declared as 9 bytes: one byte too many.
    data = b"\x00\x00\x01\x00\x00\x00\x00" + b"\x01\x01\x09" + bytes(9)
    with pytest.raises(ProtocolDecodeError, match="does not fill"):
        codec.decode(data, 3)


def test_unsupported_version_is_a_decode_error() -> None:
    codec = API[ApiKey.PRODUCE].request
    with pytest.raises(ProtocolDecodeError, match="no version 2"):
        codec.decode(b"", 2)


def test_null_in_a_non_nullable_field_is_refused_on_encode() -> None:
    codec = API[ApiKey.PRODUCE].request
    with pytest.raises(ValueError, match="topic_data"):
        codec.encode(ProduceRequest(topic_data=None), 9)
    body = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)])
    with pytest.raises(ValueError, match="name"):
        codec.encode(body, 3)


def test_non_bytes_records_need_encode_chunks() -> None:
    class Region:
        def __len__(self) -> int:
            return 5

    body = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(records=Region())])])
    with pytest.raises(TypeError, match="encode_chunks"):
        API[ApiKey.PRODUCE].request.encode(body, 3)


# ---------------------------------------------------------------- codec paths no API uses yet
SYNTHETIC = MessageCodec(request(
    "SyntheticRequest", 9999, "0-3", "2+",
    F("u16", "uint16", "0+"),
    F("f64", "float64", "0+"),
    F("i8s", "[]int8", "0+"),
    F("f64s", "[]float64", "1+", nullable="1+"),
    F("u16s", "[]uint16", "0+"),
    F("uuids", "[]uuid", "0+"),
    F("bools", "[]bool", "0+"),
    F("blob", "bytes", "0+", nullable="1+"),
    F("maybe", "Inner", "1+", F("a", "int32", "1+"), F("s", "string", "1+", nullable="1+"),
      nullable="1+"),
    F("recs", "records", "0+", nullable="0+"),
    F("tstr", "string", "2+", tag=0, tagged="2+", default="x"),
    F("tbytes", "bytes", "2+", tag=1, tagged="2+"),
    F("tarr", "[]int64", "2+", tag=2, tagged="2+"),
    F("tuuid", "uuid", "2+", tag=7, tagged="2+"),
    F("tstructs", "[]TaggedStruct", "2+", F("n", "string", "2+"),
      F("inner", "int32", "2+", tag=0, tagged="2+"), tag=3, tagged="2+"),
))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_synthetic_message_round_trips_and_refuses_truncation(version: int) -> None:
    rng = random.Random(version)
    for _ in range(40):
        value = random_message(SYNTHETIC, version, rng)
        data = SYNTHETIC.encode(value, version)
        assert SYNTHETIC.decode(data, version) == value
        for cut in range(len(data)):
            with pytest.raises(ProtocolDecodeError):
                SYNTHETIC.decode(data[:cut], version)


def test_nullable_struct_layout() -> None:
    cls = SYNTHETIC.cls
    base = SYNTHETIC.encode(cls(maybe=None), 1)
    present = SYNTHETIC.encode(cls(maybe=cls.Inner(a=5, s=None)), 1)
    # u16 f64 i8s f64s(null) u16s uuids bools blob | maybe | recs(null)
    head = 2 + 8 + 4 + 4 + 4 + 4 + 4 + 4
    assert base[head:head + 1] == b"\xff"
    assert present[head:head + 7] == b"\x01" + b"\x00\x00\x00\x05" + b"\xff\xff"
    assert SYNTHETIC.decode(base, 1).maybe is None
    assert SYNTHETIC.decode(present, 1).maybe == cls.Inner(a=5, s=None)
