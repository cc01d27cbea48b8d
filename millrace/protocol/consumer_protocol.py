"""The "consumer" embedded protocol: subscriptions and assignments inside group messages.

Java counterpart: ``org.apache.kafka.clients.consumer.internals.ConsumerProtocol`` with the
``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` message definitions, and
the sticky assignor's ``StickyAssignorUserData``.  The group coordinator treats these bytes
as opaque: each member puts its *Subscription* in JoinGroup's protocol metadata, the leader
answers SyncGroup with one *Assignment* per member, and DescribeGroups hands both back
(``member_metadata``, ``member_assignment``).  Declared below in the codec's own form and
encoded by it; all are non-flexible (STRING = int16 length + UTF-8, BYTES = int32 length,
ARRAY = int32 count, -1 = null), big-endian::

    Subscription (v0-3), after an int16 version
      topics            [string]
      user_data         nullable bytes
      owned_partitions  [topic string, partitions [int32]]     v1+
      generation_id     int32 (-1 = unknown)                   v2+
      rack_id           nullable string                        v3+

    Assignment (v0-3; no field was added after v0), after an int16 version
      assigned_partitions  [topic string, partitions [int32]]
      user_data            nullable bytes

    Sticky assignor user data (no version on the wire; v1 is tried, then v0)
      previous_assignment  [topic string, partitions [int32]]
      generation           int32                                v1+

Fields are only ever appended: a version above the highest we know is read as the highest
and the bytes after it are ignored, which is how Kafka keeps old members able to read new
leaders; at a known version trailing bytes are an error.  An empty byte string is an empty
assignment (members of a group that is not Stable have none).  Bad input raises
``ProtocolDecodeError`` only.  Partitions go on the wire grouped by topic, topics in order
of first appearance.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, NamedTuple

from millrace.common.errors import ProtocolDecodeError
from millrace.common.topic_partition import TopicPartition
from millrace.protocol import schema
from millrace.protocol.codec import MessageCodec
from millrace.protocol.primitives import INT16
from millrace.protocol.schema import F

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3  # the highest we know, and the one we write
ASSIGNMENT_VERSION = 3
NO_GENERATION = -1

SUBSCRIPTION = MessageCodec(schema.data(
    "ConsumerProtocolSubscription", "0-3", "none",
    F("topics", "[]string", "0+"),
    F("user_data", "bytes", "0+", nullable="0+", default=None),
    F("owned_partitions", "[]TopicPartition", "1+",
      F("topic", "string", "1+"),
      F("partitions", "[]int32", "1+")),
    F("generation_id", "int32", "2+", default=NO_GENERATION),
    F("rack_id", "string", "3+", nullable="3+", default=None),
))
ASSIGNMENT = MessageCodec(schema.data(
    "ConsumerProtocolAssignment", "0-3", "none",
    F("assigned_partitions", "[]TopicPartition", "0+",
      F("topic", "string", "0+"),
      F("partitions", "[]int32", "0+")),
    F("user_data", "bytes", "0+", nullable="0+", default=None),
))
STICKY_ASSIGNOR_USER_DATA = MessageCodec(schema.data(
    "StickyAssignorUserData", "0-1", "none",
    F("previous_assignment", "[]TopicPartition", "0+",
      F("topic", "string", "0+"),
      F("partitions", "[]int32", "0+")),
    F("generation", "int32", "1+", default=NO_GENERATION),
))


@dataclass
class Subscription:
    """What a member asks for.  ``version`` is the version it was read at (or is written
    at); it is not part of the value's identity."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    _: KW_ONLY
    # not on the wire: the leader fills it in from the JoinGroup member list
    group_instance_id: str | None = None
    version: int = field(default=SUBSCRIPTION_VERSION, compare=False)


@dataclass
class Assignment:
    """What the leader gives a member; ``version`` as in ``Subscription``."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = field(default=ASSIGNMENT_VERSION, compare=False)


class StickyAssignorUserData(NamedTuple):
    previous_assignment: list[TopicPartition]
    generation: int | None  # None in version 0 data


# ---------------------------------------------------------------------- helpers
def _grouped(cls: Any, partitions: Iterable[TopicPartition]) -> list[Any]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [cls(topic=topic, partitions=numbers) for topic, numbers in by_topic.items()]


def _flattened(topics: list[Any]) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p) for t in topics for p in t.partitions]


def _encode(codec: MessageCodec, version: int, highest: int, value: Any) -> bytes:
    if not 0 <= version <= highest:
        raise ValueError(f"unsupported {codec.message.name} version {version}")
    return INT16.pack(version) + codec.encode(value, version)


def _decode(codec: MessageCodec, buf: bytes, highest: int) -> tuple[int, Any]:
    """The version prefix and the body; a newer version is read by its known prefix."""
    what = codec.message.name
    if len(buf) < 2:
        raise ProtocolDecodeError(f"{what}: {len(buf)} bytes, no version")
    version = int(INT16.unpack_from(buf, 0)[0])
    if version < 0:
        raise ProtocolDecodeError(f"{what}: negative version {version}")
    if version > highest:
        return version, codec.decode_prefix(buf, highest, 2)[0]
    return version, codec.decode(buf, version, 2)


# ---------------------------------------------------------------------- subscription
def encode_subscription(subscription: Subscription, version: int | None = None) -> bytes:
    """The bytes at ``version`` (default: the subscription's own version)."""
    cls = SUBSCRIPTION.cls
    value = cls(topics=subscription.topics, user_data=subscription.user_data,
                owned_partitions=_grouped(cls.TopicPartition, subscription.owned_partitions),
                generation_id=subscription.generation_id, rack_id=subscription.rack_id)
    return _encode(SUBSCRIPTION, subscription.version if version is None else version,
                   SUBSCRIPTION_VERSION, value)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    version, s = _decode(SUBSCRIPTION, bytes(data), SUBSCRIPTION_VERSION)
    return Subscription(s.topics, s.user_data, _flattened(s.owned_partitions),
                        s.generation_id, s.rack_id, version=version)


# ---------------------------------------------------------------------- assignment
def encode_assignment(assignment: Assignment, version: int | None = None) -> bytes:
    """The bytes at ``version`` (default: the assignment's own version)."""
    cls = ASSIGNMENT.cls
    value = cls(assigned_partitions=_grouped(cls.TopicPartition, assignment.partitions),
                user_data=assignment.user_data)
    return _encode(ASSIGNMENT, assignment.version if version is None else version,
                   ASSIGNMENT_VERSION, value)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """A member's assignment; ``b""`` is the empty assignment (at version 0)."""
    if not data:
        return Assignment([], None, 0)
    version, a = _decode(ASSIGNMENT, bytes(data), ASSIGNMENT_VERSION)
    return Assignment(_flattened(a.assigned_partitions), a.user_data, version)


# ---------------------------------------------------------------------- sticky user data
def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None
                            ) -> bytes:
    """Version 1 with a generation, version 0 without one (no version prefix)."""
    cls = STICKY_ASSIGNOR_USER_DATA.cls
    value = cls(previous_assignment=_grouped(cls.TopicPartition, partitions),
                generation=NO_GENERATION if generation is None else generation)
    return STICKY_ASSIGNOR_USER_DATA.encode(value, 0 if generation is None else 1)


def decode_sticky_user_data(data: bytes) -> StickyAssignorUserData:
    """Version 1 if the bytes are a whole version 1, else version 0 (as Java tries them)."""
    try:
        v = STICKY_ASSIGNOR_USER_DATA.decode(data, 1)
        return StickyAssignorUserData(_flattened(v.previous_assignment), v.generation)
    except ProtocolDecodeError:
        v = STICKY_ASSIGNOR_USER_DATA.decode(data, 0)
        return StickyAssignorUserData(_flattened(v.previous_assignment), None)
