"""ConsumerProtocol subscription/assignment bytes: kafka-python's encoder as the oracle,
every truncation, trailing bytes, forward compatibility."""

from __future__ import annotations

import struct

import pytest

from millrace.client.admin.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from millrace.client.cluster import TopicPartition
from millrace.common.errors import ProtocolDecodeError

kafka_metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
KpAssignment = kafka_metadata.ConsumerProtocolAssignment
KpSubscription = kafka_metadata.ConsumerProtocolSubscription

TP = TopicPartition


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


def test_empty_bytes_are_an_empty_assignment() -> None:
    assert decode_assignment(b"") == Assignment([], None, 0)


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
