"""Which batches of a range belong to aborted transactions: the read_committed walk.

Java counterparts: the ``abortedProducerIds`` / ``abortedTransactions`` bookkeeping of the
consumer's ``CompletedFetch`` (``isBatchAborted``, ``consumeAbortedTransactionsUpTo``) and
the log cleaner's ``CleanedTransactionMetadata`` (``onBatchRead``, ``onControlBatchRead``).
Both walk batches with the same rule; here it is written once, for the consumer's
read_committed fetch and for the cleaner (which must neither let an aborted record shadow
a committed one nor keep aborted data).

Theory.  The input is the aborted transactions overlapping the range, each as ``(producer
id, first offset)`` -- a fetch response's ``aborted_transactions``, or the ``.txnindex``
entries a log collects for the range.  Batches are fed in offset order.  A producer becomes
*aborted* once a batch reaches (``last_offset >=``) the first offset of one of its aborted
transactions; from then on its transactional data batches are aborted, until its ABORT
marker (a control batch) is seen.  Control batches themselves are never "aborted" here:
what to do with them is the caller's business.  A producer has at most one transaction
open at a time, so a set of producer ids is enough.

Sans-I/O and not thread-safe: one instance per walk, owned by whoever walks.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from millrace.record.control import ControlRecordType, parse_control_record
from millrace.record.memory_records import AnyRecordBatch

__all__ = ["AbortedTransactionFilter"]


class AbortedTransactionFilter:
    """Feed batches in offset order to ``is_batch_aborted`` (see the module docstring)."""

    __slots__ = ("_aborted_pids", "_pending")

    def __init__(self, aborted_transactions: Iterable[tuple[int, int]] = ()) -> None:
        """``aborted_transactions``: ``(producer_id, first_offset)`` of each one."""
        # min-heap by first offset of the transactions not reached yet
        self._pending = [(first_offset, pid) for pid, first_offset in aborted_transactions]
        heapq.heapify(self._pending)
        self._aborted_pids: set[int] = set()  # producers inside an aborted transaction

    def is_batch_aborted(self, batch: AnyRecordBatch) -> bool:
        """True if ``batch`` (the next in offset order) is a data batch of an aborted
        transaction.  A control batch returns False; an ABORT marker ends its producer's
        aborted transaction."""
        pending = self._pending
        last = batch.last_offset
        while pending and pending[0][0] <= last:
            self._aborted_pids.add(heapq.heappop(pending)[1])
        pid = batch.producer_id
        if batch.is_control:
            records = batch.record_list()
            if records and parse_control_record(records[0].key) is ControlRecordType.ABORT:
                self._aborted_pids.discard(pid)
            return False
        return batch.is_transactional and pid in self._aborted_pids
