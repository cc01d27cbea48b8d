"""The read_committed walk shared by the consumer and the log cleaner."""

from __future__ import annotations

from millrace.record import RecordBatch, RecordBatchBuilder
from millrace.record.aborted_transactions import AbortedTransactionFilter
from millrace.record.control import build_end_txn_marker


def _data(offset: int, pid: int, transactional: bool = True) -> RecordBatch:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0,
                           is_transactional=transactional, base_offset=offset)
    b.append(0, b"k", b"v")
    return RecordBatch(b.build(), 0)


def _marker(offset: int, pid: int, committed: bool) -> RecordBatch:
    data = bytearray(build_end_txn_marker(pid, 0, committed, 0, 0))
    data[0:8] = offset.to_bytes(8, "big")
    return RecordBatch(bytes(data), 0)


def test_aborted_from_first_offset_to_abort_marker_only() -> None:
    walk = AbortedTransactionFilter([(7, 2)])
    assert [walk.is_batch_aborted(b) for b in (
        _data(0, 7),                # before the aborted transaction: its earlier commit
        _marker(1, 7, True),
        _data(2, 7),                # aborted
        _data(3, 8),                # another producer
        _data(4, 7, False),         # not transactional
        _marker(5, 7, False),       # the ABORT marker itself is not "aborted"
        _data(6, 7),                # the next transaction, committed later
    )] == [False, False, True, False, False, False, False]


def test_a_walk_starting_inside_the_transaction() -> None:
    walk = AbortedTransactionFilter([(7, 0)])
    assert walk.is_batch_aborted(_data(5, 7))
    assert not walk.is_batch_aborted(_marker(6, 7, False))
    assert not walk.is_batch_aborted(_data(7, 7))


def test_no_aborted_transactions_aborts_nothing() -> None:
    walk = AbortedTransactionFilter()
    assert not walk.is_batch_aborted(_data(0, 7))
