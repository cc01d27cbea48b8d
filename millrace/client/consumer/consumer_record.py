"""What ``poll`` hands out (Java ``ConsumerRecord``, ``ConsumerRecords``) and the offset value
types of the consumer API (``OffsetAndMetadata``, ``OffsetAndTimestamp``).

``ConsumerRecord`` is a plain ``__slots__`` class: building one per record is the
consumer's hot path, so it carries no validation.  ``serialized_key_size`` and
``serialized_value_size`` are the byte lengths before deserialization (-1 for null), and
``leader_epoch`` the partition leader epoch of the batch (None when unknown).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

from millrace.client.cluster import TopicPartition
from millrace.record import TimestampType

K = TypeVar("K")
V = TypeVar("V")

# A consumed record's headers: (key, value) pairs in wire order, immutable (Java's Headers
# of a received record are read-only too); () when there are none -- one shared object, so
# a poll of records without headers allocates no container per record.
Headers = tuple[tuple[str, bytes | None], ...]


class ConsumerRecord(Generic[K, V]):
    __slots__ = ("headers", "key", "leader_epoch", "offset", "partition",
                 "serialized_key_size", "serialized_value_size", "timestamp", "timestamp_type",
                 "topic", "value")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int = -1,
                 timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                 key: K | None = None, value: V | None = None, headers: Headers | None = None,
                 serialized_key_size: int = -1, serialized_value_size: int = -1,
                 leader_epoch: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers: Headers = headers if headers is not None else ()
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size
        self.leader_epoch = leader_epoch

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, "
                f"timestamp_type={self.timestamp_type.name}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r}, "
                f"leader_epoch={self.leader_epoch})")


class OffsetAndMetadata(NamedTuple):
    """A committed (or to-be-committed) position: the offset of the *next* record to read."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class OffsetAndTimestamp(NamedTuple):
    """``offsets_for_times`` result: the first offset whose timestamp is >= the one asked."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class ConsumerRecords(Generic[K, V]):
    """The records of one ``poll``, grouped by partition, in offset order per partition."""

    __slots__ = ("_count", "_records")

    def __init__(self, records: Mapping[TopicPartition, list[ConsumerRecord[K, V]]]
                 | None = None) -> None:
        self._records: dict[TopicPartition, list[ConsumerRecord[K, V]]] = \
            dict(records) if records else {}
        self._count = sum(len(r) for r in self._records.values())

    @staticmethod
    def empty() -> ConsumerRecords[Any, Any]:
        return ConsumerRecords()

    def records(self, partition: TopicPartition | str) -> list[ConsumerRecord[K, V]]:
        """Records of one partition, or (given a topic name) of all its partitions."""
        if isinstance(partition, TopicPartition):
            return list(self._records.get(partition, ()))
        return [r for tp, recs in self._records.items() if tp.topic == partition for r in recs]

    def partitions(self) -> set[TopicPartition]:
        return set(self._records)

    def next_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Per partition, the offset after the last record returned (what to commit)."""
        return {tp: OffsetAndMetadata(recs[-1].offset + 1, "", recs[-1].leader_epoch)
                for tp, recs in self._records.items() if recs}

    def count(self) -> int:
        return self._count

    def is_empty(self) -> bool:
        return self._count == 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[ConsumerRecord[K, V]]:
        for recs in self._records.values():
            yield from recs

    def by_partition(self) -> dict[TopicPartition, list[ConsumerRecord[K, V]]]:
        return dict(self._records)

    def __repr__(self) -> str:
        return f"ConsumerRecords({self._count} records in {len(self._records)} partitions)"
