"""``TxnMarkerWriter``: WriteTxnMarkers on the partitions this broker leads, and the
listeners that hear of each transaction a marker ended here.

Java counterpart: ``KafkaApis.handleWriteTxnMarkersRequest`` (the append of one control
batch per partition through ``ReplicaManager.appendRecords`` with origin COORDINATOR, and
its callback handing each ended transaction on ``__consumer_offsets`` to the group
coordinator, ``onTransactionCompleted``).

Theory.  The transaction coordinator ends a transaction by asking every leader of its
partitions for a COMMIT or ABORT marker (``record/control.py``).  Each marker of a request
is appended to its partitions as leader, with internal topics allowed (``__consumer_offsets``
holds transactional offset commits) and origin COORDINATOR -- the producer state refuses a
stale producer epoch (INVALID_PRODUCER_EPOCH) or coordinator epoch
(TRANSACTION_COORDINATOR_FENCED) -- and waited for like ``acks=-1``, so the coordinator
completes the transaction only once the markers are replicated.  Then every listener hears
``(topic, partition, producer id, committed)`` for each partition that succeeded (the group
coordinator applies or drops the producer's pending transactional offsets); a listener
that raises is logged and the others still run.  The markers of one request are written
concurrently.

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from millrace.broker.delayed_produce import PartitionResponse, TopicPartition
from millrace.common.errors import Errors
from millrace.common.time import Time
from millrace.record.control import build_end_txn_marker
from millrace.storage import AppendOrigin

log = logging.getLogger(__name__)

TXN_MARKER_TIMEOUT_MS = 30_000  # Kafka waits request.timeout.ms (default 30 s)

# (topic, partition, producer id, committed) of a marker appended and replicated here
TxnMarkerListener = Callable[[str, int, int, bool], None]


@dataclass(frozen=True, slots=True)
class TxnMarkerEntry:
    """One marker of a WriteTxnMarkers request (Kafka's ``TxnMarkerEntry``)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]


class AppendRecords(Protocol):
    """``ReplicaManager.append_records``, as far as markers use it."""

    def __call__(self, timeout_ms: int, required_acks: int,
                 entries: dict[TopicPartition, bytes | None], *, origin: AppendOrigin,
                 internal_topics_allowed: bool
                 ) -> Awaitable[dict[TopicPartition, PartitionResponse]]: ...


class TxnMarkerWriter:
    def __init__(self, append_records: AppendRecords, time: Time) -> None:
        self._append_records = append_records
        self._time = time
        self.listeners: list[TxnMarkerListener] = []

    async def append_txn_markers(self, markers: Sequence[TxnMarkerEntry],
                                 timeout_ms: int = TXN_MARKER_TIMEOUT_MS
                                 ) -> list[dict[TopicPartition, int]]:
        """Per marker, per partition, the error code after appending the control batch and
        waiting for the ISR; the listeners hear of each partition that succeeded."""
        return list(await asyncio.gather(*(self._append(m, timeout_ms) for m in markers)))

    async def _append(self, marker: TxnMarkerEntry, timeout_ms: int
                      ) -> dict[TopicPartition, int]:
        now = self._time.milliseconds()
        entries: dict[TopicPartition, bytes | None] = {
            tp: build_end_txn_marker(marker.producer_id, marker.producer_epoch,
                                     marker.committed, marker.coordinator_epoch, now)
            for tp in marker.partitions}
        responses = await self._append_records(timeout_ms, -1, entries,
                                               origin=AppendOrigin.COORDINATOR,
                                               internal_topics_allowed=True)
        errors = {tp: int(responses[tp].error) for tp in marker.partitions}
        for (topic, index), error in errors.items():
            if error != Errors.NONE:
                continue
            for listener in self.listeners:
                try:
                    listener(topic, index, marker.producer_id, marker.committed)
                except Exception:
                    log.exception("transaction marker listener failed for %s-%d", topic,
                                  index)
        return errors
