"""The "consumer" embedded protocol: subscriptions and assignments inside group messages.

Java counterpart: ``org.apache.kafka.clients.consumer.internals.ConsumerProtocol``.  The
group coordinator treats these bytes as opaque; consumers put their subscription in
JoinGroup's protocol metadata and the leader's assignment in SyncGroup, and
DescribeGroups hands both back (``member_metadata``, ``member_assignment``).  Layouts
(big-endian, classic non-flexible encoding: int16 string lengths, int32 array counts and
bytes lengths, -1 = null)::

    Subscription (v0-3)
      version           int16
      topics            [string]
      user_data         nullable bytes
      owned_partitions  [topic string, partitions [int32]]     v1+
      generation_id     int32 (-1 = unknown)                   v2+
      rack_id           nullable string                        v3+

    Assignment (v0-3; no field was added after v0)
      version           int16
      assigned          [topic string, partitions [int32]]
      user_data         nullable bytes

A version above the highest we know is read as the highest and the bytes after it are
ignored, which is how Kafka keeps old members able to read new leaders; at a known version
trailing bytes are an error.  An empty byte string is an empty assignment (members of a
group that is not Stable have none).  Bad input raises ``ProtocolDecodeError`` only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from millrace.client.cluster import TopicPartition
from millrace.common.errors import ProtocolDecodeError
from millrace.protocol.primitives import (
    INT16,
    INT32,
    read_array_len,
    read_nullable_bytes,
    read_nullable_string,
    read_string,
    write_nullable_bytes,
    write_nullable_string,
    write_string,
)

PROTOCOL_TYPE = "consumer"
HIGHEST_SUBSCRIPTION_VERSION = 3
HIGHEST_ASSIGNMENT_VERSION = 3

T = TypeVar("T")


@dataclass(frozen=True)
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = HIGHEST_SUBSCRIPTION_VERSION


@dataclass(frozen=True)
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = HIGHEST_ASSIGNMENT_VERSION


# ---------------------------------------------------------------------- decoding
def _guarded(what: str, decode: Callable[[bytes], T], data: bytes) -> T:
    try:
        return decode(data)
    except struct.error:
        raise ProtocolDecodeError(f"{what}: truncated") from None


def _read_int16(buf: bytes, pos: int) -> tuple[int, int]:
    return INT16.unpack_from(buf, pos)[0], pos + 2


def _read_int32(buf: bytes, pos: int) -> tuple[int, int]:
    return INT32.unpack_from(buf, pos)[0], pos + 4


def _read_topic_partitions(buf: bytes, pos: int, what: str
                           ) -> tuple[list[TopicPartition], int]:
    out: list[TopicPartition] = []
    topics, pos = read_array_len(buf, pos, False, what)
    for _ in range(topics):
        topic, pos = read_string(buf, pos)
        count, pos = read_array_len(buf, pos, False, f"{what}.partitions")
        for _ in range(count):
            partition, pos = _read_int32(buf, pos)
            out.append(TopicPartition(topic, partition))
    return out, pos


def _check_end(buf: bytes, pos: int, version: int, highest: int, what: str) -> None:
    if version <= highest and pos != len(buf):
        raise ProtocolDecodeError(f"{what} v{version}: {len(buf) - pos} trailing bytes")


def _decode_assignment(buf: bytes) -> Assignment:
    version, pos = _read_int16(buf, 0)
    if version < 0:
        raise ProtocolDecodeError(f"assignment: negative version {version}")
    partitions, pos = _read_topic_partitions(buf, pos, "assigned_partitions")
    user_data, pos = read_nullable_bytes(buf, pos)
    _check_end(buf, pos, version, HIGHEST_ASSIGNMENT_VERSION, "assignment")
    return Assignment(partitions, user_data, version)


def decode_assignment(data: bytes) -> Assignment:
    """A member's assignment; ``b""`` is the empty assignment."""
    if not data:
        return Assignment([], None, 0)
    return _guarded("assignment", _decode_assignment, bytes(data))


def _decode_subscription(buf: bytes) -> Subscription:
    version, pos = _read_int16(buf, 0)
    if version < 0:
        raise ProtocolDecodeError(f"subscription: negative version {version}")
    count, pos = read_array_len(buf, pos, False, "topics")
    topics = []
    for _ in range(count):
        topic, pos = read_string(buf, pos)
        topics.append(topic)
    user_data, pos = read_nullable_bytes(buf, pos)
    owned: list[TopicPartition] = []
    generation, rack = -1, None
    if version >= 1:
        owned, pos = _read_topic_partitions(buf, pos, "owned_partitions")
    if version >= 2:
        generation, pos = _read_int32(buf, pos)
    if version >= 3:
        rack, pos = read_nullable_string(buf, pos)
    _check_end(buf, pos, version, HIGHEST_SUBSCRIPTION_VERSION, "subscription")
    return Subscription(topics, user_data, owned, generation, rack, version)


def decode_subscription(data: bytes) -> Subscription:
    return _guarded("subscription", _decode_subscription, bytes(data))


# ---------------------------------------------------------------------- encoding
def _write_topic_partitions(out: bytearray, partitions: Iterable[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += INT32.pack(len(by_topic))
    for topic, numbers in by_topic.items():
        write_string(out, topic, "topic")
        out += INT32.pack(len(numbers))
        for number in numbers:
            out += INT32.pack(number)


def encode_assignment(assignment: Assignment) -> bytes:
    out = bytearray(INT16.pack(assignment.version))
    _write_topic_partitions(out, assignment.partitions)
    write_nullable_bytes(out, assignment.user_data, "user_data")
    return bytes(out)


def encode_subscription(subscription: Subscription) -> bytes:
    version = subscription.version
    out = bytearray(INT16.pack(version))
    out += INT32.pack(len(subscription.topics))
    for topic in subscription.topics:
        write_string(out, topic, "topic")
    write_nullable_bytes(out, subscription.user_data, "user_data")
    if version >= 1:
        _write_topic_partitions(out, subscription.owned_partitions)
    if version >= 2:
        out += INT32.pack(subscription.generation_id)
    if version >= 3:
        write_nullable_string(out, subscription.rack_id, "rack_id")
    return bytes(out)
