"""``Partition`` and the high watermark on one node, ``DelayedProduce`` waiting for it, and
the group coordinator's ``__consumer_offsets`` appends going through the same partition."""

from __future__ import annotations

import asyncio

import pytest

from millrace.broker.delayed_produce import (
    DelayedProduce,
    PartitionResponse,
    ProducePartitionStatus,
)
from millrace.broker.group.offsets_log import ReplicatedOffsetsLog
from millrace.broker.metadata import PartitionState
from millrace.broker.partition import Partition
from millrace.common.errors import (
    Errors,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
)
from millrace.protocol import ApiKey
from tests.unit.broker.brokergen import (
    NODE,
    T0,
    Broker,
    batch,
    fetch_req,
    fetched,
    records,
    settle,
    start_fetch,
)
from tests.unit.broker.group.groupgen import commit_req

OFFSETS = "__consumer_offsets"


def test_the_high_watermark_follows_the_log_end_after_each_leader_append(
        broker: Broker) -> None:
    broker.create_topic("t")
    p = broker.partition("t")
    assert (p.is_leader, p.leader_id, p.leader_epoch, p.isr) == (True, NODE, 0, (NODE,))
    seen = []
    for values in ((b"a",), (b"b", b"c"), (b"d",)):
        info = p.append_records_to_leader(bytearray(batch(*values)), T0)
        seen.append((info.first_offset, p.log.log_end_offset, p.log.high_watermark))
    assert seen == [(0, 1, 1), (1, 3, 3), (3, 4, 4)]
    assert p.maybe_increment_leader_hw() is False            # already there
    assert p.log.maybe_increment_high_watermark(2) is False   # never backwards
    assert p.log.high_watermark == 4


def test_a_new_leader_commits_its_whole_log_at_once(broker: Broker) -> None:
    broker.create_topic("t")
    old = broker.partition("t")
    old.append_records_to_leader(bytearray(batch(b"a")), T0)
    old.log.append_as_leader(bytearray(batch(b"b", b"c")), old.leader_epoch, T0)
    assert (old.log.log_end_offset, old.log.high_watermark) == (3, 1)
    new = Partition("t", 0, old.log, NODE)
    new.make_leader(PartitionState(leader=NODE, leader_epoch=4, isr=(NODE,)), [NODE])
    assert (new.leader_epoch, new.assigned_replicas, new.log.high_watermark) == (4, (NODE,), 3)


def test_a_follower_refuses_appends_and_never_moves_the_high_watermark(
        broker: Broker) -> None:
    broker.create_topic("t")
    lg = broker.partition("t").log
    follower = Partition("t", 0, lg, NODE)
    follower.make_leader(PartitionState(leader=2, leader_epoch=1, isr=(2, NODE)), [2, NODE])
    assert follower.is_leader is False
    with pytest.raises(NotLeaderOrFollowerError):
        follower.append_records_to_leader(bytearray(batch(b"a")), T0)
    lg.append_as_leader(bytearray(batch(b"a")), 0, T0)
    assert follower.maybe_increment_leader_hw() is False
    assert (lg.log_end_offset, lg.high_watermark) == (1, 0)
    assert follower.check_enough_replicas_reach_offset(1) == (
        True, Errors.NOT_LEADER_OR_FOLLOWER)


def test_acks_all_checks_the_isr_against_min_insync_replicas(broker: Broker) -> None:
    broker.create_topic("t")
    p = broker.partition("t")
    p.append_records_to_leader(bytearray(batch(b"a")), T0, required_acks=-1)
    assert p.check_enough_replicas_reach_offset(1) == (True, Errors.NONE)
    broker.services.admin_manager.alter_topic_configs("t", {"min.insync.replicas": "2"},
                                                      validate_only=False)
    with pytest.raises(NotEnoughReplicasError):
        p.append_records_to_leader(bytearray(batch(b"b")), T0, required_acks=-1)
    assert p.log.log_end_offset == 1
    assert p.check_enough_replicas_reach_offset(1) == (
        True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    p.append_records_to_leader(bytearray(batch(b"b")), T0, required_acks=1)
    assert p.log.high_watermark == 2


def test_a_delayed_produce_waits_for_the_high_watermark_or_times_out(
        broker: Broker) -> None:
    """What a follower's fetch will do: the leader appended, the HW moves later."""
    async def main() -> None:
        broker.create_topic("t", 2)
        rm = broker.services.replica_manager
        for i in (0, 1):
            p = broker.partition("t", i)
            p.log.append_as_leader(bytearray(batch(b"a")), p.leader_epoch, T0)
        statuses = {("t", i): ProducePartitionStatus(1, PartitionResponse(base_offset=0))
                    for i in (0, 1)}
        op = DelayedProduce(1000, statuses, rm.get_partition)
        assert rm.produce_purgatory.try_complete_else_watch(op, list(statuses)) is False
        waiter = asyncio.create_task(op.wait())
        assert broker.partition("t", 0).maybe_increment_leader_hw() is True
        assert rm.produce_purgatory.check_and_complete(("t", 0)) == 0   # t-1 still waits
        await settle()
        assert not waiter.done()
        assert [s.acks_pending for s in statuses.values()] == [False, True]
        broker.time.sleep(1000)
        assert rm.produce_purgatory.advance_clock() == 1
        await waiter
        assert [(s.response.error, s.response.base_offset) for s in statuses.values()] == [
            (Errors.NONE, 0), (Errors.REQUEST_TIMED_OUT, 0)]
        assert (rm.produce_purgatory.delayed, rm.produce_purgatory.watched) == (0, 0)

    asyncio.run(main())


def test_offsets_log_appends_through_the_partition_and_wake_fetchers(
        broker: Broker) -> None:
    async def main() -> None:
        services = broker.services
        offsets_log = ReplicatedOffsetsLog(services.replica_manager, services.metadata, 1)
        assert offsets_log.num_partitions() == 1
        task = start_fetch(broker, fetch_req([(OFFSETS, 0, 0, 1 << 20)], max_wait_ms=500))
        await settle()
        assert not task.done()
        offsets_log.append(0, [(b"k1", b"v1"), (b"k2", None)])
        assert broker.partition(OFFSETS).log.high_watermark == 2
        await settle()
        assert task.done()
        part = fetched(task.result())[(OFFSETS, 0)]
        assert (part.high_watermark, records(part.records)) == (2, [(0, b"v1"), (1, None)])
        assert list(offsets_log.replay(0)) == [(b"k1", b"v1"), (b"k2", None)]
        with pytest.raises(KafkaError):
            offsets_log.append(3, [(b"k", b"v")])
        assert list(offsets_log.replay(3)) == []

    asyncio.run(main())


def test_a_committed_offset_is_appended_to_consumer_offsets(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        coordinator = broker.services.group_coordinator
        await coordinator.start()
        try:
            task = start_fetch(broker, fetch_req([(OFFSETS, 0, 0, 1 << 20)],
                                                 max_wait_ms=500))
            await settle()
            assert not task.done()
            got = await broker.call(ApiKey.OFFSET_COMMIT, 2, commit_req("solo", {("t", 0): 5}))
            assert got.topics[0].partitions[0].error_code == 0
            await settle()
            assert task.done()
            part = fetched(task.result())[(OFFSETS, 0)]
            assert part.high_watermark == 1 and len(records(part.records)) == 1
        finally:
            await coordinator.stop()

    asyncio.run(main())
