"""The transaction coordinator's state machine, step by step (no clock, no I/O)."""

from __future__ import annotations

import pytest

from millrace.broker.transaction.coordinator import (
    InitProducerIdResult,
    TransactionConfig,
)
from millrace.broker.transaction.records import decode_value
from millrace.broker.transaction.transaction_metadata import (
    IllegalTransitionError,
    TransactionState,
)
from millrace.common.errors import Errors
from tests.unit.broker.transaction.txngen import EPOCH, Harness

S = TransactionState
TID = "tx-1"
T0 = 1_000_000


def init(h: Harness, tid: str = TID, timeout: int = 60_000, now: int = T0,
         expected: tuple[int, int] | None = None) -> InitProducerIdResult:
    result = h.run(h.coord.init_producer_id(tid, timeout, expected, now))
    assert isinstance(result, InitProducerIdResult)
    return result


def begin(h: Harness, pid: int, epoch: int, now: int = T0, tid: str = TID,
          parts: tuple[tuple[str, int], ...] = (("out", 0), ("out", 1))) -> int:
    return h.run(h.coord.add_partitions_to_txn(tid, pid, epoch, parts, now))


def state(h: Harness, tid: str = TID) -> TransactionState:
    return h.coord.transactions[tid].state


# ---------------------------------------------------------------------- InitProducerId
def test_init_producer_id_new_id_then_bumps() -> None:
    h = Harness()
    assert init(h) == InitProducerIdResult(Errors.NONE, 1000, 0)
    assert init(h) == InitProducerIdResult(Errors.NONE, 1000, 1)
    md = h.coord.transactions[TID]
    assert (md.state, md.txn_timeout_ms, md.pending_state) == (S.EMPTY, 60_000, None)
    assert len(h.log[h.coord.partition_for(TID)]) == 2


def test_init_producer_id_refuses_bad_input() -> None:
    h = Harness()
    assert init(h, tid="").error == Errors.INVALID_REQUEST
    assert init(h, timeout=0).error == Errors.INVALID_TRANSACTION_TIMEOUT
    assert init(h, timeout=900_001).error == Errors.INVALID_TRANSACTION_TIMEOUT
    assert init(h, timeout=900_000).error == Errors.NONE


def test_not_coordinator_and_loading() -> None:
    h = Harness()
    p = h.coord.partition_for(TID)
    h.coord.unload(p)
    assert init(h).error == Errors.NOT_COORDINATOR
    h.coord.begin_loading({p: EPOCH + 1})
    assert init(h).error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.run(h.coord.end_txn(TID, 1, 0, True, T0)).error == Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_epoch_exhaustion_rotates_producer_id() -> None:
    h = Harness()
    init(h)
    md = h.coord.transactions[TID]
    md.producer_epoch = 32766
    assert init(h) == InitProducerIdResult(Errors.NONE, 1001, 0)
    assert h.coord.transactions[TID].last_producer_id == 1000


def test_kip360_bump_with_expected_id_and_epoch() -> None:
    h = Harness()
    init(h)
    assert init(h, expected=(1000, 0)) == InitProducerIdResult(Errors.NONE, 1000, 1)
    # the answer was lost; the client retries with the epoch it had: same epoch again
    assert init(h, expected=(1000, 0)) == InitProducerIdResult(Errors.NONE, 1000, 1)
    assert init(h, expected=(999, 1)).error == Errors.PRODUCER_FENCED
    assert init(h, expected=(1000, 5)).error == Errors.PRODUCER_FENCED


# ---------------------------------------------------------------------- commit / abort
def test_begin_add_commit_complete() -> None:
    h = Harness()
    r = init(h)
    assert begin(h, r.producer_id, r.producer_epoch, now=T0 + 5) == Errors.NONE
    md = h.coord.transactions[TID]
    assert (md.state, md.topic_partitions, md.txn_start_timestamp) == (
        S.ONGOING, {("out", 0), ("out", 1)}, T0 + 5)
    # adding what is already there writes nothing
    before = len(h.log[h.coord.partition_for(TID)])
    assert begin(h, r.producer_id, 0, now=T0 + 6) == Errors.NONE
    assert len(h.log[h.coord.partition_for(TID)]) == before
    assert h.run(h.coord.add_partitions_to_txn(TID, 1000, 0, [("__consumer_offsets", 3)],
                                               T0 + 7)) == Errors.NONE
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0 + 10)).error == Errors.NONE
    assert state(h) == S.PREPARE_COMMIT
    [entry] = h.coord.take_markers()
    assert (entry.producer_id, entry.producer_epoch, entry.committed,
            entry.coordinator_epoch) == (1000, 0, True, EPOCH)
    assert entry.partitions == {("out", 0), ("out", 1), ("__consumer_offsets", 3)}
    # while markers are written: a retried commit is CONCURRENT, an abort is illegal
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0 + 11)).error == Errors.CONCURRENT_TRANSACTIONS
    assert h.run(h.coord.end_txn(TID, 1000, 0, False, T0 + 11)).error == Errors.INVALID_TXN_STATE
    assert h.coord.is_current(entry)
    assert h.run(h.coord.complete_markers(entry, T0 + 20)) == Errors.NONE
    md = h.coord.transactions[TID]
    assert (md.state, md.topic_partitions) == (S.COMPLETE_COMMIT, set())
    assert not h.coord.is_current(entry)
    # a retried EndTxn after completion succeeds; the opposite outcome is refused
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0 + 21)).error == Errors.NONE
    assert h.run(h.coord.end_txn(TID, 1000, 0, False, T0 + 21)).error == Errors.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit with a new start time
    assert begin(h, 1000, 0, now=T0 + 30) == Errors.NONE
    assert h.coord.transactions[TID].txn_start_timestamp == T0 + 30


def test_abort_then_commit_is_invalid() -> None:
    h = Harness()
    init(h)
    begin(h, 1000, 0)
    assert h.run(h.coord.end_txn(TID, 1000, 0, False, T0)).error == Errors.NONE
    h.complete_all_markers(T0 + 1)
    assert state(h) == S.COMPLETE_ABORT
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0 + 2)).error == Errors.INVALID_TXN_STATE
    assert h.run(h.coord.end_txn(TID, 1000, 0, False, T0 + 2)).error == Errors.NONE


def test_end_txn_errors() -> None:
    h = Harness()
    init(h)
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0)).error == Errors.INVALID_TXN_STATE  # Empty
    assert h.run(h.coord.end_txn("nobody", 1000, 0, True, T0)).error == \
        Errors.INVALID_PRODUCER_ID_MAPPING
    assert h.run(h.coord.end_txn(TID, 77, 0, True, T0)).error == Errors.INVALID_PRODUCER_ID_MAPPING
    assert h.run(h.coord.end_txn(TID, 1000, 1, True, T0)).error == Errors.PRODUCER_FENCED
    assert h.run(h.coord.end_txn("", 1000, 0, True, T0)).error == Errors.INVALID_REQUEST
    assert begin(h, 1000, 3) == Errors.PRODUCER_FENCED
    assert begin(h, 1001, 0) == Errors.INVALID_PRODUCER_ID_MAPPING


def test_pending_write_answers_concurrent_transactions() -> None:
    h = Harness()
    init(h)
    pending = h.coord.add_partitions_to_txn(TID, 1000, 0, [("out", 0)], T0)
    assert h.coord.transactions[TID].pending_state == S.ONGOING
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0)).error == Errors.CONCURRENT_TRANSACTIONS
    assert init(h).error == Errors.CONCURRENT_TRANSACTIONS
    assert h.run(pending) == Errors.NONE
    assert state(h) == S.ONGOING


def test_failed_write_leaves_state_unchanged() -> None:
    h = Harness()
    init(h)
    h.fail_writes = Errors.NOT_COORDINATOR
    assert begin(h, 1000, 0) == Errors.NOT_COORDINATOR
    md = h.coord.transactions[TID]
    assert (md.state, md.pending_state, md.topic_partitions) == (S.EMPTY, None, set())
    h.fail_writes = None
    assert begin(h, 1000, 0) == Errors.NONE


# ---------------------------------------------------------------------- fencing
def test_new_producer_fences_ongoing_transaction() -> None:
    h = Harness()
    init(h)
    begin(h, 1000, 0)
    # a second producer with the same id: the open transaction is aborted at epoch 1
    assert init(h).error == Errors.CONCURRENT_TRANSACTIONS
    md = h.coord.transactions[TID]
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, 1)
    [entry] = h.coord.take_markers()
    assert (entry.committed, entry.producer_epoch) == (False, 1)
    # the zombie (epoch 0) is fenced
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0)).error == Errors.PRODUCER_FENCED
    assert begin(h, 1000, 0) == Errors.PRODUCER_FENCED
    assert init(h).error == Errors.CONCURRENT_TRANSACTIONS   # markers not done yet
    h.run(h.coord.complete_markers(entry, T0 + 1))
    assert init(h) == InitProducerIdResult(Errors.NONE, 1000, 2)


def test_timed_out_transaction_is_aborted_with_epoch_bump() -> None:
    config = TransactionConfig(abort_timed_out_transactions_interval_ms=10_000)
    h = Harness(config)
    init(h, timeout=30_000)
    begin(h, 1000, 0, now=T0)
    assert h.coord.poll(T0) == []                 # arms the timers
    assert [h.run(r) for r in h.coord.poll(T0 + 10_000)] == []   # 10 s: not timed out
    results = h.coord.poll(T0 + 40_000)
    assert len(results) == 1
    h.run(results[0])
    md = h.coord.transactions[TID]
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, 1)
    [entry] = h.complete_all_markers(T0 + 40_001)
    assert not entry.committed
    assert state(h) == S.COMPLETE_ABORT
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0 + 41_000)).error == Errors.PRODUCER_FENCED


def test_expired_transactional_id_is_tombstoned() -> None:
    config = TransactionConfig(transactional_id_expiration_ms=1000,
                               remove_expired_transactional_ids_interval_ms=500)
    h = Harness(config)
    init(h, now=T0)
    h.coord.poll(T0)
    assert h.coord.poll(T0 + 500) == []
    [result] = h.coord.poll(T0 + 1000)
    h.run(result)
    assert TID not in h.coord.transactions
    assert h.log[h.coord.partition_for(TID)][-1][1] is None
    # a reload of the log forgets it too
    assert TID not in h.new_coordinator().transactions


# ---------------------------------------------------------------------- failover
def test_failover_reloads_state_and_resends_markers() -> None:
    h = Harness()
    init(h)
    begin(h, 1000, 0)
    assert h.run(h.coord.end_txn(TID, 1000, 0, True, T0 + 1)).error == Errors.NONE
    h.coord.take_markers()          # the old coordinator dies before writing markers
    coord = h.coord = h.new_coordinator(epoch=EPOCH + 1)
    md = coord.transactions[TID]
    assert (md.state, md.producer_id, md.producer_epoch, md.topic_partitions) == (
        S.PREPARE_COMMIT, 1000, 0, {("out", 0), ("out", 1)})
    [entry] = coord.take_markers()
    assert (entry.committed, entry.coordinator_epoch) == (True, EPOCH + 1)
    h.run(coord.complete_markers(entry, T0 + 2))
    assert state(h) == S.COMPLETE_COMMIT
    assert h.new_coordinator().transactions[TID].state == S.COMPLETE_COMMIT


def test_unload_cancels_markers_of_old_epoch() -> None:
    h = Harness()
    init(h)
    begin(h, 1000, 0)
    assert h.run(h.coord.end_txn(TID, 1000, 0, False, T0)).error == Errors.NONE
    [entry] = h.coord.take_markers()
    p = h.coord.partition_for(TID)
    h.coord.unload(p)
    assert not h.coord.is_current(entry)
    assert h.run(h.coord.complete_markers(entry, T0)) == Errors.NOT_COORDINATOR


def test_loaded_ids_continue_with_next_epoch() -> None:
    h = Harness()
    init(h)
    init(h)
    h.coord = h.new_coordinator(epoch=EPOCH + 1)
    assert init(h) == InitProducerIdResult(Errors.NONE, 1000, 2)
    v = decode_value(h.log[h.coord.partition_for(TID)][-1][1] or b"")
    assert (v.producer_epoch, v.transaction_status) == (2, 0)


# ---------------------------------------------------------------------- describe / list
def test_describe_and_list() -> None:
    h = Harness()
    init(h)
    init(h, tid="tx-2")
    begin(h, 1000, 0, now=T0 + 3)
    d = h.coord.describe_transaction(TID)
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms,
            d.transaction_start_time_ms, d.partitions) == (
        Errors.NONE, "Ongoing", 1000, 0, 60_000, T0 + 3, (("out", 0), ("out", 1)))
    assert h.coord.describe_transaction("nope").error == Errors.TRANSACTIONAL_ID_NOT_FOUND
    err, unknown, listing = h.coord.list_transactions()
    assert (err, unknown, [(t.transactional_id, t.producer_id, t.state) for t in listing]) \
        == (Errors.NONE, [], [("tx-1", 1000, "Ongoing"), ("tx-2", 1001, "Empty")])
    _, unknown, listing = h.coord.list_transactions(states=["Empty", "Bogus"])
    assert (unknown, [t.transactional_id for t in listing]) == (["Bogus"], ["tx-2"])
    _, _, listing = h.coord.list_transactions(producer_ids=[1000])
    assert [t.transactional_id for t in listing] == ["tx-1"]


def test_verify_only() -> None:
    h = Harness()
    init(h)
    begin(h, 1000, 0, parts=(("out", 0),))
    assert h.coord.verify_partitions_in_txn(TID, 1000, 0, [("out", 0), ("out", 1)]) == {
        ("out", 0): Errors.NONE, ("out", 1): Errors.TRANSACTION_ABORTABLE}
    assert h.coord.verify_partitions_in_txn(TID, 1000, 1, [("out", 0)]) == {
        ("out", 0): Errors.PRODUCER_FENCED}


def test_illegal_transition_is_a_bug() -> None:
    h = Harness()
    init(h)
    with pytest.raises(IllegalTransitionError):
        h.coord.transactions[TID].prepare_abort_or_commit(S.PREPARE_COMMIT, T0)
