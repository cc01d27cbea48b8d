"""Errors the consumer raises that are not (only) a broker's error code.

Java counterparts: ``CommitFailedException``, ``NoOffsetForPartitionException``,
``OffsetOutOfRangeException`` (the client one, carrying the offsets that fell out of
range), ``LogTruncationException``, ``WakeupException``, ``RecordDeserializationException`` and
``DisconnectException``.  Each carries what a caller needs to recover: the partitions, the
offset to seek past.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.errors import SerializationError
from millrace.common.errors import CorruptRecordError, KafkaError, MillraceError

__all__ = [
    "CommitFailedError", "CorruptRecordError", "DisconnectError", "InvalidOffsetError",
    "LogTruncationError", "NoOffsetForPartitionError", "OffsetOutOfRangeError", "RecordDeserializationError",
    "WakeupError",
]

_COMMIT_FAILED = (
    "Commit cannot be completed since the group has already rebalanced and assigned the "
    "partitions to another member. This means that the time between subsequent calls to "
    "poll() was longer than the configured max.poll.interval.ms, which typically implies "
    "that the poll loop is spending too much time message processing. You can address this "
    "either by increasing max.poll.interval.ms or by reducing the maximum size of batches "
    "returned in poll() with max.poll.records.")


class CommitFailedError(KafkaError):
    """An offset commit was rejected because this member's generation is stale: the group
    rebalanced without it (e.g. ``max.poll.interval.ms`` was exceeded).  Not retriable:
    poll() again to rejoin, then process and commit anew."""

    name: ClassVar[str] = "COMMIT_FAILED"

    def __init__(self, message: str = _COMMIT_FAILED) -> None:
        super().__init__(message)


class InvalidOffsetError(KafkaError):
    """Base of the errors that mean "this partition has no usable position"."""

    name: ClassVar[str] = "INVALID_OFFSET"

    def __init__(self, message: str, partitions: Iterable[TopicPartition]) -> None:
        super().__init__(message)
        self.partitions = frozenset(partitions)


class NoOffsetForPartitionError(InvalidOffsetError):
    """No committed offset and ``auto.offset.reset=none``: the application must seek."""

    name: ClassVar[str] = "NO_OFFSET_FOR_PARTITION"

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        parts = sorted(partitions)
        super().__init__("Undefined offset with no reset policy for partitions: "
                         + ", ".join(str(p) for p in parts), parts)


class OffsetOutOfRangeError(InvalidOffsetError):
    """Fetch positions outside the log and ``auto.offset.reset=none``; ``offsets`` maps each
    partition to the position that was out of range (the broker's OFFSET_OUT_OF_RANGE)."""

    code: ClassVar[int] = 1
    name: ClassVar[str] = "OFFSET_OUT_OF_RANGE"

    def __init__(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.offsets = dict(offsets)
        described = ", ".join(f"{tp}={o}" for tp, o in sorted(self.offsets.items()))
        super().__init__("Fetch position out of range and no reset policy (auto.offset.reset="
                         f"none) for partitions: {described}", self.offsets)


class LogTruncationError(OffsetOutOfRangeError):
    """After a leader change the new leader's log ends the epoch of the last record read
    *before* the position (KIP-320): records this consumer read are gone, and
    ``auto.offset.reset=none`` forbids choosing where to go on.  ``offsets`` holds the
    positions that were checked; ``divergent_offsets`` the first offset (and its epoch)
    known to diverge, for the partitions where the leader knows one.  Seek to recover."""

    def __init__(self, offsets: Mapping[TopicPartition, int],
                 divergent_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        super().__init__(offsets)
        self.divergent_offsets = dict(divergent_offsets)
        described = ", ".join(f"{tp}={om.offset} (epoch {om.leader_epoch})"
                              for tp, om in sorted(self.divergent_offsets.items()))
        self.message = ("Truncated partitions detected with divergent offsets: "
                        f"{described or 'unknown'}; positions: "
                        + ", ".join(f"{tp}={o}" for tp, o in sorted(self.offsets.items())))
        self.args = (self.message,)


class WakeupError(MillraceError):
    """``KafkaConsumer.wakeup()`` interrupted a blocking call (Java ``WakeupException``)."""


class RecordDeserializationError(KafkaError, SerializationError):
    """A deserializer failed (a ``SerializationError`` naming the topic, partition and
    offset); the position stays on the record, so ``seek(partition,
    offset + 1)`` skips it."""

    name: ClassVar[str] = "RECORD_DESERIALIZATION"

    def __init__(self, partition: TopicPartition, offset: int, message: str,
                 is_key: bool) -> None:
        super().__init__(f"Error deserializing {'key' if is_key else 'value'} of the record "
                         f"at offset {offset} of partition {partition}: {message}. If needed, "
                         "please seek past the record to continue consumption.")
        self.partition = partition
        self.offset = offset
        self.is_key = is_key


class DisconnectError(KafkaError):
    """The connection closed (or the request timed out) before an answer came."""

    name: ClassVar[str] = "DISCONNECTED"
    retriable: ClassVar[bool] = True
