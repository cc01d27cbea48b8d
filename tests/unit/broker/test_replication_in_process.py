"""Two replica managers replicating in process: a follower's ReplicaFetcherThread stepped
with ``run_once`` against the leader's handlers (encode/decode at the wire versions the
fetcher uses, no sockets), on MockTime.

Shown here: acks=all waits for the follower and completes when its fetch moves the high
watermark; the follower's log equals the leader's byte for byte; a follower with a
divergent tail from an old epoch truncates it by OffsetForLeaderEpoch (KIP-101/279) and
not to its high watermark; a lagging follower leaves the ISR after
replica.lag.time.max.ms and rejoins once caught up; a fetch from an unregistered broker
or with an old leader epoch is refused.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from millrace.broker.config import KafkaConfig
from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS, load_all
from millrace.broker.metadata import BrokerRegistration, PartitionState
from millrace.broker.metadata.metadata_cache import MetadataCache, PartitionMetadata
from millrace.broker.metadata.zk_cluster_metadata import ZkClusterMetadata
from millrace.broker.partition import Partition
from millrace.broker.replica_fetcher import (
    BrokerEndpoint,
    PartitionFetchState,
    ReplicaFetcherThread,
)
from millrace.broker.replica_manager import LeaderAndIsrPartition, ReplicaManager
from millrace.broker.topic_config import TopicConfigs
from millrace.common.errors import Errors
from millrace.common.time import MockTime
from millrace.protocol import API, RequestHeader
from millrace.protocol.api import REQUEST_CLASS_TO_API
from millrace.record import RecordBatchBuilder
from millrace.storage import LogManager

T0 = 1_700_000_000_000
TP = ("t", 0)
load_all()


class InstantIsrManager:
    """Commits every proposed ISR at once (ZooKeeper's part is tested elsewhere)."""

    def __init__(self) -> None:
        self.rm: ReplicaManager | None = None

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        state = PartitionState(partition.leader_id, partition.leader_epoch, new_isr,
                               partition.controller_epoch, partition.partition_epoch + 1)
        if partition.on_isr_change_completed(state) and self.rm is not None:
            self.rm.partition_changed((partition.topic, partition.index))


class Node:
    def __init__(self, tmp_path: Path, node_id: int, time: MockTime, cache: MetadataCache,
                 **extra: Any) -> None:
        self.config = KafkaConfig({"log.dirs": str(tmp_path / f"b{node_id}"),
                                   "node.id": node_id, "replica.fetch.wait.max.ms": 0,
                                   **extra})
        topic_configs = TopicConfigs(self.config)
        self.metadata = ZkClusterMetadata(cast(Any, None), cache, "c")
        self.log_manager = LogManager(self.config.log_dirs,
                                      lambda _t: topic_configs.log_config({}), time=time)
        self.log_manager.startup()
        self.rm = ReplicaManager(self.config, time, self.metadata, self.log_manager,
                                 topic_configs)
        isr_manager = InstantIsrManager()
        isr_manager.rm = self.rm
        self.rm.alter_isr_manager = isr_manager
        self.services = SimpleNamespace(replica_manager=self.rm, metadata=self.metadata,
                                        config=self.config, acls=None)  # no authorizer

    def partition(self) -> Partition:
        p = self.rm.get_partition(*TP)
        assert p is not None
        return p

    def close(self) -> None:
        self.rm.shutdown()
        self.log_manager.shutdown()


class InProcessChannel:
    """What BrokerChannel does, minus the socket: encode, decode, run the handler."""

    def __init__(self, node: Node, client_id: str) -> None:
        self.node = node
        self.client_id = client_id

    async def send(self, body: Any, version: int) -> Any:
        api = REQUEST_CLASS_TO_API[type(body)]
        body = api.request.decode(api.request.encode(body, version), version)
        ctx = RequestContext(RequestHeader(api.key, version, 1, self.client_id), api,
                             "127.0.0.1", 1, cast(Any, self.node.services))
        response = await HANDLERS[api.key](ctx, body)
        return api.response.decode(api.response.encode(response, version), version)

    def close(self) -> None:
        pass


def cluster(tmp_path: Path, **extra: Any) -> tuple[MockTime, MetadataCache, Node, Node]:
    time = MockTime(T0)
    cache = MetadataCache(0)
    cache.update_metadata(1, 1, [BrokerRegistration(1, "h", 1), BrokerRegistration(2, "h", 2)],
                          [])
    return time, cache, Node(tmp_path, 1, time, cache, **extra), \
        Node(tmp_path, 2, time, cache, **extra)


def lead(leader: Node, follower: Node, epoch: int, isr: tuple[int, ...] = (1, 2),
         leader_id: int = 1) -> None:
    state = PartitionState(leader_id, epoch, isr, 1, epoch)
    live = {b: BrokerEndpoint(b, "h", b) for b in (1, 2)}
    for node in (leader, follower):
        node.rm.become_leader_or_follower(
            1, [LeaderAndIsrPartition(*TP, state, (1, 2))], live)
    leader.metadata.cache.update_metadata(1, 1, list(leader.metadata.cache.alive_brokers.values()),
                                          [PartitionMetadata(*TP, state, (1, 2))])


def fetcher(follower: Node, leader: Node, time: MockTime) -> ReplicaFetcherThread:
    f = ReplicaFetcherThread("f", BrokerEndpoint(leader.config.node_id, "h", 1),
                             follower.config.node_id, follower.rm.get_partition,
                             follower.rm.partition_changed, follower.config, time)
    f.channel = cast(Any, InProcessChannel(leader, "fetcher"))
    p = follower.partition()
    f.add_partitions({TP: PartitionFetchState(p.log.log_end_offset, p.leader_epoch)})
    return f


def batch(n: int, tag: str = "v") -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(T0, f"k{i}".encode(), f"{tag}{i}".encode())
    return bytes(b.build())


def test_acks_all_completes_when_the_follower_has_the_records(tmp_path: Path) -> None:
    async def main() -> None:
        time, _, leader, follower = cluster(tmp_path)
        try:
            lead(leader, follower, epoch=1)
            f = fetcher(follower, leader, time)
            produce = asyncio.ensure_future(leader.rm.append_records(
                30_000, -1, {TP: batch(3)}, produce_version=9))
            await asyncio.sleep(0)
            assert not produce.done() and leader.partition().log.high_watermark == 0
            await f.run_once()   # follower fetches 0..3
            assert follower.partition().log.log_end_offset == 3
            assert not produce.done()
            await f.run_once()   # fetch from 3 tells the leader: HW -> 3
            await asyncio.sleep(0)
            assert produce.done()
            assert produce.result()[TP].error == Errors.NONE
            assert produce.result()[TP].base_offset == 0
            assert leader.partition().log.high_watermark == 3
            assert follower.partition().log.high_watermark == 3
            assert leader.partition().log.read_all_bytes() == \
                follower.partition().log.read_all_bytes()
            assert follower.partition().log.latest_epoch == 1
        finally:
            leader.close()
            follower.close()

    asyncio.run(main())


def test_a_divergent_tail_is_truncated_by_leader_epoch_not_to_the_hw(tmp_path: Path) -> None:
    async def main() -> None:
        time, _, b1, b2 = cluster(tmp_path)
        try:
            # Epoch 1: broker 1 leads; both get 2 records (committed), then broker 1
            # alone gets 2 more before it fails.
            lead(b1, b2, epoch=1)
            f = fetcher(b2, b1, time)
            await b1.rm.append_records(1000, 1, {TP: batch(2, "a")}, produce_version=9)
            await f.run_once()
            await f.run_once()
            assert b2.partition().log.high_watermark == 2
            await b1.rm.append_records(1000, 1, {TP: batch(2, "lost")}, produce_version=9)
            # Epoch 2: broker 2 leads and takes 3 new records.
            lead(b2, b1, epoch=2, leader_id=2)
            await b2.rm.append_records(1000, 1, {TP: batch(3, "b")}, produce_version=9)
            assert b1.partition().log.log_end_offset == 4
            back = fetcher(b1, b2, time)
            await back.run_once()        # truncate 4 -> 2 (where epoch 1 ends at the leader)
            await back.run_once()
            assert b1.partition().log.log_end_offset == 5
            assert b1.partition().log.read_all_bytes() == b2.partition().log.read_all_bytes()
            assert b1.partition().log.leader_epoch_cache.entries() == \
                b2.partition().log.leader_epoch_cache.entries()
        finally:
            b1.close()
            b2.close()

    asyncio.run(main())


def test_a_lagging_follower_leaves_the_isr_and_rejoins(tmp_path: Path) -> None:
    async def main() -> None:
        time, _, leader, follower = cluster(tmp_path, **{"replica.lag.time.max.ms": 10_000})
        try:
            lead(leader, follower, epoch=1)
            f = fetcher(follower, leader, time)
            await f.run_once()
            await leader.rm.append_records(1000, 1, {TP: batch(4)}, produce_version=9)
            time.sleep(10_001)
            assert leader.rm.maybe_shrink_isrs() == 1
            assert leader.partition().isr == (1,)
            assert leader.partition().log.high_watermark == 4   # ISR = leader alone
            await f.run_once()   # catches up to 4
            await f.run_once()   # reports 4 = HW: joins
            assert leader.partition().isr == (1, 2)
        finally:
            leader.close()
            follower.close()

    asyncio.run(main())


def test_fetches_from_strangers_or_old_epochs_are_refused(tmp_path: Path) -> None:
    async def main() -> None:
        time, cache, leader, follower = cluster(tmp_path)
        try:
            lead(leader, follower, epoch=3)
            await leader.rm.append_records(1000, 1, {TP: batch(1)}, produce_version=9)
            f = fetcher(follower, leader, time)
            f.partitions[TP].leader_epoch = 2            # an old view of the partition
            await f.run_once()
            assert f.partitions[TP].delayed_until_ms > T0  # FENCED_LEADER_EPOCH: paused
            assert follower.partition().log.log_end_offset == 0
            # A broker that is not registered cannot replicate (CVE-2018-1288).
            cache.update_metadata(1, 1, [BrokerRegistration(1, "h", 1)], [])
            f2 = fetcher(follower, leader, time)
            await f2.run_once()
            assert follower.partition().log.log_end_offset == 0
            assert f2.partitions[TP].delayed_until_ms > T0
        finally:
            leader.close()
            follower.close()

    asyncio.run(main())


def test_the_wire_versions_the_fetcher_uses_are_served() -> None:
    from millrace.broker import replica_fetcher as rf
    from millrace.broker.api_version_manager import ApiVersionManager
    enabled = ApiVersionManager(HANDLERS).enabled
    for key, version in ((1, rf.FETCH_VERSION), (23, rf.OFFSET_FOR_LEADER_EPOCH_VERSION),
                         (2, rf.LIST_OFFSETS_VERSION)):
        lo, hi = enabled[key]
        assert lo <= version <= hi, (API[key].name, version, (lo, hi))


class RecordingFetcherManager:
    """Stands in for ReplicaFetcherManager: remembers what it was asked to fetch."""

    def __init__(self) -> None:
        self.added: list[dict[Any, Any]] = []
        self.removed: list[list[Any]] = []

    def add_fetcher_for_partitions(self, fetch: dict[Any, Any]) -> None:
        self.added.append(dict(fetch))

    def remove_fetcher_for_partitions(self, tps: list[Any]) -> None:
        self.removed.append(list(tps))


def test_a_follower_takes_a_state_only_once_its_leader_is_a_live_broker(
        tmp_path: Path) -> None:
    """Found by the fault harness: a restarted broker was told to follow a leader the
    controller did not list as live yet.  It recorded the epoch without a leader to fetch
    from, so the controller's next request with that epoch looked stale and the replica
    never fetched again (it never rejoined the ISR).  As in Kafka, the state is now left
    untouched until the leader is known; the same request then applies."""
    _, _, _, follower = cluster(tmp_path)
    fetchers = RecordingFetcherManager()
    follower.rm.fetcher_manager = cast(Any, fetchers)
    state = PartitionState(1, 3, (1,), 2, 3)
    request = [LeaderAndIsrPartition(*TP, state, (1, 2))]

    assert follower.rm.become_leader_or_follower(2, request, {}) == {TP: Errors.NONE}
    p = follower.partition()  # its log exists (KAFKA-1647), its state is untouched
    assert (p.leader_id, p.leader_epoch) != (1, 3)
    assert fetchers.added == []

    endpoint = BrokerEndpoint(1, "h", 1)
    assert follower.rm.become_leader_or_follower(2, request, {1: endpoint}) == \
        {TP: Errors.NONE}
    assert (p.leader_id, p.leader_epoch) == (1, 3)
    assert [{tp: (e.node_id, s.leader_epoch) for tp, (e, s) in f.items()}
            for f in fetchers.added] == [{TP: (1, 3)}]
