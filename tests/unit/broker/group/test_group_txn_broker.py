"""TxnOffsetCommit through the broker's own wiring (in process, no sockets): the handler,
the group coordinator service, ``ReplicatedOffsetsLog`` over a real ``__consumer_offsets``
log, a marker appended as the partition leader appends one, the replica manager's marker
listeners, and a coordinator rebuilt from that log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from millrace.broker.group.offsets_log import ReplicatedOffsetsLog
from millrace.broker.group.service import GroupCoordinatorService
from millrace.protocol import ApiKey, InitProducerIdRequest
from millrace.record import RecordBatch, iter_batches
from millrace.record.control import build_end_txn_marker
from millrace.storage import AppendOrigin, LogCleaner
from tests.unit.broker.brokergen import Broker
from tests.unit.broker.group.groupgen import fetch_req, txn_commit_req

OFFSETS = "__consumer_offsets"
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH, UNSTABLE = 0, 3, 47, 88


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


async def fetch(broker: Broker, require_stable: bool) -> dict[tuple[str, int], tuple[int, int]]:
    req = fetch_req("g", {"t": [0, 1]})
    req.require_stable = require_stable
    got = await broker.call(ApiKey.OFFSET_FETCH, 7, req)
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in got.topics for p in t.partitions}


def write_marker(broker: Broker, producer_id: int, epoch: int, committed: bool) -> None:
    """What the WriteTxnMarkers handler does on the partition leader: append the control
    batch as coordinator, then (replicated: one node) tell the marker listeners."""
    rm = broker.services.replica_manager
    now = broker.time.milliseconds()
    result = rm.append_to_local_log(
        {(OFFSETS, 0): build_end_txn_marker(producer_id, epoch, committed, 0, now)},
        origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True, now_ms=now)
    assert result[(OFFSETS, 0)][0].error == NONE
    for listener in rm.txn_marker_listeners:
        listener(OFFSETS, 0, producer_id, committed)


async def idempotent_producer(broker: Broker) -> tuple[int, int]:
    """A producer id and epoch from InitProducerId without a transactional id."""
    init = await broker.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1))
    assert init.error_code == NONE and init.producer_id >= 0
    return init.producer_id, init.producer_epoch


def test_txn_offset_commit_end_to_end_in_process(tmp_path: Path) -> None:
    broker = Broker(str(tmp_path / "logs"))

    async def main() -> None:
        broker.create_topic("t", 2)
        service = broker.services.group_coordinator
        await service.start()
        try:
            pid, epoch = await idempotent_producer(broker)

            got = await broker.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_req(
                "g", {("t", 0): 10, ("t", 1): 11, ("nope", 0): 1}, pid, epoch))
            assert errors(got) == {("t", 0): NONE, ("t", 1): NONE,
                                   ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
            log = broker.partition(OFFSETS).log
            data = log.read(0, 1 << 20).read()
            headers = [h for _, h in iter_batches(data)]
            assert [(h.producer_id, h.producer_epoch, h.is_transactional, h.records_count)
                    for h in headers] == [(pid, epoch, True, 2)]
            assert [p.current_txn_start_offset for p in log.active_producers()] == [0]
            assert await fetch(broker, False) == {("t", 0): (-1, NONE), ("t", 1): (-1, NONE)}
            assert await fetch(broker, True) == {("t", 0): (-1, UNSTABLE),
                                                 ("t", 1): (-1, UNSTABLE)}

            write_marker(broker, pid, epoch, committed=True)
            assert await fetch(broker, True) == {("t", 0): (10, NONE), ("t", 1): (11, NONE)}

            # The producer's next transaction, with a bumped epoch, stays open ...
            got = await broker.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_req(
                "g", {("t", 0): 20}, pid, epoch + 1))
            assert errors(got) == {("t", 0): NONE}
            # ... and a zombie with the old epoch is fenced by the log.
            got = await broker.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_req(
                "g", {("t", 1): 99}, pid, epoch))
            assert errors(got) == {("t", 1): INVALID_PRODUCER_EPOCH}
        finally:
            await service.stop()

        # A new coordinator over the same log: the first transaction committed, the
        # second still pending until its marker.
        again = GroupCoordinatorService(broker.config, broker.time, ReplicatedOffsetsLog(
            broker.services.replica_manager, broker.services.metadata, 1))
        await again.start()
        try:
            coord = again.coordinator
            group = coord.group("g")
            assert group is not None
            assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 10,
                                                                          ("t", 1): 11}
            assert {tp: v.offset for tp, (_, v) in group.pending_txn_offsets[pid].items()} == {
                ("t", 0): 20}
            again.on_txn_marker(OFFSETS, 0, pid, committed=False)
            assert group.pending_txn_offsets == {}
            assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 10,
                                                                          ("t", 1): 11}
        finally:
            await again.stop()
        everything = broker.partition(OFFSETS).log.read(0, 1 << 20).read()
        batches = [RecordBatch(everything, pos) for pos, _ in iter_batches(everything)]
        assert [(b.is_control, b.is_transactional) for b in batches] == [
            (False, True), (True, True), (False, True)]

    try:
        asyncio.run(main())
    finally:
        broker.close()


def test_an_aborted_txn_offset_commit_does_not_erase_the_committed_offset_when_compacted(
        tmp_path: Path) -> None:
    """The cleaner must not let an aborted TxnOffsetCommit shadow the committed offset of
    the same (group, partition): the group coordinator replaying the compacted
    ``__consumer_offsets`` still loads the committed one."""
    broker = Broker(str(tmp_path / "logs"))

    async def main() -> None:
        broker.create_topic("t", 1)
        service = broker.services.group_coordinator
        await service.start()
        try:
            pid, epoch = await idempotent_producer(broker)
            for offset, committed in ((10, True), (20, False)):
                got = await broker.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_req(
                    "g", {("t", 0): offset}, pid, epoch))
                assert errors(got) == {("t", 0): NONE}
                write_marker(broker, pid, epoch, committed=committed)
        finally:
            await service.stop()

        log = broker.partition(OFFSETS).log
        assert log.config.compact
        log.roll()
        assert LogCleaner(broker.services.log_manager).clean_log(log) is not None
        data = log.read(0, 1 << 20).read()
        assert [(h.is_control, h.last_offset) for _, h in iter_batches(data)] == [
            (False, 0), (True, 1), (True, 3)]  # the aborted commit's batch is gone

        again = GroupCoordinatorService(broker.config, broker.time, ReplicatedOffsetsLog(
            broker.services.replica_manager, broker.services.metadata, 1))
        await again.start()
        try:
            group = again.coordinator.group("g")
            assert group is not None
            assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 10}
            assert group.pending_txn_offsets == {}
        finally:
            await again.stop()

    try:
        asyncio.run(main())
    finally:
        broker.close()
