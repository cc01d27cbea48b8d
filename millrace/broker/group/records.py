"""The records of ``__consumer_offsets``: offset commits and group metadata.

Java counterpart: the ``OffsetCommitKey/Value`` and ``GroupMetadataKey/Value`` message
definitions of Kafka's group coordinator and the serde that prefixes each with a version.
Every key and every value starts with an int16 version; the body after it is a struct
declared below in the protocol codec's own form (non-flexible encodings: STRING = int16
length + UTF-8, NULLABLE_STRING length -1 = null, BYTES = int32 length, ARRAY = int32
count; the flexible version uses compact lengths and tagged-field sections).  A record
whose value is null is a tombstone: the offset or the group is deleted.

Key (the key's version says which kind of record it is)::

    version 0|1  offset commit   group STRING, topic STRING, partition INT32   (we write 1)
    version 2    group metadata  group STRING
    version 3+   KIP-848 consumer-group records (not used here; skipped on replay)

Offset commit value::

    v0  offset INT64, metadata STRING, timestamp INT64
    v1  offset INT64, metadata STRING, commit_timestamp INT64, expire_timestamp INT64
    v2  offset INT64, metadata STRING, commit_timestamp INT64
    v3  offset INT64, leader_epoch INT32, metadata STRING, commit_timestamp INT64
    v4  v3 in flexible form                       (we write v3, or v1 with an expiry)

Group metadata value (we write v3)::

    protocol_type STRING, generation INT32, protocol NULLABLE_STRING,
    leader NULLABLE_STRING, current_state_timestamp INT64 (v2+),
    members ARRAY of [member_id STRING, group_instance_id NULLABLE_STRING (v3+),
                      client_id STRING, client_host STRING, rebalance_timeout INT32 (v1+),
                      session_timeout INT32, subscription BYTES, assignment BYTES]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol.codec import MessageCodec
from millrace.protocol.primitives import INT16
from millrace.protocol.schema import F, request

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

# api_key -1: these are data records, not requests; the declaration form is shared.
_OFFSET_KEY = MessageCodec(request(
    "OffsetCommitKey", -1, "0-1", "none",
    F("group", "string", "0+"),
    F("topic", "string", "0+"),
    F("partition", "int32", "0+"),
))
_GROUP_KEY = MessageCodec(request(
    "GroupMetadataKey", -1, "2", "none",
    F("group", "string", "2"),
))
_OFFSET_VALUE = MessageCodec(request(
    "OffsetCommitValue", -1, "0-4", "4+",
    F("offset", "int64", "0+"),
    F("leader_epoch", "int32", "3+", default=-1),
    F("metadata", "string", "0+"),
    F("commit_timestamp", "int64", "0+"),
    F("expire_timestamp", "int64", "1", default=-1),
))
_GROUP_VALUE = MessageCodec(request(
    "GroupMetadataValue", -1, "0-4", "4+",
    F("protocol_type", "string", "0+"),
    F("generation", "int32", "0+"),
    F("protocol", "string", "0+", nullable="0+"),
    F("leader", "string", "0+", nullable="0+"),
    F("current_state_timestamp", "int64", "2+", default=-1),
    F("members", "[]MemberMetadata", "0+",
      F("member_id", "string", "0+"),
      F("group_instance_id", "string", "3+", nullable="3+", default=None),
      F("client_id", "string", "0+"),
      F("client_host", "string", "0+"),
      F("rebalance_timeout", "int32", "1+"),
      F("session_timeout", "int32", "0+"),
      F("subscription", "bytes", "0+"),
      F("assignment", "bytes", "0+")),
))


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None = None
    members: list[MemberRecord] = field(default_factory=list)


class LoggedBatch(NamedTuple):
    """One batch of ``__consumer_offsets`` as a coordinator replays it.

    ``end_offset``: the offset after the batch -- where the write sits in the log, which
    orders a transactional commit against plain ones.  ``producer_id``: the producer of
    a transactional batch, -1 for the coordinator's own writes.  ``marker``: for a
    transaction marker (a control batch), True = COMMIT, False = ABORT, and no records;
    None for data.  ``records``: (key, value) pairs."""

    end_offset: int
    producer_id: int
    marker: bool | None
    records: list[tuple[bytes | None, bytes | None]]


class UnknownRecordVersion(ProtocolDecodeError):
    """A key or value version this broker does not know (e.g. KIP-848 records)."""


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise ProtocolDecodeError(f"{what}: {len(data)} bytes, no version prefix")
    return int(INT16.unpack_from(data, 0)[0])


def _encode(codec: MessageCodec, version: int, **fields: Any) -> bytes:
    return INT16.pack(version) + codec.encode(codec.cls(**fields), version)


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(_OFFSET_KEY, OFFSET_KEY_VERSION, group=group, topic=topic,
                   partition=partition)


def encode_group_key(group: str) -> bytes:
    return _encode(_GROUP_KEY, GROUP_KEY_VERSION, group=group)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    version = _version(data, "__consumer_offsets key")
    if version in (0, 1):
        k = _OFFSET_KEY.decode(data[2:], version)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == GROUP_KEY_VERSION:
        return GroupKey(_GROUP_KEY.decode(data[2:], version).group)
    raise UnknownRecordVersion(f"__consumer_offsets key version {version}")


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    if value.expire_timestamp is not None:
        return _encode(_OFFSET_VALUE, OFFSET_VALUE_VERSION_WITH_EXPIRY, offset=value.offset,
                       metadata=value.metadata, commit_timestamp=value.commit_timestamp,
                       expire_timestamp=value.expire_timestamp)
    return _encode(_OFFSET_VALUE, OFFSET_VALUE_VERSION, offset=value.offset,
                   leader_epoch=value.leader_epoch, metadata=value.metadata,
                   commit_timestamp=value.commit_timestamp)


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    version = _version(data, "offset commit value")
    if version not in _OFFSET_VALUE.message.versions:
        raise UnknownRecordVersion(f"offset commit value version {version}")
    v = _OFFSET_VALUE.decode(data[2:], version)
    return OffsetAndMetadata(v.offset, v.leader_epoch if version >= 3 else -1, v.metadata,
                       v.commit_timestamp, v.expire_timestamp if version == 1 else None)


def encode_group_value(value: GroupValue) -> bytes:
    cls = _GROUP_VALUE.cls
    members = [cls.MemberMetadata(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout,
        session_timeout=m.session_timeout, subscription=m.subscription,
        assignment=m.assignment) for m in value.members]
    ts = value.current_state_timestamp
    return _encode(_GROUP_VALUE, GROUP_VALUE_VERSION, protocol_type=value.protocol_type,
                   generation=value.generation, protocol=value.protocol, leader=value.leader,
                   current_state_timestamp=-1 if ts is None else ts, members=members)


def decode_group_value(data: bytes) -> GroupValue:
    version = _version(data, "group metadata value")
    if version not in _GROUP_VALUE.message.versions:
        raise UnknownRecordVersion(f"group metadata value version {version}")
    v = _GROUP_VALUE.decode(data[2:], version)
    members = [MemberRecord(
        m.member_id, m.group_instance_id, m.client_id, m.client_host,
        m.rebalance_timeout if version >= 1 else m.session_timeout, m.session_timeout,
        m.subscription, m.assignment) for m in v.members]
    ts = v.current_state_timestamp
    return GroupValue(v.protocol_type, v.generation, v.protocol, v.leader,
                      None if version < 2 or ts < 0 else ts, members)
