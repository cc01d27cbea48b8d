"""read_committed against crafted fetch responses: Kafka's CompletedFetch rules with
several producers interleaved, an aborted transaction spanning fetches, a producer
that aborts then commits, control records never delivered, lag against the LSO."""

from __future__ import annotations

from consumergen import batch
from test_fetcher import T0, Env, partition_data

from millrace.client.consumer._internals.subscription_state import FetchPosition
from millrace.record import build_end_txn_marker


def marker(pid: int, commit: bool, offset: int) -> bytes:
    return build_end_txn_marker(pid, 0, commit, 0, 1000, base_offset=offset)


def txn(offset: int, values: list[bytes], pid: int) -> bytes:
    return batch(offset, values, producer_id=pid, transactional=True)


def test_interleaved_producers_only_the_aborted_one_is_dropped() -> None:
    # pid 7 aborts, pid 8 commits, pid 9 is idempotent only; their batches interleave
    log = (txn(0, [b"a0"], 7) + txn(1, [b"c1"], 8) + batch(2, [b"i2"], producer_id=9)
           + txn(3, [b"a3", b"a4"], 7) + txn(5, [b"c5"], 8) + marker(7, False, 6)
           + txn(7, [b"c7"], 8) + marker(8, True, 8))
    env = Env(isolation_level=1)
    env.assign((T0, 0))
    env.fetch(partition_data(0, log, aborted=[(7, 0)], lso=9, hw=9))
    got = env.fetcher.collect_fetch()[T0]
    assert [(r.offset, r.value) for r in got] == [(1, b"c1"), (2, b"i2"), (5, b"c5"),
                                                   (7, b"c7")]
    assert env.subs.position(T0) == FetchPosition(9)


def test_read_uncommitted_gets_everything_but_control_records() -> None:
    log = txn(0, [b"a0"], 7) + marker(7, False, 1) + txn(2, [b"c2"], 8) + marker(8, True, 3)
    env = Env(isolation_level=0)
    env.assign((T0, 0))
    env.fetch(partition_data(0, log, aborted=None, lso=4, hw=4))
    assert env.offsets() == {T0: [0, 2]}
    assert env.subs.position(T0) == FetchPosition(4)


def test_an_aborted_transaction_spanning_fetches() -> None:
    env = Env(isolation_level=1)
    env.assign((T0, 0))
    # first fetch: the transaction's first batches; the broker lists it as aborted
    env.fetch(partition_data(0, txn(0, [b"a0", b"a1"], 7) + batch(2, [b"p2"], producer_id=3),
                             aborted=[(7, 0)], lso=10, hw=10))
    assert env.offsets() == {T0: [2]}
    assert env.subs.position(T0) == FetchPosition(3)
    # second fetch from offset 3: the same transaction, listed again, then its marker
    env.fetch(partition_data(0, txn(3, [b"a3"], 7) + marker(7, False, 4)
                             + txn(5, [b"n5"], 7) + marker(7, True, 6),
                             aborted=[(7, 0)], lso=10, hw=10))
    # after its ABORT marker the same producer's next transaction is delivered
    assert env.offsets() == {T0: [5]}
    assert env.subs.position(T0) == FetchPosition(7)


def test_a_producer_aborting_twice_with_a_commit_between() -> None:
    log = (txn(0, [b"x"], 7) + marker(7, False, 1) + txn(2, [b"y"], 7) + marker(7, True, 3)
           + txn(4, [b"z"], 7) + marker(7, False, 5))
    env = Env(isolation_level=1)
    env.assign((T0, 0))
    env.fetch(partition_data(0, log, aborted=[(7, 0), (7, 4)], lso=6, hw=6))
    assert env.offsets() == {T0: [2]}
    assert env.subs.position(T0) == FetchPosition(6)


def test_lag_is_measured_against_the_last_stable_offset() -> None:
    env = Env(isolation_level=1)
    env.assign((T0, 0))
    env.fetch(partition_data(0, batch(0, [b"a", b"b"]), lso=5, hw=12))
    env.offsets()
    assert env.subs.partition_lag(T0, True) == 3
    assert env.subs.partition_lag(T0, False) == 10
