"""What the application hands to ``send`` and what it gets back (Java ``ProducerRecord``,
``RecordMetadata``, ``Callback``)."""

from __future__ import annotations

import copyreg
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from millrace.client.cluster import TopicPartition

K = TypeVar("K")
V = TypeVar("V")

HeadersArg = Iterable[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None


class PyRecordCore:
    """The fields of ``ProducerRecord`` and the checks its constructor makes; the
    reference for the C ``RecordCore`` (``_internals/_speedups.c``), used when that is not
    built."""

    __slots__ = ("headers", "key", "partition", "timestamp", "topic", "value")

    def __init__(self, topic: str, value: Any = None, key: Any = None,
                 partition: int | None = None, timestamp: int | None = None,
                 headers: HeadersArg = None) -> None:
        if not isinstance(topic, str) or not topic:
            raise ValueError("Topic cannot be null or empty.")
        if timestamp is not None and timestamp < 0:
            raise ValueError(f"Invalid timestamp: {timestamp}. Timestamp should always be "
                             "non-negative or null.")
        if partition is not None and partition < 0:
            raise ValueError(f"Invalid partition: {partition}. Partition number should always "
                             "be non-negative or null.")
        self.topic = topic
        self.value = value
        self.key = key
        self.partition = partition
        self.timestamp = timestamp
        self.headers = headers


if TYPE_CHECKING:
    _RecordCore = PyRecordCore
else:
    try:  # the C twin: a record costs about half as much to make
        from millrace.client.producer._internals._speedups import (
            RecordCore as _RecordCore,
        )
        from millrace.client.producer._internals._speedups import (
            install_record_vectorcall as _install_record_vectorcall,
        )
    except ImportError:
        _RecordCore = PyRecordCore
        _install_record_vectorcall = None


class ProducerRecord(_RecordCore, Generic[K, V]):
    """A record to send: a topic and value, optionally key, partition, timestamp, headers.

    ``ProducerRecord(topic, value=None, key=None, partition=None, timestamp=None,
    headers=None)``; ``timestamp`` is milliseconds since the epoch (None: the producer's
    clock at send); ``headers`` is a list of ``(str, bytes | None)`` pairs or a mapping.
    A negative timestamp or partition, or an empty topic, raises ValueError.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        topic: str
        value: V | None
        key: K | None
        partition: int | None
        timestamp: int | None
        headers: HeadersArg

        def __init__(self, topic: str, value: V | None = None, key: K | None = None,
                     partition: int | None = None, timestamp: int | None = None,
                     headers: HeadersArg = None) -> None: ...

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """For pickle and copy: the fields by name (they live in a base class, C when it
        is built, which pickle cannot see), plus a subclass's own slots."""
        names = (*PyRecordCore.__slots__, *copyreg._slotnames(type(self)))  # type: ignore[attr-defined]
        return None, {n: getattr(self, n) for n in dict.fromkeys(names) if hasattr(self, n)}

    def __repr__(self) -> str:
        return (f"ProducerRecord(topic={self.topic}, partition={self.partition}, "
                f"headers={self.headers!r}, key={self.key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerRecord):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in PyRecordCore.__slots__)

    __hash__ = None  # type: ignore[assignment]


if not TYPE_CHECKING and _install_record_vectorcall is not None:
    _install_record_vectorcall(ProducerRecord)


class RecordMetadata:
    """Where a record landed.  ``offset`` is -1 when unknown (acks=0); ``timestamp`` is
    the broker's LogAppendTime when the topic uses it, else the record's CreateTime."""

    __slots__ = ("offset", "partition", "serialized_key_size", "serialized_value_size",
                 "timestamp", "topic")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 serialized_key_size: int, serialized_value_size: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def has_offset(self) -> bool:
        return self.offset != -1

    def has_timestamp(self) -> bool:
        return self.timestamp != -1

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, "
                f"serialized_key_size={self.serialized_key_size}, "
                f"serialized_value_size={self.serialized_value_size})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


Callback = Callable[[RecordMetadata, Exception | None], Any]
"""``callback(metadata, exception)``: ``exception`` is None on success.  On failure
``metadata`` carries only the topic and partition (-1 everywhere else), as in Java."""
