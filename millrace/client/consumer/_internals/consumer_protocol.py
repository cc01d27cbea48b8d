"""The payloads of the "consumer" group protocol (Java ``ConsumerProtocol``).

JoinGroup carries each member's *Subscription* as protocol metadata; the leader answers
SyncGroup with one *Assignment* per member.  Both are non-flexible, big-endian structures
(STRING = int16 length + UTF-8, BYTES = int32 length, -1 = null), versions 0-3::

    Subscription                             Assignment
      version            int16                 version              int16
      topics             int32 n, STRING*n     assigned_partitions  int32 n, [
      user_data          NULLABLE_BYTES          topic STRING, partitions int32 m, int32*m]
      owned_partitions   (v1+) int32 n, [      user_data            NULLABLE_BYTES
        topic STRING, partitions int32 m,
        int32*m]
      generation_id      (v2+) int32, -1 = none
      rack_id            (v3+) NULLABLE_STRING

Fields are only ever appended, so a reader parses the prefix it knows and ignores the rest
of a newer version.  Every length is checked against the bytes left before it is used; bad
input raises ``ProtocolDecodeError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from millrace.client.cluster import TopicPartition
from millrace.common.errors import ProtocolDecodeError

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
NO_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    # not on the wire: the leader fills it in from the JoinGroup member list
    group_instance_id: str | None = None


@dataclass
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None


# ---------------------------------------------------------------------- writing
class ProtocolWriter:
    """Appends non-flexible protocol primitives (also used for assignors' user data)."""

    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def string(self, s: str | None) -> None:
        if s is None:
            self.i16(-1)
            return
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is too long")
        self.i16(len(data))
        self.out += data

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.i32(-1)
            return
        self.i32(len(b))
        self.out += b

    def topic_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        self.i32(len(by_topic))
        for topic, ps in by_topic.items():
            self.string(topic)
            self.i32(len(ps))
            for p in ps:
                self.i32(p)


def serialize_subscription(subscription: Subscription,
                           version: int = SUBSCRIPTION_VERSION) -> bytes:
    if not 0 <= version <= SUBSCRIPTION_VERSION:
        raise ValueError(f"unsupported subscription version {version}")
    w = ProtocolWriter()
    w.i16(version)
    w.i32(len(subscription.topics))
    for topic in subscription.topics:
        w.string(topic)
    w.nullable_bytes(subscription.user_data)
    if version >= 1:
        w.topic_partitions(subscription.owned_partitions)
    if version >= 2:
        w.i32(subscription.generation_id)
    if version >= 3:
        w.string(subscription.rack_id)
    return bytes(w.out)


def serialize_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    if not 0 <= version <= ASSIGNMENT_VERSION:
        raise ValueError(f"unsupported assignment version {version}")
    w = ProtocolWriter()
    w.i16(version)
    w.topic_partitions(assignment.partitions)
    w.nullable_bytes(assignment.user_data)
    return bytes(w.out)


# ---------------------------------------------------------------------- reading
class ProtocolReader:
    """Reads non-flexible protocol primitives, checking every length first."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if n < 0 or len(self.buf) - self.pos < n:
            raise ProtocolDecodeError(f"{self.what}: needs {n} more bytes at position "
                                      f"{self.pos}, {len(self.buf) - self.pos} left")

    def i16(self) -> int:
        self._need(2)
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        self._need(4)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise ProtocolDecodeError(f"{self.what}: invalid string length {n}")
        self._need(n)
        try:
            s = self.buf[self.pos:self.pos + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError(f"{self.what}: invalid UTF-8: {e}") from None
        self.pos += n
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolDecodeError(f"{self.what}: invalid bytes length {n}")
        self._need(n)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def count(self, min_element_size: int) -> int:
        n = self.i32()
        if n < 0 or n * min_element_size > len(self.buf) - self.pos:
            raise ProtocolDecodeError(f"{self.what}: invalid array length {n}")
        return n

    def topic_partitions(self) -> list[TopicPartition]:
        out = []
        for _ in range(self.count(6)):
            topic = self.string()
            assert topic is not None
            for _ in range(self.count(4)):
                out.append(TopicPartition(topic, self.i32()))
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)


def _version(r: ProtocolReader) -> int:
    version = r.i16()
    if version < 0:
        raise ProtocolDecodeError(f"{r.what}: invalid version {version}")
    return version


def deserialize_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    r = ProtocolReader(bytes(data), "consumer protocol subscription")
    version = _version(r)
    topics = []
    for _ in range(r.count(2)):
        topic = r.string()
        assert topic is not None
        topics.append(topic)
    user_data = r.nullable_bytes()
    owned: list[TopicPartition] = []
    generation = NO_GENERATION
    rack: str | None = None
    if version >= 1:
        owned = r.topic_partitions()
    if version >= 2:
        generation = r.i32()
    if version >= 3:
        rack = r.string(nullable=True)
    return Subscription(topics, user_data, owned, generation, rack)


def deserialize_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    r = ProtocolReader(bytes(data), "consumer protocol assignment")
    if not data:
        return Assignment([])  # an empty assignment from a leader that had nothing to give
    _version(r)
    partitions = r.topic_partitions()
    user_data = r.nullable_bytes()
    return Assignment(partitions, user_data)

