"""ConsumerProtocol Subscription/Assignment payloads: exact bytes per version, round trips,
newer versions read by prefix, hostile input rejected with ProtocolDecodeError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.client.cluster import TopicPartition
from millrace.client.consumer._internals.consumer_protocol import (
    Assignment,
    Subscription,
    deserialize_assignment,
    deserialize_subscription,
    serialize_assignment,
    serialize_subscription,
)
from millrace.common.errors import ProtocolDecodeError

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
    data = serialize_subscription(SUB, version)
    assert data == EXPECTED_SUBSCRIPTION[version]
    back = deserialize_subscription(data)
    assert back.topics == SUB.topics
    assert back.owned_partitions == (SUB.owned_partitions if version >= 1 else [])
    assert back.generation_id == (5 if version >= 2 else -1)
    assert back.rack_id == ("r1" if version >= 3 else None)


def test_subscription_user_data_and_null_rack() -> None:
    sub = Subscription(["t"], b"\x00\x00\x00\x07", [], -1, None)
    data = serialize_subscription(sub)
    assert data == (b"\x00\x03\x00\x00\x00\x01\x00\x01t" + b"\x00\x00\x00\x04\x00\x00\x00\x07"
                    + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\xff\xff")
    assert deserialize_subscription(data) == sub


def test_assignment_bytes() -> None:
    assignment = Assignment([TopicPartition("t", 1), TopicPartition("t", 3),
                             TopicPartition("u", 0)], b"x")
    expected = (b"\x00\x00" + b"\x00\x00\x00\x02"
                + b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x03"
                + b"\x00\x01u\x00\x00\x00\x01\x00\x00\x00\x00"
                + b"\x00\x00\x00\x01x")
    assert serialize_assignment(assignment, 0) == expected
    assert serialize_assignment(assignment, 3) == b"\x00\x03" + expected[2:]
    assert deserialize_assignment(expected) == assignment


def test_newer_versions_are_read_by_their_known_prefix() -> None:
    future_sub = b"\x00\x09" + EXPECTED_SUBSCRIPTION[3][2:] + b"new fields"
    assert deserialize_subscription(future_sub).rack_id == "r1"
    future_assignment = b"\x00\x07" + serialize_assignment(Assignment([]), 0)[2:] + b"\x01"
    assert deserialize_assignment(future_assignment) == Assignment([], None)


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert deserialize_assignment(b"") == Assignment([])


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_truncation_is_a_decode_error(version: int) -> None:
    data = EXPECTED_SUBSCRIPTION[version]
    for cut in range(len(data)):
        with pytest.raises(ProtocolDecodeError):
            deserialize_subscription(data[:cut])
    assignment = serialize_assignment(Assignment([TopicPartition("t", 1)], b"x"), version)
    for cut in range(1, len(assignment)):
        with pytest.raises(ProtocolDecodeError):
            deserialize_assignment(assignment[:cut])


@pytest.mark.parametrize("data", [
    b"\xff\xff" + TOPICS + NULL_BYTES,                      # negative version
    b"\x00\x00\x7f\xff\xff\xff",                              # 2^31-1 topics in 6 bytes
    b"\x00\x00\x00\x00\x00\x01\xff\xfe",                      # negative string length
    b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfe",              # user data length -2
    b"\x00\x00\x00\x00\x00\x01\x00\x02\xc3\x28" + NULL_BYTES,  # bad UTF-8
])
def test_hostile_subscriptions_are_rejected(data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        deserialize_subscription(data)


def test_hostile_assignment_count_is_rejected() -> None:
    with pytest.raises(ProtocolDecodeError):
        deserialize_assignment(b"\x00\x00\x00\x00\x10\x00")


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
    assert deserialize_subscription(serialize_subscription(sub)) == sub


@given(st.lists(_tp, max_size=12, unique=True), st.none() | st.binary(max_size=20))
def test_assignment_round_trip(partitions: list[TopicPartition], user_data: bytes | None) -> None:
    assignment = Assignment(sorted(partitions), user_data)
    assert deserialize_assignment(serialize_assignment(assignment)) == assignment


def test_bytes_agree_with_kafka_python_schemas() -> None:
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    ksub = metadata.ConsumerProtocolSubscription
    kass = metadata.ConsumerProtocolAssignment
    for version in range(4):
        theirs = ksub(topics=["a", "bc"], user_data=None,
                      owned_partitions=[ksub.TopicPartition(topic="a", partitions=[0, 2])],
                      generation_id=5, rack_id="r1", version=version).encode(version=version)
        assert serialize_subscription(SUB, version) == theirs
    theirs = kass(assigned_partitions=[kass.TopicPartition(topic="t", partitions=[1])],
                  user_data=b"x", version=0).encode(version=0)
    assert serialize_assignment(Assignment([TopicPartition("t", 1)], b"x"), 0) == theirs
