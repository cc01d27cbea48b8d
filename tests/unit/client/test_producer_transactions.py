"""The transactional producer against a fake coordinator: no sockets, real protocol
bytes.  The producer's thread is not started; blocking calls are made with ``timeout=0``
and resumed after stepping the sender (a timed-out call waits on the same result when
called again, as in Java)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from millrace.client.cluster import TopicPartition
from millrace.client.consumer import ConsumerGroupMetadata, OffsetAndMetadata
from millrace.client.errors import IllegalStateError, KafkaTimeoutError
from millrace.client.producer import ProducerRecord
from millrace.client.producer._internals.txn_state import State
from millrace.client.producer.errors import TransactionAbortedError
from millrace.common.errors import (
    KafkaError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
)
from tests.unit.client.fakes import make_producer, step
from tests.unit.client.txn_fakes import TxnFakeCluster

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
NOT_COORDINATOR = 16
CONCURRENT_TRANSACTIONS = 51
COORDINATOR_LOAD_IN_PROGRESS = 14
INVALID_PRODUCER_EPOCH = 47
TOPIC_AUTHORIZATION_FAILED = 29
ILLEGAL_GENERATION = 22
PRODUCER_FENCED = 90
MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87


@pytest.fixture
def cluster() -> TxnFakeCluster:
    return TxnFakeCluster(nodes=2, topics={"t": 2}, coordinator=1)


def blocking(producer: Any, clock: Any, call: Callable[[], Any], limit: int = 300) -> Any:
    """Make a blocking call with timeout=0 until it returns, stepping the sender."""
    for _ in range(limit):
        try:
            return call()
        except KafkaTimeoutError:
            step(producer)
            clock.sleep(10)
    raise AssertionError("the call never completed")


def in_thread(producer: Any, clock: Any, call: Callable[[], Any]) -> None:
    """Run a blocking call on another thread while this one steps the sender (for calls
    that are not resumed after a timeout, like send_offsets_to_transaction)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as e:  # handed to the test thread
            outcome.append(e)
    thread = threading.Thread(target=run)
    thread.start()
    for _ in range(500):
        if not thread.is_alive():
            break
        step(producer)
        clock.sleep(10)
        time.sleep(0.001)
    thread.join(5)
    assert outcome, "the call never completed"
    if outcome[0] is not None:
        raise outcome[0]


def setup(cluster: TxnFakeCluster, txn_id: str = "tx", **config: Any) -> tuple[Any, Any, Any]:
    producer, selector, clock = make_producer(
        cluster, {"transactional.id": txn_id, "linger.ms": 0, **config})
    producer._metadata.add("t", clock.milliseconds())
    blocking(producer, clock, lambda: producer.init_transactions(timeout=0))
    return producer, selector, clock


def send(producer: Any, value: bytes, partition: int = 0) -> Any:
    return producer.send(ProducerRecord("t", value, partition=partition))


def commit(producer: Any, clock: Any) -> None:
    blocking(producer, clock, lambda: producer.commit_transaction(timeout=0))


def abort(producer: Any, clock: Any) -> None:
    blocking(producer, clock, lambda: producer.abort_transaction(timeout=0))


def test_init_finds_the_coordinator_and_gets_an_id(cluster: TxnFakeCluster) -> None:
    producer, _, _ = setup(cluster)
    finds = [(n, b) for n, api, _, b in cluster.requests if api == "FindCoordinator"]
    assert len(finds) == 1 and finds[0][1].key_type == 1 \
        and finds[0][1].coordinator_keys == ["tx"]
    inits = [(n, b) for n, api, _, b in cluster.requests if api == "InitProducerId"]
    assert len(inits) == 1
    node, body = inits[0]
    assert node == 1  # the coordinator
    assert (body.transactional_id, body.transaction_timeout_ms) == ("tx", 60000)
    tm = producer._transaction_manager
    assert (tm.producer_id, tm.producer_epoch, tm.state) == (1000, 0, State.READY)
    producer.close(0)


def test_commit_adds_partitions_before_producing_then_ends(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    futures = [send(producer, b"a", 0), send(producer, b"b", 1), send(producer, b"c", 0)]
    commit(producer, clock)
    assert all(f.done() for f in futures)
    calls = cluster.api_calls()
    assert calls[calls.index("AddPartitionsToTxn"):] == ["AddPartitionsToTxn", "Produce",
                                                         "Produce", "EndTxn"]
    add = next(b for _, api, _, b in cluster.requests if api == "AddPartitionsToTxn")
    assert [(t.name, list(t.partitions)) for t in add.v3_and_below_topics] == [("t", [0, 1])]
    headers = cluster.produced_headers()
    assert all(h.is_transactional and h.producer_id == 1000 for h in headers)
    assert {b.transactional_id for _, _, b in cluster.produce_requests()} == {"tx"}
    assert cluster.txns["tx"].ended == [True]
    assert cluster.values(TP0) == [b"a", b"c"] and cluster.values(TP1) == [b"b"]
    assert producer._transaction_manager.state is State.READY
    # the next transaction adds its partitions again, sequences go on
    producer.begin_transaction()
    send(producer, b"d", 0)
    commit(producer, clock)
    assert cluster.txns["tx"].ended == [True, True]
    assert [(h.base_sequence, h.producer_epoch) for h in cluster.produced_headers()
            if h is not None][-1] == (2, 0)
    producer.close(0)


def test_an_empty_transaction_sends_no_end_txn(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    commit(producer, clock)
    assert "EndTxn" not in cluster.api_calls()
    assert producer._transaction_manager.state is State.READY
    producer.close(0)


def test_abort_fails_unsent_records_and_ends_the_transaction(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"linger.ms": 60_000})
    producer.begin_transaction()
    first = send(producer, b"sent", 0)
    step(producer, 3)  # AddPartitionsToTxn
    clock.sleep(60_000)
    blocking(producer, clock, lambda: first.get(0))  # the transaction has started
    queued = send(producer, b"queued", 1)  # lingers; never sent
    abort(producer, clock)
    assert isinstance(queued.exception(0), TransactionAbortedError)
    assert cluster.values(TP1) == []
    assert cluster.txns["tx"].ended == [False]
    producer.begin_transaction()  # usable again
    send(producer, b"next", 1)
    commit(producer, clock)
    assert cluster.values(TP1) == [b"next"]
    producer.close(0)


def test_fenced_producer_fails_fatally(cluster: TxnFakeCluster) -> None:
    zombie, _, clock = setup(cluster)
    zombie.begin_transaction()
    z = send(zombie, b"z", 0)
    blocking(zombie, clock, lambda: z.get(0))
    other, _, other_clock = setup(cluster)  # same transactional id: bumps the epoch
    assert cluster.txns["tx"].epoch == 1 and cluster.txns["tx"].ended == [False]
    with pytest.raises(ProducerFencedError):
        commit(zombie, clock)
    assert zombie._transaction_manager.state is State.FATAL_ERROR
    with pytest.raises(ProducerFencedError, match="fenced by another producer"):
        zombie.begin_transaction()
    with pytest.raises(ProducerFencedError):
        zombie.abort_transaction(timeout=0)
    with pytest.raises(KafkaError, match="Cannot perform send"):
        send(zombie, b"late", 0)
    other.begin_transaction()
    send(other, b"new", 0)
    commit(other, other_clock)
    assert cluster.txns["tx"].ended == [False, True]
    zombie.close(0)
    other.close(0)


def test_invalid_producer_epoch_from_the_coordinator_is_fenced(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    send(producer, b"a", 0)
    cluster.fail["EndTxn"].append(INVALID_PRODUCER_EPOCH)
    with pytest.raises(ProducerFencedError):
        commit(producer, clock)
    assert producer._transaction_manager.state is State.FATAL_ERROR
    producer.close(0)


def test_coordinator_moves_and_retriable_errors_are_retried(cluster: TxnFakeCluster) -> None:
    producer, _, clock = make_producer(cluster, {"transactional.id": "tx", "linger.ms": 0})
    producer._metadata.add("t", clock.milliseconds())
    cluster.fail["InitProducerId"].extend([CONCURRENT_TRANSACTIONS,
                                           COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR])
    blocking(producer, clock, lambda: producer.init_transactions(timeout=0))
    assert cluster.api_calls().count("InitProducerId") == 4
    assert cluster.api_calls().count("FindCoordinator") == 2  # again after NOT_COORDINATOR
    producer.begin_transaction()
    send(producer, b"a", 0)
    cluster.fail["AddPartitionsToTxn"].append(CONCURRENT_TRANSACTIONS)
    cluster.fail["EndTxn"].append(NOT_COORDINATOR)
    commit(producer, clock)
    calls = cluster.api_calls()
    assert calls.count("AddPartitionsToTxn") == 2 and calls.count("EndTxn") == 2
    assert calls.count("FindCoordinator") == 3
    assert cluster.txns["tx"].ended == [True]
    producer.close(0)


def test_abortable_error_then_abort_then_a_new_transaction(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    cluster.fail["AddPartitionsToTxn"].append(TOPIC_AUTHORIZATION_FAILED)
    future = send(producer, b"a", 0)
    with pytest.raises(TopicAuthorizationFailedError):
        commit(producer, clock)  # the EndTxn queued behind the failed add fails with it
    with pytest.raises(KafkaError, match="error state"):
        producer.commit_transaction(timeout=0)
    tm = producer._transaction_manager
    assert tm.state is State.ABORTABLE_ERROR
    assert isinstance(tm.last_error, TopicAuthorizationFailedError)
    assert isinstance(future.exception(0), TopicAuthorizationFailedError)
    assert "Produce" not in cluster.api_calls()
    abort(producer, clock)
    assert tm.state is State.READY
    producer.begin_transaction()
    send(producer, b"b", 0)
    commit(producer, clock)
    assert cluster.values(TP0) == [b"b"]
    producer.close(0)


def test_a_failed_batch_aborts_with_an_epoch_bump(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    good = send(producer, b"ok", 0)
    blocking(producer, clock, lambda: good.get(0))
    cluster.fail_next[TP0].append(INVALID_RECORD)  # not retriable
    bad = send(producer, b"bad", 0)
    blocking(producer, clock, lambda: bad.exception(0) or bad.get(0))
    tm = producer._transaction_manager
    assert tm.state is State.ABORTABLE_ERROR
    with pytest.raises(KafkaError):
        producer.commit_transaction(timeout=0)
    abort(producer, clock)
    calls = cluster.api_calls()
    assert calls[-2:] == ["EndTxn", "InitProducerId"]  # KIP-360: same id, next epoch
    init = [b for _, api, _, b in cluster.requests if api == "InitProducerId"][-1]
    assert (init.producer_id, init.producer_epoch) == (1000, 0)
    assert (tm.producer_id, tm.producer_epoch, tm.state) == (1000, 1, State.READY)
    producer.begin_transaction()
    send(producer, b"again", 0)
    commit(producer, clock)
    last = cluster.produced_headers()[-1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)
    producer.close(0)


def test_send_offsets_goes_to_both_coordinators(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    send(producer, b"out", 0)
    metadata = ConsumerGroupMetadata("g", 7, "member-1", None)
    cluster.fail["TxnOffsetCommit"].append(COORDINATOR_LOAD_IN_PROGRESS)
    in_thread(producer, clock, lambda: producer.send_offsets_to_transaction(
        {TopicPartition("in", 0): OffsetAndMetadata(42, "m"), TopicPartition("in", 1): 5},
        metadata, timeout=5))
    finds = [b for _, api, _, b in cluster.requests if api == "FindCoordinator"]
    assert [(b.key_type, b.coordinator_keys) for b in finds] == [(1, ["tx"]), (0, ["g"])]
    commits = [b for _, api, _, b in cluster.requests if api == "TxnOffsetCommit"]
    assert len(commits) == 2  # retried after COORDINATOR_LOAD_IN_PROGRESS
    body = commits[-1]
    assert (body.group_id, body.generation_id, body.member_id) == ("g", 7, "member-1")
    assert cluster.offsets == {}  # visible only on commit
    commit(producer, clock)
    assert cluster.offsets == {("g", TopicPartition("in", 0)): (42, 7, "member-1"),
                               ("g", TopicPartition("in", 1)): (5, 7, "member-1")}
    producer.close(0)


def test_a_stale_generation_makes_the_transaction_abortable(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    cluster.fail["TxnOffsetCommit"].append(ILLEGAL_GENERATION)
    with pytest.raises(KafkaError, match="consumer group metadata mismatch"):
        in_thread(producer, clock, lambda: producer.send_offsets_to_transaction(
            {TP0: 1}, ConsumerGroupMetadata("g", 3, "m"), timeout=5))
    assert producer._transaction_manager.state is State.ABORTABLE_ERROR
    abort(producer, clock)
    assert cluster.txns["tx"].ended == [False]
    producer.close(0)


def test_state_rules(cluster: TxnFakeCluster) -> None:
    producer, _, clock = make_producer(cluster, {"transactional.id": "tx", "linger.ms": 0})
    producer._metadata.add("t", clock.milliseconds())
    with pytest.raises(IllegalStateError, match="Invalid transition attempted from state "
                                                "UNINITIALIZED to state IN_TRANSACTION"):
        producer.begin_transaction()
    with pytest.raises(KafkaTimeoutError, match="while awaiting InitProducerId"):
        producer.init_transactions(timeout=0)
    with pytest.raises(IllegalStateError, match="previous call to `initTransactions` timed "
                                                "out and must be retried"):
        producer.begin_transaction()
    blocking(producer, clock, lambda: producer.init_transactions(timeout=0))
    with pytest.raises(IllegalStateError, match="Cannot call send in state READY"):
        send(producer, b"x")
    with pytest.raises(IllegalStateError, match="not in progress"):
        producer.send_offsets_to_transaction({TP0: 1}, ConsumerGroupMetadata("g"))
    with pytest.raises(ValueError, match="generationId > 0"):
        producer.send_offsets_to_transaction({TP0: 1}, ConsumerGroupMetadata("g", 2, ""))
    producer.begin_transaction()
    with pytest.raises(IllegalStateError, match="from state IN_TRANSACTION to state "
                                                "IN_TRANSACTION"):
        producer.begin_transaction()
    send(producer, b"x")
    with pytest.raises(KafkaTimeoutError):
        producer.commit_transaction(timeout=0)
    with pytest.raises(IllegalStateError, match="previous call to `commitTransaction`"):
        producer.abort_transaction(timeout=0)
    commit(producer, clock)  # resumes the timed-out commit
    producer.close(0)


def test_transactional_methods_need_a_transactional_id(cluster: TxnFakeCluster) -> None:
    producer, _, _ = make_producer(cluster, {})
    with pytest.raises(IllegalStateError, match=r"transactional\.id"):
        producer.init_transactions()
    producer.close(0)


def test_unsupported_version_is_fatal(cluster: TxnFakeCluster) -> None:
    del cluster.versions[24]  # no AddPartitionsToTxn
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    future = send(producer, b"x")
    with pytest.raises(UnsupportedVersionError):
        commit(producer, clock)
    assert producer._transaction_manager.state is State.FATAL_ERROR
    step(producer)  # queued batches fail with the fatal error
    assert isinstance(future.exception(0), UnsupportedVersionError)
    producer.close(0)


def test_close_aborts_an_open_transaction(cluster: TxnFakeCluster) -> None:
    producer, _, clock = setup(cluster)
    producer.begin_transaction()
    x = send(producer, b"x")
    blocking(producer, clock, lambda: x.get(0))
    producer._sender.initiate_close()
    producer._sender.run()  # the close loop, on this thread
    assert cluster.txns["tx"].ended == [False]
    producer.close(0)
