"""A partition log's transactions: the last stable offset, the markers that complete
transactions, the aborted transactions a read_committed fetch needs, and KIP-890
verification.

Java counterpart: the transactional parts of ``UnifiedLog`` (``firstUnstableOffsetMetadata``
and ``fetchLastStableOffsetMetadata``, ``collectAbortedTransactions``,
``maybeStartTransactionVerification`` and the verification check of ``append``), over the
``ProducerStateManager`` (``producer_state_manager.py``) and each ``LogSegment``'s
``.txnindex`` (``transaction_index.py``).

Theory.  The producer state tracks each open transaction's first offset; a marker
(control batch) completes it, and an aborted one is indexed in the ``.txnindex`` of the
segment holding its marker -- the active segment, right after the marker is written --
with the LSO of that moment.  The last stable offset is min(first unstable offset, high
watermark), where the first unstable offset is the first offset of the oldest transaction
that is open or whose marker the high watermark does not cover yet (never below the log
start: a transaction whose start went with DeleteRecords or retention is clipped to it).
``Log`` recomputes it (``update_first_unstable_offset``; cached, cheap to read) after every
append, high-watermark move, truncation, log start move and load.  read_committed reads
stop at it (``FetchIsolation.TXN_COMMITTED``) and ``collect_aborted_transactions`` answers
which aborted transactions overlap a fetched range: the ``.txnindex`` of every segment from
the one holding the fetch offset, until one says no later abort can reach below the bound.

Verification (KIP-890 part 1): a client's transactional batch whose producer has no open
transaction here is written only with the ``VerificationGuard`` taken before the
transaction coordinator was asked, and only while that guard is still the producer's
(``check_verified``); every transactional batch or marker written spends the guard
(``clear_verification_guards``).

Not thread-safe: owned by one ``Log``, which calls it under its lock (as it calls the
``LocalLog`` and the ``ProducerStateManager`` this reads).
"""

from __future__ import annotations

from collections.abc import Iterable

from millrace.common.errors import CorruptBatchError, CorruptRecordError, InvalidTxnStateError
from millrace.record.batch import BatchHeader
from millrace.record.control import EndTransactionMarker, read_end_txn_marker
from millrace.storage.info import FetchDataInfo
from millrace.storage.local_log import LocalLog
from millrace.storage.producer_state_manager import ProducerStateManager, VerificationGuard
from millrace.storage.transaction_index import AbortedTxn, CompletedTxn


def end_txn_marker(buf: bytes | bytearray | memoryview, pos: int) -> EndTransactionMarker | None:
    """The marker of the control batch at ``pos``; a malformed one is CORRUPT_MESSAGE."""
    try:
        return read_end_txn_marker(buf, pos)
    except CorruptBatchError as e:
        raise CorruptRecordError(f"malformed control record: {e}") from None


class LogTransactions:
    """The transactional state of one ``Log`` (see the module docstring)."""

    def __init__(self, local: LocalLog, producer_state: ProducerStateManager) -> None:
        self._local = local
        self._producer_state = producer_state
        # the first offset of the oldest open or not yet replicated transaction
        self.first_unstable_offset: int | None = None

    # ------------------------------------------------------------------ last stable offset
    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first unstable offset, ``high_watermark``)."""
        first_unstable = self.first_unstable_offset
        return high_watermark if first_unstable is None or first_unstable > high_watermark \
            else first_unstable

    def update_first_unstable_offset(self, log_start_offset: int) -> None:
        first = self._producer_state.first_unstable_offset()
        if first is not None and first < log_start_offset:
            first = log_start_offset  # its start went with DeleteRecords/retention
        self.first_unstable_offset = first

    def on_high_watermark_updated(self, high_watermark: int, log_start_offset: int) -> None:
        """Transactions whose marker the high watermark now covers are stable."""
        self._producer_state.on_high_watermark_updated(high_watermark)
        self.update_first_unstable_offset(log_start_offset)

    # ------------------------------------------------------------------ markers
    def index_completed(self, txn: CompletedTxn) -> None:
        """A marker just written (in the active segment) ended ``txn``: an aborted one goes
        into that segment's ``.txnindex`` with the LSO as of the marker."""
        self._local.active_segment.update_txn_index(
            txn, self._producer_state.last_stable_offset(txn))

    def complete_txns(self, completed: Iterable[CompletedTxn], log_start_offset: int) -> None:
        """A leader append's markers ended ``completed``: index and complete each, then
        recompute the first unstable offset."""
        for txn in completed:
            self.index_completed(txn)
            self._producer_state.complete_txn(txn)
        self.update_first_unstable_offset(log_start_offset)

    # ------------------------------------------------------------------ verification
    def maybe_start_verification(self, producer_id: int) -> VerificationGuard | None:
        """None when ``producer_id`` has an open transaction here (no verification
        needed); otherwise the guard to verify with."""
        psm = self._producer_state
        if psm.has_ongoing_transaction(producer_id):
            return None
        return psm.maybe_create_verification_guard(producer_id)

    def check_verified(self, header: BatchHeader, guard: VerificationGuard | None) -> None:
        """Raise InvalidTxnStateError if ``header`` is a transactional data batch that
        would open a transaction without ``guard`` being its producer's current guard."""
        pid, psm = header.producer_id, self._producer_state
        if (header.is_transactional and not header.is_control
                and not psm.has_ongoing_transaction(pid)
                and (guard is None or guard is not psm.verification_guard(pid))):
            raise InvalidTxnStateError(
                f"Record of producer {pid} was not part of an ongoing "
                "transaction (not verified with the transaction coordinator)")

    def clear_verification_guards(self, headers: Iterable[BatchHeader]) -> None:
        """The transactional batches and markers of ``headers`` were written: their
        producers' guards are spent."""
        for h in headers:
            if h.is_transactional and h.producer_id >= 0:
                self._producer_state.clear_verification_guard(h.producer_id)

    # ------------------------------------------------------------------ read_committed
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset)."""
        out: list[AbortedTxn] = []
        for seg in self._local.segments_from(start_offset):
            result = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return out

    def fetch_upper_bound_offset(self, info: FetchDataInfo, bound: int) -> int:
        """An offset past every record ``info`` holds: the next segment's base, else
        ``bound``."""
        base = info.fetch_offset_metadata.segment_base_offset
        for seg in self._local.segments:
            if seg.base_offset > base:
                return min(seg.base_offset, bound)
        return bound
