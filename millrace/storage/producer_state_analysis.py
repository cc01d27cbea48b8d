"""The producer-state checks of a leader append: idempotence and transactions, batch by
batch, and what the append changes once it is written.

Java counterpart: ``UnifiedLog.analyzeAndValidateProducerState`` (and the
``updateProducers`` step of ``UnifiedLog.append``).

Theory.  ``Log.append_as_leader`` walks a request's batches in order under the log's lock,
assigning each its offsets in place.  A batch with a producer id is first analysed here
(``analyze``), before its header is rewritten, so a batch that is refused -- and every
batch after it -- keeps the header the producer sent:

- from a client, a duplicate of one of its producer's last 5 batches ends the append
  (``analyze`` returns the original batch's metadata; nothing is written);
- with verification required (KIP-890 part 1), a transactional batch that would open a
  transaction needs its producer's current ``VerificationGuard``
  (``LogTransactions.check_verified``: InvalidTxnStateError);
- the producer's epoch and sequence rules (``ProducerAppendInfo.append``:
  OutOfOrderSequenceError, InvalidProducerEpochError, ...), and a marker completes the
  producer's transaction.

Nothing in the producer state changes until the batches are written; then ``update``
applies every producer's append, spends the verification guards and completes the
transactions the markers ended (aborted ones indexed in the active segment).

Not thread-safe: one per leader append, called under the ``Log``'s lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from millrace.record.batch import BatchHeader
from millrace.storage.info import AppendOrigin
from millrace.storage.log_transactions import LogTransactions, end_txn_marker
from millrace.storage.producer_state import BatchMetadata, ProducerAppendInfo
from millrace.storage.producer_state_manager import ProducerStateManager, VerificationGuard
from millrace.storage.transaction_index import CompletedTxn


class ProducerStateAnalysis:
    """One leader append's producer state (see the module docstring)."""

    def __init__(self, producer_state: ProducerStateManager, txns: LogTransactions,
                 origin: AppendOrigin, verification_guard: VerificationGuard | None,
                 require_verification: bool) -> None:
        self._producer_state = producer_state
        self._txns = txns
        self._origin = origin
        self._client = origin == AppendOrigin.CLIENT
        self._verification_guard = verification_guard
        self._require_verification = require_verification
        self._producers: dict[int, ProducerAppendInfo] | None = None
        self._completed: list[CompletedTxn] = []

    def analyze(self, buf: bytearray | memoryview, pos: int, h: BatchHeader, first_offset: int,
                last_offset: int, timestamp: int) -> BatchMetadata | None:
        """Check the batch at ``pos`` (header ``h``, producer id >= 0) that will hold
        [``first_offset``, ``last_offset``]: the original batch if it is a client's
        duplicate, else None; raises if its producer state refuses it."""
        pid = h.producer_id
        if self._client:
            entry = self._producer_state.last_entry(pid)
            dup = None if entry is None else entry.find_duplicate_batch(
                h.producer_epoch, h.base_sequence, h.last_sequence)
            if dup is not None:
                return dup
        if self._require_verification:
            self._txns.check_verified(h, self._verification_guard)
        if self._producers is None:
            self._producers = {}
        pinfo = self._producers.get(pid)
        if pinfo is None:
            pinfo = self._producers[pid] = self._producer_state.prepare_update(pid, self._origin)
        txn = pinfo.append(h, first_offset, last_offset, timestamp,
                           end_txn_marker(buf, pos) if h.is_control else None)
        if txn is not None:
            self._completed.append(txn)
        return None

    def update(self, headers: Sequence[tuple[int, BatchHeader]], log_start_offset: int
               ) -> None:
        """The batches are written: apply the producers' appends, spend the guards of
        ``headers`` and complete the transactions their markers ended."""
        if self._producers:
            for pinfo in self._producers.values():
                self._producer_state.update(pinfo)
            self._txns.clear_verification_guards(h for _, h in headers)
            self._txns.complete_txns(self._completed, log_start_offset)
