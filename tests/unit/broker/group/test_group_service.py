"""``GroupCoordinatorService`` on a real event loop with an in-memory ``OffsetsLog``,
and the group API handlers on top of it (requests and responses through the codec)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from millrace.broker.config import KafkaConfig
from millrace.broker.context import RequestContext
from millrace.broker.group.records import LoggedBatch
from millrace.broker.group.service import GroupCoordinatorService
from millrace.broker.handlers import HANDLERS
from millrace.broker.handlers import group as group_handlers
from millrace.broker.metadata import BrokerRegistration
from millrace.broker.transaction import TransactionConfig, TransactionCoordinator
from millrace.common.errors import Errors, KafkaError
from millrace.common.time import SYSTEM_TIME, MockTime
from millrace.protocol import API, ApiKey, FindCoordinatorRequest, RequestHeader
from tests.unit.broker.group.groupgen import (
    commit_req,
    fetch_req,
    fetched,
    hb_req,
    join_req,
    sync_req,
    txn_commit_req,
)

GROUP_APIS = (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
              ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH,
              ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS)


class MemoryOffsetsLog:
    """``OffsetsLog`` over lists; ``fail`` makes appends raise like a broken disk."""

    def __init__(self, partitions: int = 4) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {
            p: [] for p in range(partitions)}
        self.batches: dict[int, list[LoggedBatch]] = {p: [] for p in range(partitions)}
        self.fail = False
        self.replication_error = 0

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> int:
        if self.fail:
            raise KafkaError("disk on fire")
        self.partitions[partition].extend(records)
        self.batches[partition].append(LoggedBatch(
            len(self.partitions[partition]), -1 if producer is None else producer[0], None,
            list(records)))
        return len(self.partitions[partition])

    def append_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        self.partitions[partition].append((b"", None))     # a marker takes an offset
        self.batches[partition].append(LoggedBatch(
            len(self.partitions[partition]), producer_id, committed, []))

    async def wait_replicated(self, partition: int, end_offset: int) -> int:
        return self.replication_error  # one replica: committed once appended

    def replay_batches(self, partition: int) -> Iterator[LoggedBatch]:
        yield from list(self.batches[partition])

    def num_partitions(self) -> int:
        return len(self.partitions)


def config(**extra: Any) -> KafkaConfig:
    return KafkaConfig({"group.initial.rebalance.delay.ms": 0,
                        "group.min.session.timeout.ms": 10,
                        "offsets.topic.num.partitions": 4, **extra})


async def started(log: MemoryOffsetsLog, **extra: Any) -> GroupCoordinatorService:
    service = GroupCoordinatorService(config(**extra), SYSTEM_TIME, log, tick_interval_ms=10)
    await service.start()
    return service


async def join_pair(service: GroupCoordinatorService) -> tuple[Any, Any]:
    ids = [(await service.join_group(join_req(), 5, f"c{i}", "/h")).member_id for i in (1, 2)]
    j1, j2 = await asyncio.gather(*(service.join_group(join_req(member_id=m), 5, "c", "/h")
                                    for m in ids))
    return j1, j2


# ---------------------------------------------------------------------- service
def test_two_consumers_join_sync_commit_and_survive_a_restart() -> None:
    async def main() -> None:
        log = MemoryOffsetsLog()
        service = await started(log, **{"group.initial.rebalance.delay.ms": 50})
        try:
            j1, j2 = await join_pair(service)       # the initial delay gathers both
            assert j1.generation_id == j2.generation_id == 1
            leader, follower = (j1, j2) if j1.members else (j2, j1)
            s_follower, s_leader = await asyncio.gather(
                service.sync_group(sync_req("g", 1, follower.member_id), 3),
                service.sync_group(sync_req("g", 1, leader.member_id, {
                    leader.member_id: b"L", follower.member_id: b"F"}), 3))
            assert (s_leader.assignment, s_follower.assignment) == (b"L", b"F")
            committed = await service.commit_offsets(
                commit_req("g", {("t", 0): 17}, 1, follower.member_id), 7)
            assert committed.topics[0].partitions[0].error_code == 0
        finally:
            await service.stop()
        assert sum(len(v) for v in log.partitions.values()) == 2   # assignment + offset

        again = await started(log)
        try:
            described = (await again.describe_groups(
                API[ApiKey.DESCRIBE_GROUPS].request.cls(groups=["g"]), 5)).groups[0]
            assert described.group_state == "Stable"
            assert {(m.member_id, m.member_assignment) for m in described.members} == {
                (leader.member_id, b"L"), (follower.member_id, b"F")}
            offsets = fetched(await again.fetch_offsets(fetch_req("g", {"t": [0]}), 5))
            assert offsets[("t", 0)][0] == 17
            assert (await again.heartbeat(hb_req("g", 1, follower.member_id), 3)
                    ).error_code == 0
        finally:
            await again.stop()

    asyncio.run(main())


def test_a_silent_member_is_removed_by_the_timer_task() -> None:
    async def main() -> None:
        log = MemoryOffsetsLog()
        service = await started(log)
        try:
            first = await service.join_group(join_req(session=100), 5, "c", "/h")
            joined = await service.join_group(join_req(member_id=first.member_id,
                                                       session=100), 5, "c", "/h")
            await service.sync_group(sync_req("g", 1, joined.member_id,
                                              {joined.member_id: b""}), 3)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 0.9             # session 0.1 s, ticks every 0.01 s
            group = service.coordinator.group("g")
            while group is not None and group.members and loop.time() < deadline:
                await asyncio.sleep(0.01)
            assert loop.time() - (deadline - 0.9) >= 0.09   # not before the session ended
            assert group is not None and group.state.value == "Empty"
            assert group.generation_id == 2          # ... and that was persisted
        finally:
            await service.stop()
        assert sum(len(v) for v in log.partitions.values()) == 2

    asyncio.run(main())


def test_a_failed_append_is_reported_and_changes_nothing() -> None:
    async def main() -> None:
        log = MemoryOffsetsLog()
        service = await started(log)
        try:
            log.fail = True
            got = await service.commit_offsets(commit_req("solo", {("t", 0): 5}), 7)
            assert got.topics[0].partitions[0].error_code == 15   # COORDINATOR_NOT_AVAILABLE
            log.fail = False
            assert fetched(await service.fetch_offsets(fetch_req("solo", {"t": [0]}), 5)) == {
                ("t", 0): (-1, -1, "")}
        finally:
            await service.stop()

    asyncio.run(main())


def test_stop_answers_parked_requests_and_cancelled_waiters_are_forgotten() -> None:
    async def main() -> None:
        service = await started(MemoryOffsetsLog())
        first = await service.join_group(join_req(), 5, "c", "/h")
        a = await service.join_group(join_req(member_id=first.member_id), 5, "c", "/h")
        b_id = (await service.join_group(join_req(), 5, "c", "/h")).member_id
        b_task = asyncio.create_task(service.join_group(join_req(member_id=b_id), 5, "c", "/h"))
        await asyncio.sleep(0.02)
        assert not b_task.done()                 # waits for a to rejoin
        b_task.cancel()                          # e.g. the connection went away
        with pytest.raises(asyncio.CancelledError):
            await b_task
        a_task = asyncio.create_task(service.join_group(join_req(member_id=a.member_id), 5,
                                                        "c", "/h"))
        again = await a_task                     # b's cancelled wait does not matter
        assert again.generation_id == 2 and again.error_code == 0
        # b's answer was lost with its request; its resend gets the same answer again.
        b_again = await service.join_group(join_req(member_id=b_id), 5, "c", "/h")
        assert (b_again.generation_id, b_again.leader) == (2, a.member_id)
        c_id = (await service.join_group(join_req(), 5, "c", "/h")).member_id
        c_task = asyncio.create_task(service.join_group(
            join_req(member_id=c_id), 5, "c", "/h"))
        await asyncio.sleep(0.02)
        await service.stop()
        assert (await c_task).error_code == 16  # NOT_COORDINATOR
        assert service._waiters == {}

    asyncio.run(main())


# ---------------------------------------------------------------------- handlers
def fake_server(service: GroupCoordinatorService) -> Any:
    """The slice of BrokerServices the group handlers use."""
    registration = BrokerRegistration(3, "broker-3", 9093)
    txn = TransactionCoordinator(TransactionConfig(), 50, lambda: 0)  # every partition here
    txn.begin_loading(dict.fromkeys(range(50), 0))
    for p in range(50):
        txn.load(p, [])
    return SimpleNamespace(
        config=config(**{"node.id": 3}), group_coordinator=service, cluster=None,
        acls=None,  # no authorizer.class.name: every request is authorized
        transaction_coordinator=SimpleNamespace(coordinator=txn,
                                                partition_for=txn.partition_for),
        metadata=SimpleNamespace(topics={"t": SimpleNamespace(partitions=2)},
                                 brokers=lambda: [registration]))


def not_loaded() -> GroupCoordinatorService:
    """A coordinator whose __consumer_offsets partitions are not (yet) loaded here."""
    return GroupCoordinatorService(config(), MockTime(), MemoryOffsetsLog())


async def call(server: Any, key: int, version: int, body: Any, client_id: str = "cli") -> Any:
    """Through the wire: encode the request at ``version``, decode it, run the handler,
    encode and decode the response at ``version``."""
    api = API[key]
    body = api.request.decode(api.request.encode(body, version), version)
    ctx = RequestContext(RequestHeader(key, version, 1, client_id), api, "127.0.0.1", 5555,
                         server)
    response = await HANDLERS[key](ctx, body)
    return api.response.decode(api.response.encode(response, version), version)


def test_handlers_are_registered() -> None:
    assert group_handlers.handle_find_coordinator is HANDLERS[ApiKey.FIND_COORDINATOR]
    for key in GROUP_APIS:
        assert key in HANDLERS


def test_find_coordinator_every_version() -> None:
    async def main() -> None:
        service = await started(MemoryOffsetsLog())
        server = fake_server(service)
        try:
            for version in range(0, 4):
                got = await call(server, ApiKey.FIND_COORDINATOR, version,
                                 FindCoordinatorRequest(key="g", key_type=0))
                assert (got.error_code, got.node_id, got.host, got.port) == (
                    0, 3, "broker-3", 9093)
            for version in (4, 5, 6):
                got = await call(server, ApiKey.FIND_COORDINATOR, version,
                                 FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]))
                assert [(c.key, c.node_id, c.port, c.error_code) for c in got.coordinators] == [
                    ("a", 3, 9093, 0), ("b", 3, 9093, 0)]
            bad = await call(server, ApiKey.FIND_COORDINATOR, 3,
                             FindCoordinatorRequest(key="g", key_type=7))
            assert bad.error_code == 42 and bad.node_id == -1
            down = await call(fake_server(not_loaded()), ApiKey.FIND_COORDINATOR, 1,
                              FindCoordinatorRequest(key="g"))
            assert down.error_code == 15
        finally:
            await service.stop()

    asyncio.run(main())


@pytest.mark.parametrize("running", [True, False], ids=["running", "not-loaded"])
def test_every_group_api_answers_every_version(running: bool) -> None:
    """Default-valued requests at every version: the answer always encodes."""
    async def main() -> None:
        service = await started(MemoryOffsetsLog()) if running else not_loaded()
        server = fake_server(service)
        try:
            for key in GROUP_APIS:
                api = API[key]
                for version in range(api.versions.low, min(api.versions.high, 9) + 1):
                    got = await call(server, key, version, api.request.cls())
                    assert got is not None
        finally:
            if running:
                await service.stop()

    asyncio.run(main())


def test_join_v0_and_commit_of_unknown_partitions_through_the_handlers() -> None:
    async def main() -> None:
        service = await started(MemoryOffsetsLog())
        server = fake_server(service)
        try:
            joined = await call(server, ApiKey.JOIN_GROUP, 0, join_req(session=5000))
            assert joined.error_code == 0 and joined.member_id.startswith("cli-")
            member = service.coordinator.group("g").members[joined.member_id]  # type: ignore[union-attr]
            assert member.rebalance_timeout_ms == 5000 and member.client_host == "/127.0.0.1"
            got = await call(server, ApiKey.OFFSET_COMMIT, 2, commit_req(
                "solo", {("t", 1): 1, ("t", 2): 1, ("nope", 0): 1}))
            assert {(t.name, p.partition_index): p.error_code for t in got.topics
                    for p in t.partitions} == {("t", 1): 0, ("t", 2): 3, ("nope", 0): 3}
        finally:
            await service.stop()

    asyncio.run(main())


class SlowReplicationLog(MemoryOffsetsLog):
    """Appends at once; ``wait_replicated`` answers only when the test says so, with the
    error it is given (what a follower fetch, or its absence, decides in a cluster)."""

    def __init__(self) -> None:
        super().__init__()
        self.outcome: asyncio.Future[int] | None = None

    async def wait_replicated(self, partition: int, end_offset: int) -> int:
        self.outcome = asyncio.get_running_loop().create_future()
        return await self.outcome


def test_a_commit_is_fetched_only_once_the_isr_has_it() -> None:
    """Found by the fault harness: a committed offset went backwards when the coordinator
    was killed, because OffsetFetch showed a commit that was still waiting for the ISR
    and the failover then lost it.  As in Kafka (pending offset commits), a commit
    becomes visible when it is durable, and one whose replication failed never does."""
    async def run() -> None:
        log = SlowReplicationLog()
        service = await started(log)
        try:
            async def committed() -> Any:
                return fetched(await service.fetch_offsets(fetch_req("solo", {"t": [0]}), 5))

            first = asyncio.create_task(service.commit_offsets(
                commit_req("solo", {("t", 0): 5}), 7))
            await asyncio.sleep(0.01)
            assert log.outcome is not None and not first.done()
            assert (await committed())[("t", 0)][0] == -1  # written, not yet durable
            log.outcome.set_result(0)
            await first
            assert (await committed())[("t", 0)][0] == 5

            second = asyncio.create_task(service.commit_offsets(
                commit_req("solo", {("t", 0): 9}), 7))
            await asyncio.sleep(0.01)
            assert (await committed())[("t", 0)][0] == 5
            log.outcome.set_result(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            got = await second
            assert got.topics[0].partitions[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE
            assert (await committed())[("t", 0)][0] == 5  # never durable, never shown
        finally:
            await service.stop()
    asyncio.run(run())


def test_txn_offsets_pending_on_append_dropped_when_the_isr_never_gets_them() -> None:
    async def main() -> None:
        log = MemoryOffsetsLog()
        service = await started(log)
        try:
            partition = service.partition_for("g")
            req = txn_commit_req("g", {("t", 0): 10}, 77)
            got = await service.txn_commit_offsets(req, 3)
            assert got.topics[0].partitions[0].error_code == 0
            assert log.batches[partition][-1].producer_id == 77
            log.replication_error = Errors.NOT_ENOUGH_REPLICAS
            got = await service.txn_commit_offsets(txn_commit_req("g", {("t", 1): 11}, 77), 3)
            assert got.topics[0].partitions[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE
            log.replication_error = 0
            group = service.coordinator.group("g")
            assert group is not None and set(group.pending_txn_offsets[77]) == {("t", 0)}
            service.on_txn_marker("other-topic", partition, 77, True)   # not ours
            assert group.offsets == {}
            log.append_marker(partition, 77, True)
            service.on_txn_marker("__consumer_offsets", partition, 77, True)
            assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 10}
            log.fail = True
            got = await service.txn_commit_offsets(txn_commit_req("g", {("t", 0): 12}, 77), 3)
            assert got.topics[0].partitions[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE
        finally:
            await service.stop()
        log.fail = False
        # The write the ISR missed is still in the leader's log, before the marker: a
        # coordinator loading the log commits it too (as Kafka's does; the client, told
        # COORDINATOR_NOT_AVAILABLE, retries the same offsets anyway).
        again = await started(log)
        try:
            group = again.coordinator.group("g")
            assert group is not None
            assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 10,
                                                                          ("t", 1): 11}
            assert group.pending_txn_offsets == {}
        finally:
            await again.stop()

    asyncio.run(main())


def test_a_commit_whose_client_left_still_reaches_the_cache_once_durable() -> None:
    """A handler is cancelled when its client disconnects (a consumer killed during its
    commit): the write it made is replayed all the same once the ISR has it."""
    async def run() -> None:
        log = SlowReplicationLog()
        service = await started(log)
        try:
            request = asyncio.create_task(service.commit_offsets(
                commit_req("solo", {("t", 0): 5}), 7))
            await asyncio.sleep(0.01)
            assert log.outcome is not None
            request.cancel()                     # connection_lost
            await asyncio.sleep(0)
            assert request.cancelled()
            log.outcome.set_result(0)            # the ISR catches up
            await asyncio.sleep(0.01)
            got = fetched(await service.fetch_offsets(fetch_req("solo", {"t": [0]}), 5))
            assert got[("t", 0)][0] == 5
        finally:
            await service.stop()
    asyncio.run(run())
