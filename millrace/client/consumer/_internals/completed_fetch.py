"""One partition's data from one fetch response, handed out a few records at a time
(Java ``CompletedFetch``).

Theory of operation.  The fetcher keeps a queue of these; ``poll`` drains them up to
``max.poll.records``.  Batches are decoded lazily, one at a time, as records are asked for
(the records of a compressed batch are decompressed at once).  Walking the batches:

* with ``check.crcs`` every batch's CRC (and framing) is verified before use; a bad batch
  raises ``CorruptRecordError`` and the position stays on it;
* control batches (transaction markers) are never handed out, but the position moves past
  them;
* records before the fetch offset (the head of a compressed batch) are skipped;
* after a batch the next fetch offset is the batch's next offset, so gaps left by
  compaction or control records are stepped over;
* with ``read_committed`` the response lists aborted transactions ``(producer id, first
  offset)``.  Walking in offset order, a producer becomes "aborted" when a batch reaches
  its first offset; its transactional batches are skipped until its ABORT marker is seen
  (``AbortedTransactionFilter``, the walk the log cleaner uses too).

A deserialization failure raises ``RecordDeserializationError`` with the position left on
the failing record, so the application can seek past it.

Hot path: a v2 batch is decoded a *run* at a time -- exactly the records the current
``poll`` still wants -- straight into ``ConsumerRecord`` objects (the C record codec's
``decode_records_as``; in pure Python, one list comprehension over
``py_decode_record_run``).  Decoding a whole 10,000-record batch up front would keep
thousands of objects alive across polls and let the garbage collector's full passes
dominate; a run's objects die young.  Deserializers, when configured, replace key and
value in place (both computed before either is set, so a failed record can be retried
unchanged).  Legacy (v0/v1) batches are decoded whole.

Owned by the application thread (created on whichever thread completed the fetch).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.consumer_record import ConsumerRecord
from millrace.client.consumer.errors import RecordDeserializationError
from millrace.client.serialization import Deserializer
from millrace.common.errors import CorruptBatchError, CorruptRecordError
from millrace.record import (
    AnyRecordBatch,
    MemoryRecords,
    RecordBatch,
    TimestampType,
)
from millrace.record.aborted_transactions import AbortedTransactionFilter
from millrace.record.default_record import SPEEDUPS, decode_records_as, py_decode_record_run

READ_COMMITTED = 1
# RecordBatch.records_as fields: the per-record attributes, then the per-batch constants
_RECORD_FIELDS = ("offset", "timestamp", "key", "value", "headers", "serialized_key_size",
                  "serialized_value_size", "topic", "partition", "timestamp_type",
                  "leader_epoch")


class CompletedFetch:
    __slots__ = ("_aborted_filter", "_batch", "_batches", "_corrupt",
                 "_index", "_key_deserializer", "_leader_epoch", "_records", "_run", "_ts_type",
                 "_value_deserializer", "check_crcs", "error_code", "fetch_offset",
                 "high_watermark", "initialized", "is_consumed", "isolation_level",
                 "last_epoch", "last_stable_offset", "log_start_offset", "next_fetch_offset",
                 "partition", "raw")

    def __init__(self, partition: TopicPartition, data: Any, fetch_offset: int, *,
                 isolation_level: int = 0, check_crcs: bool = True,
                 key_deserializer: Deserializer[Any] | None = None,
                 value_deserializer: Deserializer[Any] | None = None) -> None:
        self.partition = partition
        self.error_code: int = data.error_code
        self.high_watermark: int = data.high_watermark
        self.log_start_offset: int = data.log_start_offset
        self.last_stable_offset: int = data.last_stable_offset
        self.raw: bytes | None = data.records
        self.fetch_offset = fetch_offset
        self.next_fetch_offset = fetch_offset
        self.last_epoch: int | None = None
        self.isolation_level = isolation_level
        self.check_crcs = check_crcs
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self.initialized = False
        self.is_consumed = False
        self._batches: Iterator[AnyRecordBatch] | None = None
        self._batch: AnyRecordBatch | None = None
        self._records: list[ConsumerRecord[Any, Any]] = []  # decoded, not handed out yet
        self._index = 0
        # the current v2 batch's records not decoded yet:
        # [data, position, end, count left, base offset, base timestamp, LogAppendTime]
        self._run: list[Any] | None = None
        self._ts_type = TimestampType.CREATE_TIME
        self._leader_epoch: int | None = None
        self._corrupt: Exception | None = None
        self._aborted_filter = AbortedTransactionFilter(
            (t.producer_id, t.first_offset) for t in data.aborted_transactions or ()
        ) if isolation_level == READ_COMMITTED else None

    def __repr__(self) -> str:
        return (f"CompletedFetch({self.partition}, fetch_offset={self.fetch_offset}, "
                f"next={self.next_fetch_offset}, error={self.error_code})")

    @property
    def has_records(self) -> bool:
        return bool(self.raw)

    def drain(self) -> None:
        self.is_consumed = True
        self._records = []
        self._run = None
        self._batches = None

    # ------------------------------------------------------------------ batches
    def _load(self, wanted: int) -> bool:
        """Decode up to ``wanted`` more records (the rest of the current batch first);
        False at the end of the data."""
        try:
            if self._run is not None:
                records = self._decode_run(wanted)
            else:
                if self._batch is not None:
                    self.next_fetch_offset = max(self.next_fetch_offset,
                                                 self._batch.next_offset)
                    self._batch = None
                batch = self._next_batch()
                if batch is None:
                    return False
                self._batch = batch
                if type(batch) is RecordBatch:
                    h = batch.header
                    data, pos, end, append_time = batch.records_area()
                    self._run = [data, pos, end, h.records_count, h.base_offset,
                                 h.base_timestamp, append_time]
                    records = self._decode_run(wanted)
                else:
                    records = self._decode_legacy(batch)
        except CorruptBatchError as e:
            self._corrupt = CorruptRecordError(
                f"Record batch for partition {self.partition} at offset "
                f"{self.next_fetch_offset} is invalid, cause: {e}")
            raise self._corrupt from e
        if records and records[0].offset < self.next_fetch_offset:
            start = self.next_fetch_offset  # the head of a compressed batch
            records = [r for r in records if r.offset >= start]
        self._records = records
        self._index = 0
        return True

    def _next_batch(self) -> AnyRecordBatch | None:
        """The next batch with records to hand out (control batches, aborted transactions
        and batches before the position are stepped over); None at the end of the data."""
        if self._batches is None:
            if not self.raw:
                return None
            self._batches = MemoryRecords(self.raw).batches()
        aborted_filter = self._aborted_filter
        while True:
            batch = next(self._batches, None)
            if batch is None:
                return None
            if batch.next_offset <= self.next_fetch_offset:
                continue  # wholly before the position (e.g. a legacy wrapper)
            if self.check_crcs:
                batch.validate()
            if aborted_filter is not None and batch.producer_id >= 0 and \
                    aborted_filter.is_batch_aborted(batch):
                self.next_fetch_offset = batch.next_offset
                continue
            if batch.is_control:
                self.next_fetch_offset = batch.next_offset
                continue
            self._ts_type = batch.timestamp_type
            stored = batch.header.partition_leader_epoch if type(batch) is RecordBatch else -1
            self._leader_epoch = stored if stored >= 0 else None
            return batch

    def _decode_run(self, wanted: int) -> list[ConsumerRecord[Any, Any]]:
        """The next (up to) ``wanted`` records of the current v2 batch, keys and values
        still bytes."""
        run = self._run
        assert run is not None
        data, pos, end, left, base_offset, base_timestamp, append_time = run
        topic, partition = self.partition
        if SPEEDUPS:
            records, pos = decode_records_as(
                ConsumerRecord, _RECORD_FIELDS,
                (topic, partition, self._ts_type, self._leader_epoch),
                data, pos, end, left, base_offset, base_timestamp, append_time, wanted)
        else:
            raw, pos = py_decode_record_run(data, pos, end, left, base_offset, base_timestamp,
                                            append_time, wanted)
            ts_type, epoch = self._ts_type, self._leader_epoch
            records = [ConsumerRecord(topic, partition, r.offset, r.timestamp, ts_type, r.key,
                                      r.value, r.headers,
                                      -1 if r.key is None else len(r.key),
                                      -1 if r.value is None else len(r.value), epoch)
                       for r in raw]
        left -= len(records)
        if left:
            run[1], run[3] = pos, left
        else:
            self._run = None
        return records

    def _decode_legacy(self, batch: AnyRecordBatch) -> list[ConsumerRecord[Any, Any]]:
        topic, partition = self.partition
        ts_type, epoch = self._ts_type, self._leader_epoch
        return [ConsumerRecord(topic, partition, r.offset, r.timestamp, ts_type, r.key, r.value,
                               r.headers, -1 if r.key is None else len(r.key),
                               -1 if r.value is None else len(r.value), epoch)
                for r in batch.record_list()]

    # ------------------------------------------------------------------ records
    def fetch_records(self, max_records: int) -> list[ConsumerRecord[Any, Any]]:
        """Up to ``max_records`` records from the position on; advances
        ``next_fetch_offset`` past what it returns."""
        if self._corrupt is not None:
            raise self._corrupt
        out: list[ConsumerRecord[Any, Any]] = []
        if self.is_consumed:
            return out
        try:
            self._fill(out, max_records)
        except (RecordDeserializationError, CorruptRecordError):
            if not out:
                raise
            # hand out what came before the bad record; the next call raises again
        return out

    def _fill(self, out: list[ConsumerRecord[Any, Any]], max_records: int) -> None:
        deserialize = self._key_deserializer is not None or \
            self._value_deserializer is not None
        while len(out) < max_records:
            records = self._records
            i = self._index
            if i >= len(records):
                if not self._load(max_records - len(out)):
                    self.drain()
                    return
                continue
            end = min(len(records), i + max_records - len(out))
            if deserialize:
                for j in range(i, end):
                    out.append(self._deserialize(records[j]))
                    self._index = j + 1
                    self.next_fetch_offset = records[j].offset + 1
            else:
                out += records[i:end]
            self._index = end
            self.next_fetch_offset = records[end - 1].offset + 1
            self.last_epoch = self._leader_epoch

    def _deserialize(self, r: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        """Replace key and value by their deserialized forms (both or neither)."""
        kd, vd = self._key_deserializer, self._value_deserializer
        topic, headers = r.topic, r.headers
        try:
            k = kd.deserialize(topic, r.key, headers) if kd is not None else r.key
        except Exception as e:
            self.next_fetch_offset = r.offset
            raise RecordDeserializationError(self.partition, r.offset, str(e), True) from e
        try:
            v = vd.deserialize(topic, r.value, headers) if vd is not None else r.value
        except Exception as e:
            self.next_fetch_offset = r.offset
            raise RecordDeserializationError(self.partition, r.offset, str(e), False) from e
        r.key, r.value = k, v
        return r
