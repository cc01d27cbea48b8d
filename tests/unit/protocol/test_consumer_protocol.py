"""ConsumerProtocol Subscription/Assignment payloads and the sticky assignor's user data:
exact bytes per version, kafka-python's encoder as the oracle, round trips, newer versions
read by their known prefix, every truncation, trailing bytes, hostile input rejected with
ProtocolDecodeError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.common.errors import ProtocolDecodeError
from millrace.common.topic_partition import TopicPartition
from millrace.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)

kafka_metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
KpAssignment = kafka_metadata.ConsumerProtocolAssignment
KpSubscription = kafka_metadata.ConsumerProtocolSubscription

TP = TopicPartition


# ---------------------------------------------------------------------- decoding kafka-python's bytes
def _kp_assignment(version: int, user_data: bytes | None) -> bytes:
    data: bytes = KpAssignment(
        version=version, user_data=user_data, assigned_partitions=[
            KpAssignment.TopicPartition(topic="orders", partitions=[0, 2]),
            KpAssignment.TopicPartition(topic="clicks", partitions=[5])]).encode(version=version)
    return data


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("user_data", [None, b"", b"\x00sticky"])
def test_assignment_decodes_kafka_python_bytes(version: int, user_data: bytes | None) -> None:
    data = _kp_assignment(version, user_data)
    a = decode_assignment(data)
    assert a.version == version
    assert a.partitions == [TP("orders", 0), TP("orders", 2), TP("clicks", 5)]
    assert a.user_data == user_data
    assert encode_assignment(a) == data


def test_assignment_hand_built_layout() -> None:
    data = (struct.pack(">h", 0) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
            + struct.pack(">i", 2) + struct.pack(">ii", 7, 3) + struct.pack(">i", -1))
    assert decode_assignment(data) == Assignment([TP("t", 7), TP("t", 3)], None, 0)
    assert decode_assignment(data).version == 0  # equality leaves the version out


def test_empty_bytes_are_an_empty_assignment() -> None:
    assert decode_assignment(b"") == Assignment([], None, 0)
    assert decode_assignment(b"").version == 0


def test_every_truncation_fails_cleanly() -> None:
    data = _kp_assignment(1, b"ud")
    for cut in range(1, len(data)):
        with pytest.raises(ProtocolDecodeError):
            decode_assignment(data[:cut])


def test_trailing_bytes_at_a_known_version_fail() -> None:
    with pytest.raises(ProtocolDecodeError, match="trailing"):
        decode_assignment(_kp_assignment(3, None) + b"\x00")


def test_a_newer_version_is_read_as_the_newest_known() -> None:
    data = bytearray(_kp_assignment(3, b"u"))
    data[0:2] = struct.pack(">h", 7)
    a = decode_assignment(bytes(data) + b"future fields")
    assert a.version == 7 and a.user_data == b"u" and len(a.partitions) == 3


def test_negative_version_and_huge_counts_fail() -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_assignment(struct.pack(">h", -1) + struct.pack(">i", 0) + struct.pack(">i", -1))
    with pytest.raises(ProtocolDecodeError, match="claims"):
        decode_assignment(struct.pack(">h", 0) + struct.pack(">i", 2**31 - 1))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips_with_kafka_python(version: int) -> None:
    fields: dict[str, object] = {"version": version, "topics": ["a", "b"], "user_data": b"x"}
    if version >= 1:
        fields["owned_partitions"] = [KpSubscription.TopicPartition(topic="a", partitions=[1])]
    if version >= 2:
        fields["generation_id"] = 5
    if version >= 3:
        fields["rack_id"] = "rack-1"
    data = KpSubscription(**fields).encode(version=version)
    s = decode_subscription(data)
    assert s.topics == ["a", "b"] and s.user_data == b"x" and s.version == version
    assert s.owned_partitions == ([TP("a", 1)] if version >= 1 else [])
    assert s.generation_id == (5 if version >= 2 else -1)
    assert s.rack_id == ("rack-1" if version >= 3 else None)
    assert encode_subscription(s) == data
    back = KpSubscription.decode(encode_subscription(s), version=version)
    assert list(back.topics) == ["a", "b"]


def test_subscription_truncations_fail() -> None:
    data = encode_subscription(Subscription(["t"], b"u", [TP("t", 0)], 3, "r"))
    for cut in range(0, len(data)):
        with pytest.raises(ProtocolDecodeError):
            decode_subscription(data[:cut])


# ---------------------------------------------------------------------- exact bytes per version
SUB = Subscription(["a", "bc"], None, [TopicPartition("a", 0), TopicPartition("a", 2)], 5,
                   "r1")
TOPICS = b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc"
NULL_BYTES = b"\xff\xff\xff\xff"
OWNED = b"\x00\x00\x00\x01" + b"\x00\x01a" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" \
    + b"\x00\x00\x00\x02"
EXPECTED_SUBSCRIPTION = {
    0: b"\x00\x00" + TOPICS + NULL_BYTES,
    1: b"\x00\x01" + TOPICS + NULL_BYTES + OWNED,
    2: b"\x00\x02" + TOPICS + NULL_BYTES + OWNED + b"\x00\x00\x00\x05",
    3: b"\x00\x03" + TOPICS + NULL_BYTES + OWNED + b"\x00\x00\x00\x05" + b"\x00\x02r1",
}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_per_version(version: int) -> None:
    data = encode_subscription(SUB, version)
    assert data == EXPECTED_SUBSCRIPTION[version]
    back = decode_subscription(data)
    assert back.topics == SUB.topics
    assert back.owned_partitions == (SUB.owned_partitions if version >= 1 else [])
    assert back.generation_id == (5 if version >= 2 else -1)
    assert back.rack_id == ("r1" if version >= 3 else None)


def test_subscription_user_data_and_null_rack() -> None:
    sub = Subscription(["t"], b"\x00\x00\x00\x07", [], -1, None)
    data = encode_subscription(sub)
    assert data == (b"\x00\x03\x00\x00\x00\x01\x00\x01t" + b"\x00\x00\x00\x04\x00\x00\x00\x07"
                    + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\xff\xff")
    assert decode_subscription(data) == sub


def test_assignment_bytes() -> None:
    assignment = Assignment([TopicPartition("t", 1), TopicPartition("t", 3),
                             TopicPartition("u", 0)], b"x")
    expected = (b"\x00\x00" + b"\x00\x00\x00\x02"
                + b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x03"
                + b"\x00\x01u\x00\x00\x00\x01\x00\x00\x00\x00"
                + b"\x00\x00\x00\x01x")
    assert encode_assignment(assignment, 0) == expected
    assert encode_assignment(assignment, 3) == b"\x00\x03" + expected[2:]
    assert decode_assignment(expected) == assignment


def test_newer_versions_are_read_by_their_known_prefix() -> None:
    future_sub = b"\x00\x09" + EXPECTED_SUBSCRIPTION[3][2:] + b"new fields"
    assert decode_subscription(future_sub).rack_id == "r1"
    future_assignment = b"\x00\x07" + encode_assignment(Assignment([]), 0)[2:] + b"\x01"
    assert decode_assignment(future_assignment) == Assignment([], None)


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"") == Assignment([])


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_truncation_is_a_decode_error(version: int) -> None:
    data = EXPECTED_SUBSCRIPTION[version]
    for cut in range(len(data)):
        with pytest.raises(ProtocolDecodeError):
            decode_subscription(data[:cut])
    assignment = encode_assignment(Assignment([TopicPartition("t", 1)], b"x"), version)
    for cut in range(1, len(assignment)):
        with pytest.raises(ProtocolDecodeError):
            decode_assignment(assignment[:cut])


@pytest.mark.parametrize("data", [
    b"\xff\xff" + TOPICS + NULL_BYTES,                      # negative version
    b"\x00\x00\x7f\xff\xff\xff",                              # 2^31-1 topics in 6 bytes
    b"\x00\x00\x00\x00\x00\x01\xff\xfe",                      # negative string length
    b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfe",              # user data length -2
    b"\x00\x00\x00\x00\x00\x01\x00\x02\xc3\x28" + NULL_BYTES,  # bad UTF-8
])
def test_hostile_subscriptions_are_rejected(data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_subscription(data)


def test_hostile_assignment_count_is_rejected() -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_assignment(b"\x00\x00\x00\x00\x10\x00")


_topic = st.text(alphabet="abcxyz-._", min_size=1, max_size=8)
_tp = st.builds(TopicPartition, _topic, st.integers(0, 1000))


@given(st.lists(_topic, max_size=5), st.none() | st.binary(max_size=20),
       st.lists(_tp, max_size=8, unique=True), st.integers(-1, 2**31 - 1),
       st.none() | _topic)
def test_subscription_round_trip(topics: list[str], user_data: bytes | None,
                                 owned: list[TopicPartition], generation: int,
                                 rack: str | None) -> None:
    owned = sorted(owned)  # grouped by topic on the wire
    sub = Subscription(topics, user_data, owned, generation, rack)
    assert decode_subscription(encode_subscription(sub)) == sub


@given(st.lists(_tp, max_size=12, unique=True), st.none() | st.binary(max_size=20))
def test_assignment_round_trip(partitions: list[TopicPartition], user_data: bytes | None) -> None:
    assignment = Assignment(sorted(partitions), user_data)
    assert decode_assignment(encode_assignment(assignment)) == assignment


def test_bytes_agree_with_kafka_python_schemas() -> None:
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    ksub = metadata.ConsumerProtocolSubscription
    kass = metadata.ConsumerProtocolAssignment
    for version in range(4):
        theirs = ksub(topics=["a", "bc"], user_data=None,
                      owned_partitions=[ksub.TopicPartition(topic="a", partitions=[0, 2])],
                      generation_id=5, rack_id="r1", version=version).encode(version=version)
        assert encode_subscription(SUB, version) == theirs
    theirs = kass(assigned_partitions=[kass.TopicPartition(topic="t", partitions=[1])],
                  user_data=b"x", version=0).encode(version=0)
    assert encode_assignment(Assignment([TopicPartition("t", 1)], b"x"), 0) == theirs


# ---------------------------------------------------------------------- sticky user data
KpStickyUserData = pytest.importorskip(
    "kafka.coordinator.assignors.sticky.user_data").StickyAssignorUserData


@pytest.mark.parametrize("generation", [None, 4])
def test_sticky_user_data_matches_kafka_python(generation: int | None) -> None:
    version = 0 if generation is None else 1
    fields: dict[str, object] = {"previous_assignment": [("t", [1, 3]), ("u", [0])],
                                 "version": version}
    if generation is not None:
        fields["generation"] = generation
    # kafka-python's encoder puts an int16 version first; Java's StickyAssignor writes the
    # struct alone (no version on the wire), as we do
    prefixed = KpStickyUserData(**fields).encode(version=version)
    assert prefixed[:2] == struct.pack(">h", version)
    theirs = prefixed[2:]
    ours = encode_sticky_user_data([TP("t", 1), TP("t", 3), TP("u", 0)], generation)
    assert ours == theirs
    decoded = decode_sticky_user_data(theirs)
    assert decoded.previous_assignment == [TP("t", 1), TP("t", 3), TP("u", 0)]
    assert decoded.generation == generation


def test_sticky_user_data_is_read_as_v1_then_v0() -> None:
    v0 = encode_sticky_user_data([TP("t", 1)], None)
    assert decode_sticky_user_data(v0).generation is None
    assert decode_sticky_user_data(v0 + b"\x00\x00\x00\x09").generation == 9
    with pytest.raises(ProtocolDecodeError):
        decode_sticky_user_data(v0 + b"\x00\x00")  # neither a whole v1 nor a whole v0


def test_encoding_refuses_an_unknown_version_and_a_long_string() -> None:
    with pytest.raises(ValueError, match="version 4"):
        encode_subscription(Subscription(["t"]), 4)
    with pytest.raises(ValueError, match="version -1"):
        encode_assignment(Assignment([]), -1)
    with pytest.raises(ValueError, match="too long"):
        encode_subscription(Subscription(["x" * 0x8000]))
