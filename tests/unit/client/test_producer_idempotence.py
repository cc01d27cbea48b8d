"""The idempotent producer against a fake broker that checks sequences like Kafka's."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client.cluster import TopicPartition
from millrace.client.errors import KafkaTimeoutError
from millrace.client.producer import ProducerRecord
from millrace.client.producer._internals.producer_batch import ProducerBatch
from millrace.client.producer._internals.transaction_manager import TransactionManager
from millrace.common.errors import ClusterAuthorizationFailedError
from millrace.record import RecordBatch
from tests.unit.client.fakes import FakeCluster, make_producer, step, warm
from tests.unit.client.test_producer_sender import run_until

TP0 = TopicPartition("t", 0)
NOT_ENOUGH_REPLICAS = 19
OUT_OF_ORDER = 45
UNKNOWN_PRODUCER_ID = 59
COORDINATOR_LOAD_IN_PROGRESS = 14
CLUSTER_AUTHORIZATION_FAILED = 31


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(nodes=1, topics={"t": 1})


def setup(cluster: FakeCluster, **config: Any) -> tuple[Any, Any, Any]:
    producer, selector, clock = make_producer(cluster, {"linger.ms": 0, **config})
    warm(producer, "t", clock)
    return producer, selector, clock


def send(producer: Any, value: bytes) -> Any:
    return producer.send(ProducerRecord("t", value, partition=0))


def sent_headers(cluster: FakeCluster) -> list[Any]:
    return [RecordBatch(b.topic_data[0].partition_data[0].records).header
            for _, _, b in cluster.produce_requests()]


def test_producer_id_first_then_sequences_per_partition(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"batch.size": 200})
    assert [r[1] for r in cluster.requests].index("InitProducerId") < len(cluster.requests)
    futures = [send(producer, b"x" * 60) for _ in range(7)]
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    headers = sent_headers(cluster)
    assert {h.producer_id for h in headers} == {1000}
    assert {h.producer_epoch for h in headers} == {0}
    sequences = [(h.base_sequence, h.records_count) for h in headers]
    expected = 0
    for base, count in sequences:
        assert base == expected
        expected += count
    assert expected == 7
    producer.close()


def test_retries_keep_the_order_with_five_in_flight(cluster: FakeCluster) -> None:
    producer, selector, clock = setup(cluster)
    zero = send(producer, b"0")
    run_until(producer, clock, zero.done)  # the broker now knows this producer
    cluster.hold = True
    cluster.fail_next[TP0].append(NOT_ENOUGH_REPLICAS)
    futures = []
    for value in (b"a", b"b", b"c"):
        futures.append(send(producer, value))
        step(producer)
    assert selector.held == 3  # three requests in flight; b and c are out of sequence
    cluster.hold = False
    selector.release()
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    assert cluster.values(TP0) == [b"0", b"a", b"b", b"c"]
    assert [f.get(0).offset for f in futures] == [1, 2, 3]
    # b and c were answered OUT_OF_ORDER_SEQUENCE_NUMBER and resent after a
    assert len(cluster.produce_requests()) == 1 + 3 + 3
    producer.close()


def test_a_lost_response_is_resent_and_deduplicated(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, **{"request.timeout.ms": 1000})
    first = send(producer, b"first")
    run_until(producer, clock, first.done)
    cluster.lose_responses = 1  # appended, but the answer never comes
    second = send(producer, b"second")
    run_until(producer, clock, second.done, advance_ms=100)
    assert second.get(0).offset == 1  # the original offset, from the duplicate check
    assert cluster.values(TP0) == [b"first", b"second"]
    assert len(cluster.produce_requests()) == 3
    producer.close()


def test_a_real_sequence_gap_bumps_the_epoch(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    first = send(producer, b"first")
    run_until(producer, clock, first.done)
    cluster.fail_next[TP0].append(OUT_OF_ORDER)  # as if the broker lost our sequence
    second = send(producer, b"second")
    run_until(producer, clock, second.done)
    assert second.get(0).offset == 1
    last = sent_headers(cluster)[-1]
    assert (last.producer_id, last.producer_epoch, last.base_sequence) == (1000, 1, 0)
    third = send(producer, b"third")
    run_until(producer, clock, third.done)
    last = sent_headers(cluster)[-1]
    assert (last.producer_epoch, last.base_sequence) == (1, 1)
    producer.close()


def test_unknown_producer_id_bumps_the_epoch_and_retries(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    cluster.fail_next[TP0].append(UNKNOWN_PRODUCER_ID)
    future = send(producer, b"v")
    run_until(producer, clock, future.done)
    assert future.get(0).offset == 0
    assert sent_headers(cluster)[-1].producer_epoch == 1
    producer.close()


def test_init_producer_id_is_retried_on_retriable_errors() -> None:
    cluster = FakeCluster(nodes=1, topics={"t": 1})
    original = cluster._handle_InitProducerId
    answers = [COORDINATOR_LOAD_IN_PROGRESS]

    def flaky(node: int, version: int, body: Any) -> Any:
        response = original(node, version, body)
        if answers:
            response.error_code = answers.pop()
            response.producer_id = -1
        return response

    cluster._handle_InitProducerId = flaky  # type: ignore[method-assign]
    producer, _, _clock = setup(cluster)
    assert producer._transaction_manager.producer_id == 1001
    assert sum(1 for r in cluster.requests if r[1] == "InitProducerId") == 2
    producer.close()


def test_a_fatal_init_producer_id_error_fails_the_records() -> None:
    cluster = FakeCluster(nodes=1, topics={"t": 1})
    original = cluster._handle_InitProducerId

    def refuse(node: int, version: int, body: Any) -> Any:
        response = original(node, version, body)
        response.error_code = CLUSTER_AUTHORIZATION_FAILED
        return response

    cluster._handle_InitProducerId = refuse  # type: ignore[method-assign]
    producer, _, clock = make_producer(cluster, {"linger.ms": 0})
    producer._metadata.add("t", 0)
    for _ in range(20):
        step(producer)
        clock.sleep(100)
    assert producer._transaction_manager.has_fatal_error()
    future = send(producer, b"v")
    step(producer, 2)
    with pytest.raises(ClusterAuthorizationFailedError):
        future.get(0)
    producer.close(0)


def test_expired_batch_after_sending_leaves_an_unresolved_sequence(
        cluster: FakeCluster) -> None:
    """A batch that expired in flight may or may not have been written: its sequence is
    in doubt, so the partition restarts at a new epoch before anything else is sent."""
    producer, selector, clock = setup(cluster, **{"delivery.timeout.ms": 2000,
                                                  "request.timeout.ms": 1400,
                                                  "linger.ms": 600})
    tm = producer._transaction_manager
    cluster.hold = True
    lost = send(producer, b"lost")
    clock.sleep(600)
    step(producer, 2)
    assert selector.held == 1
    clock.sleep(1400)  # 2000 ms after creation; the request itself has not timed out
    step(producer)
    with pytest.raises(KafkaTimeoutError):
        lost.get(0)
    assert tm.has_unresolved_sequence(TP0)
    cluster.hold = False
    queued = send(producer, b"next")
    run_until(producer, clock, queued.done, advance_ms=100)
    assert not tm.has_unresolved_sequence(TP0)
    last = sent_headers(cluster)[-1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)
    # the broker had in fact appended the expired batch (its answer was held back)
    assert cluster.values(TP0) == [b"lost", b"next"]
    producer.close()


def test_a_later_acknowledgement_resolves_a_doubtful_sequence() -> None:
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    batches = []
    for _ in range(2):
        batch = ProducerBatch(TP0, 0, 1000)
        batch.try_append(1, None, b"x", (), None, 0)
        batch.set_producer_state(7, 0, tm.sequence_number(TP0))
        tm.increment_sequence_number(TP0, 1)
        tm.add_in_flight_batch(batch)
        batches.append(batch)
    tm.handle_failed_batch(batches[0], KafkaTimeoutError("expired"), False)
    assert tm.has_unresolved_sequence(TP0)
    tm.maybe_resolve_sequences()
    assert tm.has_unresolved_sequence(TP0)  # the second is still in flight
    tm.handle_completed_batch(batches[1], 1)
    tm.maybe_resolve_sequences()
    assert not tm.has_unresolved_sequence(TP0)
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert tm.producer_epoch == 0  # written after all: no bump


def test_transaction_manager_unit_rules() -> None:
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 3)
    batch = ProducerBatch(TP0, 0, 1000)
    batch.try_append(1, None, b"x", (), None, 0)
    batch.try_append(1, None, b"x", (), None, 0)
    batch.set_producer_state(7, 3, tm.sequence_number(TP0))
    tm.increment_sequence_number(TP0, batch.record_count)
    tm.add_in_flight_batch(batch)
    assert tm.first_in_flight_sequence(TP0) == 0 and tm.sequence_number(TP0) == 2
    assert tm.can_retry(NOT_ENOUGH_REPLICAS, 0, batch)
    assert not tm.can_retry(42, 0, batch)  # INVALID_REQUEST is not retriable
    # an OOOS for the next expected sequence is a real gap: bump
    assert tm.can_retry(OUT_OF_ORDER, 0, batch)
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert tm.producer_epoch == 4 and batch.producer_epoch == 4 and batch.base_sequence == 0
    assert batch.sequence_has_been_reset
    tm.handle_completed_batch(batch, 10)
    assert tm.last_acked_sequence(TP0) == 1 and not tm.has_in_flight_batches(TP0)
    # epoch exhausted: a new producer id is needed
    tm.producer_epoch = 32767
    tm.request_epoch_bump_for_partition(TP0)
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert not tm.has_producer_id()


# ---------------------------------------------------------------------- leader changes
TP1 = TopicPartition("t", 1)
NOT_LEADER = 6


def two_leaders() -> tuple[FakeCluster, Any, Any, Any]:
    """Partition 0 led by node 0, partition 1 by node 1; the broker knows the producer
    on both (one acknowledged record each)."""
    cluster = FakeCluster(nodes=2, topics={"t": 2})
    producer, selector, clock = setup(cluster)
    first = [producer.send(ProducerRecord("t", b"0", partition=p)) for p in (0, 1)]
    run_until(producer, clock, lambda: all(f.done() for f in first))
    return cluster, producer, selector, clock


def test_an_epoch_bump_on_one_partition_does_not_drop_retries_of_another() -> None:
    """KIP-360: the bump restarts only the partition with the gap; a retriable error on
    another partition, answered after the bump, retries that batch at its old epoch and
    sequence (the broker still knows them) instead of failing it."""
    cluster, producer, selector, clock = two_leaders()
    cluster.hold = True
    cluster.fail_next[TP0].append(OUT_OF_ORDER)
    cluster.fail_next[TP1].append(NOT_ENOUGH_REPLICAS)
    a = producer.send(ProducerRecord("t", b"a", partition=0))
    step(producer)
    b = producer.send(ProducerRecord("t", b"b", partition=1))
    step(producer)
    assert selector.held == 2
    cluster.hold = False
    selector.release(1)  # partition 0's answer: a real gap, the epoch is bumped
    step(producer, 2)
    assert producer._transaction_manager.producer_epoch == 1
    selector.release()  # partition 1's NOT_ENOUGH_REPLICAS arrives after the bump
    run_until(producer, clock, lambda: a.done() and b.done())
    assert a.get(0).offset == 1 and b.get(0).offset == 1
    assert cluster.values(TP0) == [b"0", b"a"] and cluster.values(TP1) == [b"0", b"b"]
    retried = [RecordBatch(body.topic_data[0].partition_data[0].records).header
               for node, _, body in cluster.produce_requests() if node == 1][-1]
    assert (retried.producer_epoch, retried.base_sequence) == (0, 1)
    # once idle, partition 1 moves to the new epoch and starts again at sequence 0
    c = producer.send(ProducerRecord("t", b"c", partition=1))
    run_until(producer, clock, c.done)
    last = sent_headers(cluster)[-1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)
    producer.close()


def metadata_requests(cluster: FakeCluster) -> int:
    return sum(1 for r in cluster.requests if r[1] == "Metadata")


@pytest.mark.parametrize(("error", "refreshes"), [
    (5, True),  # LEADER_NOT_AVAILABLE
    (NOT_LEADER, True),
    (NOT_ENOUGH_REPLICAS, False),  # the leader is right; the ISR is short
    (7, False),  # REQUEST_TIMED_OUT from the broker (acks=all waited too long)
])
def test_leader_change_errors_retry_in_order_exactly_once(error: int, refreshes: bool) -> None:
    """Three batches in flight fail with the error; they are retried in sequence order and
    written once each.  Java's Sender refreshes metadata only for the InvalidMetadata
    family: the leader moved or is unknown."""
    cluster, producer, selector, clock = two_leaders()
    before = metadata_requests(cluster)
    cluster.hold = True
    cluster.fail_next[TP0].append(error)
    futures = []
    for value in (b"a", b"b", b"c"):
        futures.append(producer.send(ProducerRecord("t", value, partition=0)))
        step(producer)
    assert selector.held == 3
    cluster.hold = False
    selector.release()
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    assert cluster.values(TP0) == [b"0", b"a", b"b", b"c"]
    assert [f.get(0).offset for f in futures] == [1, 2, 3]
    assert (metadata_requests(cluster) > before) is refreshes
    assert producer._transaction_manager.producer_epoch == 0  # no gap: no bump
    producer.close()


def test_not_leader_moves_every_in_flight_batch_to_the_new_leader() -> None:
    cluster, producer, selector, clock = two_leaders()
    cluster.leaders["t"][0] = 1  # the controller elected node 1; the producer still thinks 0
    cluster.hold = True
    futures = []
    for value in (b"a", b"b", b"c"):
        futures.append(producer.send(ProducerRecord("t", value, partition=0)))
        step(producer)
    cluster.hold = False
    selector.release()
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    nodes = [node for node, _, body in cluster.produce_requests()
             if body.topic_data[0].partition_data[0].index == 0]
    assert nodes[:4] == [0, 0, 0, 0] and set(nodes[4:]) == {1}
    assert cluster.values(TP0) == [b"0", b"a", b"b", b"c"]
    assert [f.get(0).offset for f in futures] == [1, 2, 3]
    producer.close()


def truncate(cluster: FakeCluster, tp: TopicPartition, batches: int) -> None:
    """The new leader never got the last ``batches`` batches of ``tp`` (they were on the
    old leader only): drop them with their producer state, as its log would be."""
    for _ in range(batches):
        gone = cluster.batches[tp].pop()
        cluster.next_offset[tp] = gone.base_offset
        for (state_tp, _pid), state in cluster.producer_states.items():
            if state_tp == tp and state.batches and state.batches[-1][2] == gone.base_offset:
                state.batches.pop()
                state.last_sequence = state.batches[-1][1] if state.batches else -1


def test_leader_killed_with_batches_in_flight_neither_duplicates_nor_loses() -> None:
    """kill -9 of the leader: the connection drops with three batches in flight.  The
    first reached the new leader before the crash (its retry is a duplicate, answered with
    the original offset); the other two died with the old leader and are written anew."""
    cluster, producer, selector, clock = two_leaders()
    cluster.hold = True
    futures = []
    for value in (b"a", b"b", b"c"):
        futures.append(producer.send(ProducerRecord("t", value, partition=0)))
        step(producer)
    assert selector.held == 3 and cluster.values(TP0) == [b"0", b"a", b"b", b"c"]
    truncate(cluster, TP0, 2)
    cluster.hold = False
    cluster.leaders["t"][0] = 1
    cluster.down.add(0)
    selector.drop_connection(0)
    run_until(producer, clock, lambda: all(f.done() for f in futures), advance_ms=50)
    assert cluster.values(TP0) == [b"0", b"a", b"b", b"c"]
    assert [f.get(0).offset for f in futures] == [1, 2, 3]
    resent = [RecordBatch(body.topic_data[0].partition_data[0].records).header.base_sequence
              for node, _, body in cluster.produce_requests() if node == 1
              and body.topic_data[0].partition_data[0].index == 0]
    assert resent == [1, 2, 3]  # oldest first, one at a time, original sequences
    assert producer._transaction_manager.producer_epoch == 0
    producer.close()


def test_a_new_leader_without_the_producer_bumps_the_epoch() -> None:
    """The new leader lost the producer's state (UNKNOWN_PRODUCER_ID with a known log
    start): the partition restarts at a new epoch from sequence 0 and nothing is lost."""
    cluster, producer, _selector, clock = two_leaders()
    cluster.leaders["t"][0] = 1
    cluster.fail_next[TP0].append(UNKNOWN_PRODUCER_ID)
    future = producer.send(ProducerRecord("t", b"a", partition=0))
    run_until(producer, clock, future.done, advance_ms=20)
    assert future.get(0).offset == 1 and cluster.values(TP0) == [b"0", b"a"]
    last = sent_headers(cluster)[-1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)
    producer.close()


def test_unknown_producer_id_without_a_log_start_offset_retries_as_is() -> None:
    """Java: a partition that moved while the answer was built has no log start offset
    (-1): retry unchanged until one is known, without bumping."""
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    batch = ProducerBatch(TP0, 0, 1000)
    batch.try_append(1, None, b"x", (), None, 0)
    batch.set_producer_state(7, 0, 0)
    tm.increment_sequence_number(TP0, 1)
    tm.add_in_flight_batch(batch)
    assert tm.can_retry(UNKNOWN_PRODUCER_ID, -1, batch)
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert tm.producer_epoch == 0
    assert tm.can_retry(UNKNOWN_PRODUCER_ID, 0, batch)
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert (tm.producer_epoch, batch.producer_epoch, batch.base_sequence) == (1, 1, 0)
