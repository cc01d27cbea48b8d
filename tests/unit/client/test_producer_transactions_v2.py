"""The transactional producer with transaction.version 2 (KIP-890 part 2) against the
fake coordinator, and the classic protocol's epoch bump after an EndTxn without an
answer.  Same harness as ``test_producer_transactions``: no sockets, no thread."""

from __future__ import annotations

import contextlib
from typing import Any

from millrace.client.api_versions import ApiVersions
from millrace.client.cluster import TopicPartition
from millrace.client.consumer import ConsumerGroupMetadata
from millrace.client.errors import KafkaTimeoutError
from millrace.client.producer._internals.txn_state import State
from tests.unit.client.fakes import step
from tests.unit.client.test_producer_transactions import (
    TP0,
    TP1,
    abort,
    commit,
    in_thread,
    send,
    setup,
)
from tests.unit.client.txn_fakes import PRODUCER_FENCED, TxnFakeCluster

COORDINATOR_NODE = 0x7FFFFFFF - 1  # the client's id for coordinator node 1


def cluster_at(transaction_version: int) -> TxnFakeCluster:
    return TxnFakeCluster(nodes=2, topics={"t": 2}, coordinator=1,
                          transaction_version=transaction_version)


def calls_of(cluster: TxnFakeCluster, api: str) -> list[tuple[int, Any]]:
    return [(v, b) for _, name, v, b in cluster.requests if name == api]


def start_commit_and_lose_end_txn(producer: Any, cluster: TxnFakeCluster, clock: Any) -> None:
    """commit_transaction() whose EndTxn reaches nobody; then its connection drops."""
    cluster.swallow_end_txn = 1
    with contextlib.suppress(KafkaTimeoutError):
        producer.commit_transaction(timeout=0)
    for _ in range(50):
        if cluster.delayed_end_txns:
            break
        step(producer)
        clock.sleep(10)
    assert len(cluster.delayed_end_txns) == 1


def test_api_versions_keeps_the_features_of_the_newest_epoch() -> None:
    versions = ApiVersions()
    assert versions.finalized_features_info().finalized_features == {}
    versions.update_finalized_features(3, {"transaction.version": 2})
    versions.update_finalized_features(2, {"transaction.version": 1})  # an older broker
    versions.update_finalized_features(-1, {})  # no features at all
    info = versions.finalized_features_info()
    assert (info.finalized_features_epoch, dict(info.finalized_features)) == (
        3, {"transaction.version": 2})
    versions.update_finalized_features(4, {})
    assert versions.finalized_features_info().finalized_features == {}


def test_the_feature_is_read_at_begin_transaction() -> None:
    producer, _, _ = setup(cluster_at(2))
    tm = producer._transaction_manager
    assert not tm.is_transaction_v2_enabled
    producer.begin_transaction()
    assert tm.is_transaction_v2_enabled
    producer.close(0)
    classic, _, _ = setup(cluster_at(1))
    classic.begin_transaction()
    assert not classic._transaction_manager.is_transaction_v2_enabled
    classic.close(0)


def test_v2_commit_adds_nothing_and_takes_the_next_epoch_from_end_txn() -> None:
    cluster = cluster_at(2)
    producer, _, clock = setup(cluster)
    for n in range(3):
        producer.begin_transaction()
        send(producer, b"a%d" % n, 0)
        send(producer, b"b%d" % n, 1)
        commit(producer, clock)
    assert "AddPartitionsToTxn" not in cluster.api_calls()
    assert {v for v, _ in calls_of(cluster, "Produce")} == {12}
    ends = calls_of(cluster, "EndTxn")
    assert [(v, b.producer_id, b.producer_epoch) for v, b in ends] == [
        (5, 1000, 0), (5, 1000, 1), (5, 1000, 2)]
    assert len(calls_of(cluster, "InitProducerId")) == 1
    tm = producer._transaction_manager
    assert (tm.producer_id, tm.producer_epoch, tm.state) == (1000, 3, State.READY)
    assert cluster.txns["tx"].ended == [True, True, True]
    # every transaction starts its sequences again at 0 with its new epoch
    assert [(h.producer_epoch, h.base_sequence) for h in cluster.produced_headers()] == [
        (0, 0), (0, 0), (1, 0), (1, 0), (2, 0), (2, 0)]
    assert cluster.values(TP0) == [b"a0", b"a1", b"a2"]
    producer.close(0)


def test_v2_abort_bumps_the_epoch_too() -> None:
    cluster = cluster_at(2)
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    send(producer, b"x", 0)
    step(producer, 5)
    abort(producer, clock)
    producer.begin_transaction()
    send(producer, b"y", 0)
    commit(producer, clock)
    assert cluster.txns["tx"].ended == [False, True]
    assert [b.producer_epoch for _, b in calls_of(cluster, "EndTxn")] == [0, 1]
    assert producer._transaction_manager.producer_epoch == 2
    producer.close(0)


def test_v2_epoch_exhausted_the_coordinator_answers_a_new_producer_id() -> None:
    cluster = cluster_at(2)
    producer, _, clock = setup(cluster)
    tm = producer._transaction_manager
    cluster.txns["tx"].epoch = 32766
    tm.set_producer_id_and_epoch(1000, 32766)
    producer.begin_transaction()
    send(producer, b"last", 0)
    commit(producer, clock)
    assert (tm.producer_id, tm.producer_epoch) == (1001, 0)
    producer.begin_transaction()
    send(producer, b"first", 0)
    commit(producer, clock)
    assert [(h.producer_id, h.producer_epoch, h.base_sequence)
            for h in cluster.produced_headers()] == [(1000, 32766, 0), (1001, 0, 0)]
    assert cluster.txns["tx"].ended == [True, True]
    producer.close(0)


def test_v2_send_offsets_goes_only_to_the_group_coordinator() -> None:
    cluster = cluster_at(2)
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    in_thread(producer, clock, lambda: producer.send_offsets_to_transaction(
        {TopicPartition("in", 0): 42}, ConsumerGroupMetadata("g", 7, "m", None), timeout=5))
    assert "AddOffsetsToTxn" not in cluster.api_calls()
    assert [v for v, _ in calls_of(cluster, "TxnOffsetCommit")] == [5]
    assert cluster.offsets == {}
    commit(producer, clock)  # offsets only: the transaction did start
    assert cluster.offsets == {("g", TopicPartition("in", 0)): (42, 7, "m")}
    assert cluster.txns["tx"].ended == [True]
    producer.close(0)


def test_v2_a_retried_end_txn_keeps_the_old_epoch() -> None:
    cluster = cluster_at(2)
    producer, _selector, clock = setup(cluster, **{"request.timeout.ms": 1000})
    producer.begin_transaction()
    send(producer, b"a", 0)
    cluster.lose_end_txn_responses = 1  # committed, but the answer is lost
    with contextlib.suppress(KafkaTimeoutError):
        producer.commit_transaction(timeout=0)
    step(producer, 10)
    clock.sleep(1000)  # the request times out
    commit(producer, clock)
    assert [b.producer_epoch for _, b in calls_of(cluster, "EndTxn")] == [0, 0]
    assert cluster.txns["tx"].ended == [True]  # the retry was recognised
    assert producer._transaction_manager.producer_epoch == 1
    assert len(calls_of(cluster, "InitProducerId")) == 1  # no extra bump with v2
    producer.close(0)


def bufstream_case(cluster: TxnFakeCluster) -> tuple[Any, Any]:
    """Transaction 1's first EndTxn is delayed until transaction 2 has written a record;
    returns the producer and what the coordinator answered the delayed EndTxn."""
    producer, selector, clock = setup(cluster)
    producer.begin_transaction()
    send(producer, b"one", 0)
    start_commit_and_lose_end_txn(producer, cluster, clock)
    selector.drop_connection(COORDINATOR_NODE)
    commit(producer, clock)  # the retry commits transaction 1
    producer.begin_transaction()
    future = send(producer, b"two", 1)
    for _ in range(20):
        step(producer)
    assert future.done()
    assert cluster.txns["tx"].partitions == {TP1}
    [answer] = cluster.deliver_delayed_end_txns()
    return producer, answer


def test_bufstream_case_v2_the_delayed_end_txn_is_fenced() -> None:
    cluster = cluster_at(2)
    producer, answer = bufstream_case(cluster)
    assert answer.error_code == PRODUCER_FENCED
    assert cluster.txns["tx"].ended == [True]
    assert cluster.txns["tx"].partitions == {TP1}  # transaction 2 still open
    assert [v for v, _ in calls_of(cluster, "EndTxn")] == [5, 5]
    assert len(calls_of(cluster, "InitProducerId")) == 1  # v2 needs no extra bump
    commit(producer, _clock(producer))
    assert cluster.txns["tx"].ended == [True, True]
    producer.close(0)


def test_bufstream_case_v1_the_epoch_is_bumped_before_the_next_transaction() -> None:
    cluster = cluster_at(1)
    producer, answer = bufstream_case(cluster)
    assert answer.error_code == PRODUCER_FENCED
    assert cluster.txns["tx"].ended == [True]
    assert cluster.txns["tx"].partitions == {TP1}
    inits = calls_of(cluster, "InitProducerId")
    assert [(b.producer_id, b.producer_epoch) for _, b in inits] == [(-1, -1), (1000, 0)]
    assert {v for v, _ in calls_of(cluster, "Produce")} == {11}
    assert [h.producer_epoch for h in cluster.produced_headers()] == [0, 1]
    commit(producer, _clock(producer))
    assert cluster.txns["tx"].ended == [True, True]
    producer.close(0)


def test_v1_an_answered_end_txn_needs_no_epoch_bump() -> None:
    cluster = cluster_at(1)
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    send(producer, b"a", 0)
    commit(producer, clock)
    assert len(calls_of(cluster, "InitProducerId")) == 1
    assert producer._transaction_manager.producer_epoch == 0
    producer.close(0)


def _clock(producer: Any) -> Any:
    return producer._time
