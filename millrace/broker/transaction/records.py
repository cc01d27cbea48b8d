"""The records of ``__transaction_state``: one per transactional id, its latest state.

Java counterpart: ``TransactionLog`` (``keyToBytes``/``valueToBytes``/``readTxnRecordKey``/
``readTxnRecordValue``) over the ``TransactionLogKey``/``TransactionLogValue`` data
definitions.  Key and value each start with an int16 version, then the struct below in
the protocol codec's form (non-flexible: STRING = int16 length + UTF-8, ARRAY = int32
count, -1 = null; v1 of the value is the same fields in flexible form: compact lengths
and a tagged-field section).  The topic is compacted on the key, so the last record of a
transactional id is its state; a null value (tombstone) says the id expired.

Key (version 0)::

    transactional_id STRING

Value (we write version 0, or 1 for transaction.version 2 clients; read both)::

    producer_id INT64, [tag 0: previous_producer_id INT64, tag 1: next_producer_id INT64]
    producer_epoch INT16, transaction_timeout_ms INT32,
    transaction_status INT8 (TransactionState id),
    transaction_partitions ARRAY of [topic STRING, partition_ids ARRAY of INT32]
                             (null when the state is Empty),
    transaction_last_update_timestamp_ms INT64, transaction_start_timestamp_ms INT64

    [tag 2: client_transaction_version INT16]

The tagged fields exist only in v1 (defaults -1, -1, 0).  ``next_producer_id`` is how a
transaction.version 2 transaction whose epoch ran out survives a coordinator move: its
completion hands over to that id.  The previous epoch (``lastProducerEpoch``) is not in
the record: after a load it is unknown (-1).
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol.codec import MessageCodec
from millrace.protocol.primitives import INT16
from millrace.protocol.schema import F, request

KEY_VERSION = 0
VALUE_VERSION = 0

_KEY = MessageCodec(request(
    "TransactionLogKey", -1, "0", "none",
    F("transactional_id", "string", "0"),
))
_VALUE = MessageCodec(request(
    "TransactionLogValue", -1, "0-1", "1+",
    F("producer_id", "int64", "0+"),
    F("previous_producer_id", "int64", "1+", default=-1, tag=0, tagged="1+"),
    F("next_producer_id", "int64", "1+", default=-1, tag=1, tagged="1+"),
    F("producer_epoch", "int16", "0+"),
    F("transaction_timeout_ms", "int32", "0+"),
    F("transaction_status", "int8", "0+"),
    F("transaction_partitions", "[]PartitionsSchema", "0+",
      F("topic", "string", "0+"),
      F("partition_ids", "[]int32", "0+"),
      nullable="0+"),
    F("transaction_last_update_timestamp_ms", "int64", "0+"),
    F("transaction_start_timestamp_ms", "int64", "0+"),
    F("client_transaction_version", "int16", "1+", default=0, tag=2, tagged="1+"),
))


class UnknownTxnRecordVersion(ProtocolDecodeError):
    """A key or value version this broker does not know."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """A transactional id's persisted state; ``partitions`` sorted (topic, partition)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: tuple[tuple[str, int], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise ProtocolDecodeError(f"{what}: {len(data)} bytes, no version prefix")
    return int(INT16.unpack_from(data, 0)[0])


def encode_key(transactional_id: str) -> bytes:
    return INT16.pack(KEY_VERSION) + _KEY.encode(
        _KEY.cls(transactional_id=transactional_id), KEY_VERSION)


def decode_key(data: bytes) -> str:
    version = _version(data, "__transaction_state key")
    if version != KEY_VERSION:
        raise UnknownTxnRecordVersion(f"__transaction_state key version {version}")
    return str(_KEY.decode(data[2:], version).transactional_id)


def encode_value(value: TransactionLogValue, *, empty: bool, version: int | None = None
                 ) -> bytes:
    """``empty``: the state is Empty, whose partitions are written as null (Kafka).
    Version 0 unless the value needs v1's tagged fields (transaction.version 2)."""
    if version is None:
        version = 1 if value.client_transaction_version >= 2 else VALUE_VERSION
    cls = _VALUE.cls
    partitions = None
    if not empty:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [cls.PartitionsSchema(topic=t, partition_ids=ps)
                      for t, ps in by_topic.items()]
    return INT16.pack(version) + _VALUE.encode(cls(
        producer_id=value.producer_id, producer_epoch=value.producer_epoch,
        transaction_timeout_ms=value.transaction_timeout_ms,
        transaction_status=value.transaction_status, transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=value.last_update_timestamp_ms,
        transaction_start_timestamp_ms=value.start_timestamp_ms,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        client_transaction_version=value.client_transaction_version), version)


def decode_value(data: bytes) -> TransactionLogValue:
    version = _version(data, "__transaction_state value")
    if version not in _VALUE.message.versions:
        raise UnknownTxnRecordVersion(f"__transaction_state value version {version}")
    v = _VALUE.decode(data[2:], version)
    partitions = tuple(sorted((p.topic, int(i)) for p in v.transaction_partitions or ()
                              for i in p.partition_ids))
    return TransactionLogValue(v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
                               v.transaction_status, partitions,
                               v.transaction_last_update_timestamp_ms,
                               v.transaction_start_timestamp_ms, v.previous_producer_id,
                               v.next_producer_id, v.client_transaction_version)
