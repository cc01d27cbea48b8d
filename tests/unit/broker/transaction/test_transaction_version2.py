"""KIP-890 in the pure coordinator: transaction.version 2's epoch bump per transaction
(EndTxn v5), its retry and fencing rules, epoch overflow to a next producer id (kept
across a coordinator move), and the verify-only answers (part 1)."""

from __future__ import annotations

from millrace.broker.transaction.coordinator import EndTxnResult
from millrace.broker.transaction.records import decode_value
from millrace.broker.transaction.transaction_metadata import TransactionState
from millrace.common.errors import Errors
from tests.unit.broker.transaction.txngen import EPOCH, Harness

S = TransactionState
TID = "tx-2"
T0 = 5_000_000
OUT = (("out", 0), ("out", 1))
TV2 = 2


def start(h: Harness, pid: int = 1000, epoch: int = 0, now: int = T0) -> None:
    assert h.run(h.coord.add_partitions_to_txn(TID, pid, epoch, OUT, now, TV2)) == Errors.NONE


def end(h: Harness, pid: int, epoch: int, commit: bool, now: int = T0,
        tv: int = TV2) -> EndTxnResult:
    result = h.run(h.coord.end_txn(TID, pid, epoch, commit, now, tv))
    assert isinstance(result, EndTxnResult)
    return result


def new_producer(h: Harness) -> None:
    assert h.run(h.coord.init_producer_id(TID, 60_000, None, T0)).producer_epoch == 0


def test_commit_bumps_epoch_and_markers_carry_it() -> None:
    h = Harness()
    new_producer(h)
    start(h)
    assert end(h, 1000, 0, True) == EndTxnResult(Errors.NONE, 1000, 1)
    md = h.coord.transactions[TID]
    assert (md.state, md.producer_epoch, md.last_producer_epoch,
            md.client_transaction_version) == (S.PREPARE_COMMIT, 1, 0, TV2)
    [entry] = h.coord.take_markers()
    assert (entry.producer_id, entry.producer_epoch, entry.committed) == (1000, 1, True)
    h.run(h.coord.complete_markers(entry, T0 + 1))
    assert (md.state, md.producer_epoch) == (S.COMPLETE_COMMIT, 1)
    # the record is TransactionLogValue v1 with the client's transaction version
    value = h.log[h.coord.partition_for(TID)][-1][1]
    assert value is not None and value[:2] == b"\x00\x01"
    assert decode_value(value).client_transaction_version == TV2


def test_abort_bumps_epoch_too() -> None:
    h = Harness()
    new_producer(h)
    start(h)
    assert end(h, 1000, 0, False) == EndTxnResult(Errors.NONE, 1000, 1)
    [entry] = h.coord.take_markers()
    assert (entry.producer_epoch, entry.committed) == (1, False)


def test_retry_with_previous_epoch_same_outcome_is_none() -> None:
    h = Harness()
    new_producer(h)
    start(h)
    end(h, 1000, 0, True)
    # while the markers are written: the retry is CONCURRENT, the other outcome illegal
    assert end(h, 1000, 0, True).error == Errors.CONCURRENT_TRANSACTIONS
    assert end(h, 1000, 0, False).error == Errors.INVALID_TXN_STATE
    # the current (bumped) epoch is the next transaction's: it waits (retriable) until
    # this one's markers are written, it never ends this one
    assert end(h, 1000, 1, True).error == Errors.CONCURRENT_TRANSACTIONS
    [entry] = h.coord.take_markers()
    h.run(h.coord.complete_markers(entry, T0 + 1))
    assert end(h, 1000, 0, True) == EndTxnResult(Errors.NONE, 1000, 1)
    assert end(h, 1000, 0, False).error == Errors.INVALID_TXN_STATE
    # two epochs back is stale
    h.coord.transactions[TID].producer_epoch = 2
    assert end(h, 1000, 0, True).error == Errors.PRODUCER_FENCED


def test_delayed_end_txn_after_next_transaction_started_is_fenced() -> None:
    """The Jepsen Bufstream case: txn 1's EndTxn(commit) is held back until txn 2 runs."""
    h = Harness()
    new_producer(h)
    start(h)
    assert end(h, 1000, 0, True).producer_epoch == 1
    [entry] = h.coord.take_markers()
    h.run(h.coord.complete_markers(entry, T0 + 1))
    start(h, epoch=1, now=T0 + 2)                      # txn 2
    assert end(h, 1000, 0, True, now=T0 + 3).error == Errors.PRODUCER_FENCED
    md = h.coord.transactions[TID]
    assert (md.state, md.producer_epoch, md.topic_partitions) == (S.ONGOING, 1, set(OUT))
    assert h.coord.take_markers() == []
    # txn 2's abort really aborts
    assert end(h, 1000, 1, False, now=T0 + 4) == EndTxnResult(Errors.NONE, 1000, 2)
    [entry] = h.coord.take_markers()
    assert (entry.producer_epoch, entry.committed, entry.partitions) == (2, False, set(OUT))


def test_classic_client_delayed_end_txn_ends_the_next_transaction() -> None:
    """transaction.version 1 (Kafka 3.x): the same epoch for both transactions, so the
    held-back commit of txn 1 commits txn 2 -- what KIP-890 part 2 closes."""
    h = Harness()
    new_producer(h)
    assert h.run(h.coord.add_partitions_to_txn(TID, 1000, 0, OUT, T0)) == Errors.NONE
    assert end(h, 1000, 0, True, tv=0) == EndTxnResult(Errors.NONE, 1000, 0)
    [entry] = h.coord.take_markers()
    h.run(h.coord.complete_markers(entry, T0 + 1))
    assert h.run(h.coord.add_partitions_to_txn(TID, 1000, 0, OUT, T0 + 2)) == Errors.NONE
    assert end(h, 1000, 0, True, now=T0 + 3, tv=0).error == Errors.NONE
    [entry] = h.coord.take_markers()
    assert (entry.producer_epoch, entry.committed) == (0, True)   # txn 2 committed


def test_epoch_overflow_hands_over_to_next_producer_id() -> None:
    h = Harness()
    new_producer(h)
    md = h.coord.transactions[TID]
    md.producer_epoch = 32766                     # exhausted: the next bump is the last
    start(h, epoch=32766)
    assert end(h, 1000, 32766, True) == EndTxnResult(Errors.NONE, 1001, 0)
    assert (md.producer_id, md.producer_epoch, md.next_producer_id) == (1000, 32767, 1001)
    [entry] = h.coord.take_markers()
    assert (entry.producer_id, entry.producer_epoch) == (1000, 32767)
    # a new coordinator loads the prepared state from the log: the next id survives
    h.coord = h.new_coordinator(epoch=EPOCH + 1)
    md = h.coord.transactions[TID]
    assert (md.next_producer_id, md.client_transaction_version) == (1001, TV2)
    [entry] = h.coord.take_markers()
    h.run(h.coord.complete_markers(entry, T0 + 1))
    assert (md.state, md.producer_id, md.producer_epoch, md.last_producer_id,
            md.next_producer_id) == (S.COMPLETE_COMMIT, 1001, 0, 1000, -1)
    # the retry with the old id and its last usable epoch is answered with the new id
    assert end(h, 1000, 32766, True) == EndTxnResult(Errors.NONE, 1001, 0)
    assert end(h, 1000, 32765, True).error == Errors.INVALID_PRODUCER_ID_MAPPING
    start(h, pid=1001, epoch=0, now=T0 + 2)
    assert end(h, 1001, 0, False, now=T0 + 3) == EndTxnResult(Errors.NONE, 1001, 1)


def test_verify_only_answers() -> None:
    h = Harness()
    new_producer(h)
    verify = h.coord.verify_partitions_in_txn
    assert verify(TID, 1000, 0, [("out", 0)]) == {("out", 0): Errors.TRANSACTION_ABORTABLE}
    start(h)
    assert verify(TID, 1000, 0, [("out", 0), ("other", 0)]) == {
        ("out", 0): Errors.NONE, ("other", 0): Errors.TRANSACTION_ABORTABLE}
    assert verify(TID, 1000, 1, [("out", 0)]) == {("out", 0): Errors.PRODUCER_FENCED}
    assert verify(TID, 999, 0, [("out", 0)]) == {
        ("out", 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    end(h, 1000, 0, False)
    assert verify(TID, 1000, 1, [("out", 0)]) == {("out", 0): Errors.CONCURRENT_TRANSACTIONS}
    [entry] = h.coord.take_markers()
    h.run(h.coord.complete_markers(entry, T0 + 1))
    # after the abort the partition is no longer in any transaction
    assert verify(TID, 1000, 1, [("out", 0)]) == {("out", 0): Errors.TRANSACTION_ABORTABLE}


def test_abort_of_a_transaction_no_partition_reached_bumps_the_epoch() -> None:
    """v2 adds partitions with the Produce: an abort can come for a transaction whose
    only Produce never arrived (the coordinator still shows the last one complete)."""
    h = Harness()
    new_producer(h)
    start(h)
    end(h, 1000, 0, True)
    [entry] = h.coord.take_markers()
    h.run(h.coord.complete_markers(entry, T0 + 1))
    md = h.coord.transactions[TID]
    assert (md.state, md.producer_epoch) == (S.COMPLETE_COMMIT, 1)
    assert end(h, 1000, 1, False, T0 + 2) == EndTxnResult(Errors.NONE, 1000, 2)
    [empty] = h.coord.take_markers()
    assert (empty.producer_epoch, empty.committed, tuple(empty.partitions)) == (2, False, ())
    h.run(h.coord.complete_markers(empty, T0 + 3))
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, 2)
    assert end(h, 1000, 1, False) == EndTxnResult(Errors.NONE, 1000, 2)  # its retry
    # a commit of nothing is refused (the current epoch ends nothing once complete), and
    # the classic protocol has no such abort
    assert end(h, 1000, 2, True).error == Errors.PRODUCER_FENCED
    assert end(h, 1000, 2, False, tv=0).error == Errors.PRODUCER_FENCED
    fresh = Harness()
    new_producer(fresh)
    assert end(fresh, 1000, 0, False, tv=0).error == Errors.INVALID_TXN_STATE  # Empty
