"""TxnOffsetCommit against a real ``millrace broker`` process (raw protocol).

A producer id from InitProducerId commits a group's offsets in a transaction: the answer
is NONE, the offsets are pending (OffsetFetch shows the last committed ones;
``require_stable`` answers UNSTABLE_OFFSET_COMMIT), the ``__consumer_offsets`` partition
holds them as a transactional batch of that producer, and after a kill -9 and restart
the reloaded coordinator still holds them pending (no marker in the log yet).  The
marker itself comes from the transaction coordinator's WriteTxnMarkers, which is not in
this branch: completion on markers is covered in process by
``tests/unit/broker/group/test_group_txn_broker.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from millrace.broker.group.group_metadata_manager import partition_for
from millrace.protocol import (
    FetchRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from millrace.record.batch import iter_batches
from millrace.testing.broker_process import BrokerProcess
from tests.integration.test_idempotent_dedup import RawClient

pytestmark = pytest.mark.integration

GROUP = "txn-group"
NONE, UNKNOWN_TOPIC_OR_PARTITION, UNSTABLE_OFFSET_COMMIT = 0, 3, 88


def txn_commit(c: RawClient, pid: int, epoch: int, offsets: dict[tuple[str, int], int]
               ) -> dict[tuple[str, int], int]:
    t_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(t_cls.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=""))
    body = TxnOffsetCommitRequest(
        transactional_id="copier", group_id=GROUP, producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[t_cls(name=t, partitions=ps) for t, ps in topics.items()])
    got = c.call(body, 3)
    return {(t.name, p.partition_index): p.error_code for t in got.topics for p in t.partitions}


def plain_commit(c: RawClient, topic: str, partition: int, offset: int) -> None:
    t_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    got = c.call(OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=[t_cls(name=topic, partitions=[
            t_cls.OffsetCommitRequestPartition(partition_index=partition,
                                               committed_offset=offset,
                                               committed_leader_epoch=-1,
                                               committed_metadata="")])]), 8)
    assert got.topics[0].partitions[0].error_code == NONE


def offset_fetch(c: RawClient, require_stable: bool) -> dict[tuple[str, int], tuple[int, int]]:
    got = c.call(OffsetFetchRequest(group_id=GROUP, require_stable=require_stable, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="src", partition_indexes=[0, 1])]), 7)
    assert got.error_code == NONE
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in got.topics for p in t.partitions}


def offsets_topic_batches(c: RawClient, partition: int) -> list[tuple[int, bool, bool]]:
    """(producer id, transactional, control) of every batch of __consumer_offsets-<p>."""
    body = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, topics=[
        FetchRequest.FetchTopic(topic="__consumer_offsets", partitions=[
            FetchRequest.FetchTopic.FetchPartition(
                partition=partition, fetch_offset=0, partition_max_bytes=1 << 24)])],
        forgotten_topics_data=[])
    (part,) = c.call(body, 12).responses[0].partitions
    assert part.error_code == NONE
    data = bytes(part.records or b"")
    return [(h.producer_id, h.is_transactional, h.is_control) for _, h in iter_batches(data)]


def test_txn_offsets_are_pending_and_survive_a_crash(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path).start()
    try:
        with RawClient(broker.port) as c:
            c.create_topic("src", {})
            pid, epoch = c.init_producer_id()
            plain_commit(c, "src", 0, 3)
            assert txn_commit(c, pid, epoch, {("src", 0): 10, ("nope", 0): 1}) == {
                ("src", 0): NONE, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
            assert offset_fetch(c, False) == {("src", 0): (3, NONE), ("src", 1): (-1, NONE)}
            assert offset_fetch(c, True) == {("src", 0): (-1, UNSTABLE_OFFSET_COMMIT),
                                             ("src", 1): (-1, NONE)}
            partition = partition_for(GROUP, 4)     # BrokerProcess: 4 partitions
            assert offsets_topic_batches(c, partition) == [(-1, False, False),
                                                           (pid, True, False)]
        broker.kill()
        broker.start()
        with RawClient(broker.port) as c:
            assert offset_fetch(c, False) == {("src", 0): (3, NONE), ("src", 1): (-1, NONE)}
            assert offset_fetch(c, True) == {("src", 0): (-1, UNSTABLE_OFFSET_COMMIT),
                                             ("src", 1): (-1, NONE)}
    finally:
        broker.stop()
