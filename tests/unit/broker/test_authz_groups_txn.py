"""Authorization of the group and transaction APIs (reference security.md 5), through the
handlers of one in-process node with the ACL authorizer on, as Kafka 3.9's ``KafkaApis``
decides: each API refused without its ACL and served with it, refused before existence is
looked at (an unknown group, topic or transactional id answers the authorization error),
prefixed ACLs, deny winning, the super user bypassing, the listings (ListGroups, an
all-partitions OffsetFetch, ListTransactions) silently filtered, and the partial refusals
of offset commits and AddPartitionsToTxn.

``alice`` holds only the ACLs a test gives her; ``admin`` is the super user and sets the
scene (producer ids, committed offsets, open transactions).  Topics ``orders`` (2
partitions) and ``audit`` exist; ``nope`` never does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListGroupsRequest,
    ListTransactionsRequest,
    OffsetFetchRequest,
    WriteTxnMarkersRequest,
)
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.security.kafka_principal import KafkaPrincipal
from tests.unit.broker.brokergen import AUTHORIZER, Broker
from tests.unit.broker.group.groupgen import (
    commit_req,
    fetch_req,
    hb_req,
    join_req,
    leave_req,
    sync_req,
    txn_commit_req,
)

ALICE = KafkaPrincipal.user("alice")
ADMIN = KafkaPrincipal.user("admin")
Op, RT = AclOperation, ResourceType
PREFIXED = PatternType.PREFIXED
NONE = Errors.NONE
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = Errors.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
NOT_ATTEMPTED = Errors.OPERATION_NOT_ATTEMPTED
UNKNOWN = Errors.UNKNOWN_TOPIC_OR_PARTITION
OMITTED = -(1 << 31)
TXN = "txn"      # groupgen.txn_commit_req's transactional id


@pytest.fixture
def authz(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(str(tmp_path / "logs"), **AUTHORIZER, **{"super.users": "User:admin"})
    b.create_topic("orders", 2)
    b.create_topic("audit")
    try:
        yield b
    finally:
        b.close()


def run(broker: Broker, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` with the node's group and transaction coordinators loaded."""
    async def main() -> None:
        services = broker.services
        await services.group_coordinator.start()
        await services.transaction_coordinator.start()
        try:
            await scenario()
        finally:
            await services.transaction_coordinator.stop()
            await services.group_coordinator.stop()
    asyncio.run(main())


async def grant(broker: Broker, operation: AclOperation, resource_type: ResourceType,
                name: str, pattern: PatternType = PatternType.LITERAL,
                permission: AclPermissionType = AclPermissionType.ALLOW,
                principal: str = "User:alice") -> None:
    assert broker.services.acls is not None
    [result] = await broker.services.acls.create_acls([AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, "*", operation, permission))])
    assert result.error == NONE, result


async def refuse(broker: Broker, operation: AclOperation, resource_type: ResourceType,
                 name: str) -> None:
    await grant(broker, operation, resource_type, name, permission=AclPermissionType.DENY)


async def alice(broker: Broker, key: int, version: int, body: Any) -> Any:
    return await broker.call(key, version, body, principal=ALICE)


async def admin(broker: Broker, key: int, version: int, body: Any) -> Any:
    return await broker.call(key, version, body, principal=ADMIN)


def errors(response: Any) -> dict[tuple[str, int], int]:
    """Per partition error of an (Txn)OffsetCommit / v0-7 OffsetFetch answer."""
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


# ---------------------------------------------------------------------- FindCoordinator
def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(
        authz: Broker) -> None:
    async def scenario() -> None:
        got = await alice(authz, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))
        assert (got.error_code, got.error_message, got.node_id, got.host, got.port) == (
            GROUP_DENIED, "Group authorization failed.", -1, "", -1)
        got = await alice(authz, ApiKey.FIND_COORDINATOR, 3,
                          FindCoordinatorRequest(key="tx", key_type=1))
        assert (got.error_code, got.error_message, got.node_id) == (
            TXN_DENIED, "Transactional Id authorization failed.", -1)
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, "tx")   # Write implies Describe
        got = await alice(authz, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))
        assert (got.error_code, got.error_message, got.node_id) == (NONE, None, 1)
        got = await alice(authz, ApiKey.FIND_COORDINATOR, 3,
                          FindCoordinatorRequest(key="tx", key_type=1))
        assert (got.error_code, got.node_id) == (NONE, 1)
    run(authz, scenario)


def test_find_coordinator_batched_keys_are_checked_one_by_one(authz: Broker) -> None:
    async def scenario() -> None:
        await grant(authz, Op.DESCRIBE, RT.GROUP, "team-", PREFIXED)
        got = await alice(authz, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
            key_type=0, coordinator_keys=["team-a", "other", "team-b"]))
        assert [(c.key, c.error_code, c.node_id, c.error_message) for c in got.coordinators] \
            == [("team-a", NONE, 1, None), ("other", GROUP_DENIED, -1, None),
                ("team-b", NONE, 1, None)]
        await grant(authz, Op.DESCRIBE, RT.TRANSACTIONAL_ID, "tx-a")
        got = await alice(authz, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
            key_type=1, coordinator_keys=["tx-a", "tx-b"]))
        assert [(c.key, c.error_code) for c in got.coordinators] == [
            ("tx-a", NONE), ("tx-b", TXN_DENIED)]
    run(authz, scenario)


# ---------------------------------------------------------------------- membership
MEMBERSHIP = {
    "join": (ApiKey.JOIN_GROUP, 0, join_req("g")),
    "sync": (ApiKey.SYNC_GROUP, 3, sync_req("g", 1, "m")),
    "heartbeat": (ApiKey.HEARTBEAT, 3, hb_req("g", 1, "m")),
    "leave": (ApiKey.LEAVE_GROUP, 2, leave_req("g", ("m", None))),
}


@pytest.mark.parametrize("api", list(MEMBERSHIP))
def test_membership_needs_read_on_the_group(authz: Broker, api: str) -> None:
    key, version, body = MEMBERSHIP[api]

    async def scenario() -> None:
        assert (await alice(authz, key, version, body)).error_code == GROUP_DENIED
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")     # Describe does not imply Read
        assert (await alice(authz, key, version, body)).error_code == GROUP_DENIED
        assert authz.services.group_coordinator.coordinator.group("g") is None
        await grant(authz, Op.READ, RT.GROUP, "g")
        got = await alice(authz, key, version, body)
        # joined, or the coordinator's own answer to a member it does not know
        assert got.error_code == (NONE if api == "join" else Errors.UNKNOWN_MEMBER_ID)
    run(authz, scenario)


@pytest.mark.parametrize("version", [0, 6, 7, 9])
def test_join_refused_answers_kafka_error_response(authz: Broker, version: int) -> None:
    async def scenario() -> None:
        got = await alice(authz, ApiKey.JOIN_GROUP, version, join_req("g", "m1"))
        assert (got.error_code, got.generation_id, got.protocol_name, got.leader,
                got.member_id, got.members) == (
            GROUP_DENIED, -1, None if version >= 7 else "", "", "", [])
    run(authz, scenario)


def test_group_acl_patterns_deny_wins_and_super_user(authz: Broker) -> None:
    async def scenario() -> None:
        await grant(authz, Op.READ, RT.GROUP, "team-", PREFIXED)
        await refuse(authz, Op.READ, RT.GROUP, "team-secret")
        joined = await alice(authz, ApiKey.JOIN_GROUP, 0, join_req("team-a"))
        assert joined.error_code == NONE
        for group in ("team-secret", "other"):
            got = await alice(authz, ApiKey.JOIN_GROUP, 0, join_req(group))
            assert got.error_code == GROUP_DENIED, group
        # the super user needs no ACL, and is not bound by alice's deny
        got = await admin(authz, ApiKey.JOIN_GROUP, 0, join_req("team-secret"))
        assert got.error_code == NONE
    run(authz, scenario)


# ---------------------------------------------------------------------- OffsetCommit
def test_offset_commit_refused_group_answers_30_everywhere(authz: Broker) -> None:
    async def scenario() -> None:
        await grant(authz, Op.READ, RT.TOPIC, "*")
        got = await alice(authz, ApiKey.OFFSET_COMMIT, 8, commit_req(
            "g", {("orders", 0): 5, ("nope", 0): 1}))
        assert errors(got) == {("orders", 0): GROUP_DENIED, ("nope", 0): GROUP_DENIED}
        assert authz.services.group_coordinator.coordinator.group("g") is None
    run(authz, scenario)


def test_offset_commit_checks_read_per_topic_before_existence(authz: Broker) -> None:
    async def scenario() -> None:
        await grant(authz, Op.READ, RT.GROUP, "g")
        await grant(authz, Op.READ, RT.TOPIC, "orders")
        req = commit_req("g", {("orders", 0): 5, ("orders", 1): 6, ("audit", 0): 7,
                               ("nope", 0): 8})
        got = await alice(authz, ApiKey.OFFSET_COMMIT, 8, req)
        assert errors(got) == {("orders", 0): NONE, ("orders", 1): NONE,
                               ("audit", 0): TOPIC_DENIED, ("nope", 0): TOPIC_DENIED}
        assert [t.name for t in got.topics] == ["audit", "nope", "orders"]  # Kafka's order
        await grant(authz, Op.READ, RT.TOPIC, "nope")
        got = await alice(authz, ApiKey.OFFSET_COMMIT, 8, commit_req("g", {("nope", 0): 8}))
        assert errors(got) == {("nope", 0): UNKNOWN}   # only now may alice learn it
        group = authz.services.group_coordinator.coordinator.group("g")
        assert group is not None
        assert {tp: o.offset for tp, o in group.offsets.items()} == {
            ("orders", 0): 5, ("orders", 1): 6}
        # every topic refused: the coordinator is not asked, no group is created
        got = await alice(authz, ApiKey.OFFSET_COMMIT, 8, commit_req("g", {("audit", 0): 1}))
        assert errors(got) == {("audit", 0): TOPIC_DENIED}
        await grant(authz, Op.READ, RT.GROUP, "g2")
        got = await alice(authz, ApiKey.OFFSET_COMMIT, 8, commit_req("g2", {("audit", 0): 1}))
        assert errors(got) == {("audit", 0): TOPIC_DENIED}
        assert authz.services.group_coordinator.coordinator.group("g2") is None
    run(authz, scenario)


# ---------------------------------------------------------------------- OffsetFetch
async def commit_as_admin(broker: Broker, group: str) -> None:
    got = await admin(broker, ApiKey.OFFSET_COMMIT, 8, commit_req(
        group, {("orders", 0): 10, ("orders", 1): 11, ("audit", 0): 12}))
    assert set(errors(got).values()) == {NONE}


def test_offset_fetch_needs_describe_on_the_group(authz: Broker) -> None:
    async def scenario() -> None:
        await commit_as_admin(authz, "g")
        await grant(authz, Op.DESCRIBE, RT.TOPIC, "*")
        got = await alice(authz, ApiKey.OFFSET_FETCH, 5, fetch_req("g", {"orders": [0]}))
        assert (got.error_code, got.topics) == (GROUP_DENIED, [])
        got = await alice(authz, ApiKey.OFFSET_FETCH, 5, fetch_req("nope", None))
        assert (got.error_code, got.topics) == (GROUP_DENIED, [])
        # v1 has no top-level error: the asked partitions carry it
        got = await alice(authz, ApiKey.OFFSET_FETCH, 1, fetch_req("g", {"orders": [0, 1]}))
        assert errors(got) == {("orders", 0): GROUP_DENIED, ("orders", 1): GROUP_DENIED}
        assert {p.committed_offset for t in got.topics for p in t.partitions} == {-1}
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        got = await alice(authz, ApiKey.OFFSET_FETCH, 5, fetch_req("g", {"orders": [0]}))
        assert got.error_code == NONE and got.topics[0].partitions[0].committed_offset == 10
    run(authz, scenario)


def test_offset_fetch_explicit_partitions_refused_per_topic(authz: Broker) -> None:
    async def scenario() -> None:
        await commit_as_admin(authz, "g")
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        await grant(authz, Op.DESCRIBE, RT.TOPIC, "orders")
        got = await alice(authz, ApiKey.OFFSET_FETCH, 7, fetch_req(
            "g", {"orders": [0], "audit": [0], "nope": [3]}))
        assert got.error_code == NONE
        assert {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                for t in got.topics for p in t.partitions} == {
            ("orders", 0): (10, NONE), ("audit", 0): (-1, TOPIC_DENIED),
            ("nope", 3): (-1, TOPIC_DENIED)}
    run(authz, scenario)


def test_offset_fetch_all_partitions_leaves_out_what_alice_may_not_describe(
        authz: Broker) -> None:
    async def scenario() -> None:
        await commit_as_admin(authz, "g")
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        got = await alice(authz, ApiKey.OFFSET_FETCH, 5, fetch_req("g", None))
        assert (got.error_code, got.topics) == (NONE, [])
        await grant(authz, Op.READ, RT.TOPIC, "orders")       # Read implies Describe
        got = await alice(authz, ApiKey.OFFSET_FETCH, 5, fetch_req("g", None))
        assert errors(got) == {("orders", 0): NONE, ("orders", 1): NONE}
        got = await admin(authz, ApiKey.OFFSET_FETCH, 5, fetch_req("g", None))
        assert set(errors(got)) == {("orders", 0), ("orders", 1), ("audit", 0)}
    run(authz, scenario)


def test_offset_fetch_v8_checks_each_group(authz: Broker) -> None:
    g_cls = OffsetFetchRequest.OffsetFetchRequestGroup
    t_cls = g_cls.OffsetFetchRequestTopics

    async def scenario() -> None:
        for group in ("g", "h", "k"):
            await commit_as_admin(authz, group)
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        await grant(authz, Op.DESCRIBE, RT.GROUP, "k")
        await grant(authz, Op.DESCRIBE, RT.TOPIC, "orders")
        got = await alice(authz, ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(groups=[
            g_cls(group_id="g", topics=None),
            g_cls(group_id="h", topics=None),
            g_cls(group_id="k", topics=[t_cls(name="orders", partition_indexes=[1]),
                                        t_cls(name="audit", partition_indexes=[0])])]))
        answers = {g.group_id: (g.error_code, {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in g.topics for p in t.partitions}) for g in got.groups}
        assert answers == {
            "g": (NONE, {("orders", 0): (10, NONE), ("orders", 1): (11, NONE)}),
            "h": (GROUP_DENIED, {}),
            "k": (NONE, {("orders", 1): (11, NONE), ("audit", 0): (-1, TOPIC_DENIED)})}
        assert [g.group_id for g in got.groups] == ["g", "h", "k"]
    run(authz, scenario)


# ---------------------------------------------------------------------- administration
def test_describe_groups_per_group_with_authorized_operations(authz: Broker) -> None:
    async def scenario() -> None:
        await commit_as_admin(authz, "g")
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        got = await alice(authz, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
            groups=["g", "h"], include_authorized_operations=True))
        described = {g.group_id: (g.error_code, g.group_state, g.authorized_operations)
                     for g in got.groups}
        assert described == {"g": (NONE, "Empty", 1 << Op.DESCRIBE),
                             "h": (GROUP_DENIED, "", OMITTED)}
        await grant(authz, Op.DELETE, RT.GROUP, "g")
        got = await alice(authz, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
            groups=["g"], include_authorized_operations=True))
        assert got.groups[0].authorized_operations == (1 << Op.DESCRIBE) | (1 << Op.DELETE)
        got = await alice(authz, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
            groups=["g"], include_authorized_operations=False))
        assert got.groups[0].authorized_operations == OMITTED
    run(authz, scenario)


def test_list_groups_shows_only_what_alice_may_describe(authz: Broker) -> None:
    async def scenario() -> None:
        for group in ("g", "h", "team-x"):
            await commit_as_admin(authz, group)

        async def listed() -> tuple[int, list[str]]:
            got = await alice(authz, ApiKey.LIST_GROUPS, 3, ListGroupsRequest())
            return got.error_code, sorted(g.group_id for g in got.groups)

        assert await listed() == (NONE, [])             # never CLUSTER_AUTHORIZATION_FAILED
        await grant(authz, Op.DESCRIBE, RT.GROUP, "g")
        await grant(authz, Op.READ, RT.GROUP, "team-", PREFIXED)
        assert await listed() == (NONE, ["g", "team-x"])
        await grant(authz, Op.DESCRIBE, RT.CLUSTER, "kafka-cluster")
        assert await listed() == (NONE, ["g", "h", "team-x"])
    run(authz, scenario)


def test_delete_groups_needs_delete_per_group(authz: Broker) -> None:
    async def scenario() -> None:
        for group in ("g", "h"):
            await commit_as_admin(authz, group)
        await grant(authz, Op.DESCRIBE, RT.GROUP, "h")    # not Delete
        await grant(authz, Op.DELETE, RT.GROUP, "g")
        got = await alice(authz, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(
            groups_names=["g", "h", "nope"]))
        assert {r.group_id: r.error_code for r in got.results} == {
            "g": NONE, "h": GROUP_DENIED, "nope": GROUP_DENIED}
        coordinator = authz.services.group_coordinator.coordinator
        assert coordinator.group("g") is None and coordinator.group("h") is not None
        await grant(authz, Op.DELETE, RT.GROUP, "nope")
        got = await alice(authz, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(
            groups_names=["nope"]))
        assert got.results[0].error_code == Errors.GROUP_ID_NOT_FOUND
    run(authz, scenario)


# ---------------------------------------------------------------------- transactions
async def producer(broker: Broker, transactional_id: str) -> tuple[int, int]:
    got = await admin(broker, ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1))
    assert got.error_code == NONE
    return got.producer_id, got.producer_epoch


def add_req(transactional_id: str, pid: int, epoch: int,
            partitions: dict[str, list[int]]) -> Any:
    cls = AddPartitionsToTxnRequest
    return cls(v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
               v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                   cls.AddPartitionsToTxnTopic(name=t, partitions=ps)
                   for t, ps in partitions.items()])


def added(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def test_add_partitions_to_txn_needs_write_on_the_id_then_each_topic(authz: Broker) -> None:
    async def scenario() -> None:
        pid, epoch = await producer(authz, "tx")
        await grant(authz, Op.WRITE, RT.TOPIC, "*")
        req = add_req("tx", pid, epoch, {"orders": [0], "nope": [0]})
        got = await alice(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 3, req)
        assert added(got) == {("orders", 0): TXN_DENIED, ("nope", 0): TXN_DENIED}
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, "tx")
        await refuse(authz, Op.WRITE, RT.TOPIC, "audit")
        req = add_req("tx", pid, epoch, {"orders": [0, 1], "audit": [0]})
        got = await alice(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 3, req)
        assert added(got) == {("orders", 0): NOT_ATTEMPTED, ("orders", 1): NOT_ATTEMPTED,
                              ("audit", 0): TOPIC_DENIED}
        txn = authz.services.transaction_coordinator.coordinator
        assert not txn.describe_transaction("tx").partitions
        got = await alice(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                          add_req("tx", pid, epoch, {"orders": [0, 1]}))
        assert added(got) == {("orders", 0): NONE, ("orders", 1): NONE}
        assert sorted(txn.describe_transaction("tx").partitions) == [("orders", 0),
                                                                    ("orders", 1)]
    run(authz, scenario)


def test_add_partitions_to_txn_never_authorizes_internal_topics(authz: Broker) -> None:
    async def scenario() -> None:
        pid, epoch = await producer(authz, "tx")
        got = await admin(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_req(
            "tx", pid, epoch, {"__consumer_offsets": [0], "orders": [0]}))
        assert added(got) == {("__consumer_offsets", 0): TOPIC_DENIED,
                              ("orders", 0): NOT_ATTEMPTED}
    run(authz, scenario)


def test_add_partitions_to_txn_v4_is_for_brokers_only(authz: Broker) -> None:
    cls = AddPartitionsToTxnRequest
    txn_cls = cls.AddPartitionsToTxnTransaction

    async def scenario() -> None:
        pid, epoch = await producer(authz, "tx")
        req = cls(transactions=[txn_cls(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[txn_cls.AddPartitionsToTxnTopic(name="orders", partitions=[0])])])
        got = await alice(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 4, req)
        assert (got.error_code, got.results_by_transaction) == (CLUSTER_DENIED, [])
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, "tx")   # a client's ACLs: no
        got = await alice(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 4, req)
        assert got.error_code == CLUSTER_DENIED
        await grant(authz, Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
        got = await alice(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 4, req)
        assert got.error_code == NONE and [r.transactional_id
                                           for r in got.results_by_transaction] == ["tx"]
    run(authz, scenario)


def test_add_offsets_to_txn_needs_write_on_the_id_and_read_on_the_group(
        authz: Broker) -> None:
    async def scenario() -> None:
        pid, epoch = await producer(authz, "tx")
        req = AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid,
                                     producer_epoch=epoch, group_id="g")
        assert (await alice(authz, ApiKey.ADD_OFFSETS_TO_TXN, 3, req)).error_code == TXN_DENIED
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, "tx")
        assert (await alice(authz, ApiKey.ADD_OFFSETS_TO_TXN, 3, req)).error_code == GROUP_DENIED
        txn = authz.services.transaction_coordinator.coordinator
        assert not txn.describe_transaction("tx").partitions
        await grant(authz, Op.READ, RT.GROUP, "g")
        assert (await alice(authz, ApiKey.ADD_OFFSETS_TO_TXN, 3, req)).error_code == NONE
        assert [t for t, _ in txn.describe_transaction("tx").partitions] == [
            "__consumer_offsets"]
    run(authz, scenario)


def test_end_txn_needs_write_on_the_transactional_id(authz: Broker) -> None:
    async def scenario() -> None:
        pid, epoch = await producer(authz, "tx")
        got = await admin(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                          add_req("tx", pid, epoch, {"orders": [0]}))
        assert added(got) == {("orders", 0): NONE}
        req = EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                            committed=True)
        got = await alice(authz, ApiKey.END_TXN, 3, req)
        assert got.error_code == TXN_DENIED
        txn = authz.services.transaction_coordinator.coordinator
        assert txn.describe_transaction("tx").state == "Ongoing"
        got = await alice(authz, ApiKey.END_TXN, 3, EndTxnRequest(
            transactional_id="nope", producer_id=pid, producer_epoch=epoch, committed=True))
        assert got.error_code == TXN_DENIED                  # unknown id: no probing
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, "tx")
        assert (await alice(authz, ApiKey.END_TXN, 3, req)).error_code == NONE
        assert txn.describe_transaction("tx").state != "Ongoing"
    run(authz, scenario)


def test_txn_offset_commit_checks_id_group_then_each_topic(authz: Broker) -> None:
    async def scenario() -> None:
        pid, epoch = await producer(authz, TXN)
        req = txn_commit_req("g", {("orders", 0): 5, ("audit", 0): 6, ("nope", 0): 7},
                             pid, epoch)
        got = await alice(authz, ApiKey.TXN_OFFSET_COMMIT, 3, req)
        assert set(errors(got).values()) == {TXN_DENIED} and len(errors(got)) == 3
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, TXN)
        got = await alice(authz, ApiKey.TXN_OFFSET_COMMIT, 3, req)
        assert set(errors(got).values()) == {GROUP_DENIED} and len(errors(got)) == 3
        coordinator = authz.services.group_coordinator.coordinator
        assert coordinator.group("g") is None
        await grant(authz, Op.READ, RT.GROUP, "g")
        await grant(authz, Op.READ, RT.TOPIC, "orders")
        got = await alice(authz, ApiKey.TXN_OFFSET_COMMIT, 3, req)
        assert errors(got) == {("orders", 0): NONE, ("audit", 0): TOPIC_DENIED,
                               ("nope", 0): TOPIC_DENIED}
        group = coordinator.group("g")
        assert group is not None and set(group.pending_txn_offsets[pid]) == {("orders", 0)}
    run(authz, scenario)


def markers_req(pid: int, partitions: dict[str, list[int]]) -> Any:
    cls = WriteTxnMarkersRequest
    m_cls = cls.WritableTxnMarker
    return cls(markers=[m_cls(
        producer_id=pid, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[m_cls.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                for t, ps in partitions.items()])])


@pytest.mark.parametrize("operation", [Op.CLUSTER_ACTION, Op.ALTER],
                         ids=["cluster_action", "alter"])
def test_write_txn_markers_needs_cluster_action_or_alter(authz: Broker,
                                                         operation: AclOperation) -> None:
    async def scenario() -> None:
        log = authz.partition("orders").log
        await grant(authz, Op.ALL, RT.TOPIC, "*")            # topic ACLs do not count
        got = await alice(authz, ApiKey.WRITE_TXN_MARKERS, 1,
                          markers_req(77, {"orders": [0, 1], "nope": [0]}))
        assert [(m.producer_id, errors(m)) for m in got.markers] == [(77, {
            ("orders", 0): CLUSTER_DENIED, ("orders", 1): CLUSTER_DENIED,
            ("nope", 0): CLUSTER_DENIED})]
        assert log.log_end_offset == 0
        await grant(authz, operation, RT.CLUSTER, "kafka-cluster")
        got = await alice(authz, ApiKey.WRITE_TXN_MARKERS, 1, markers_req(77, {"orders": [0]}))
        assert errors(got.markers[0]) == {("orders", 0): NONE}
        assert log.log_end_offset == 1
    run(authz, scenario)


def test_describe_transactions_per_id_and_only_describable_topics(authz: Broker) -> None:
    async def scenario() -> None:
        pid, epoch = await producer(authz, "tx-a")
        got = await admin(authz, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                          add_req("tx-a", pid, epoch, {"orders": [0], "audit": [0]}))
        assert set(added(got).values()) == {NONE}
        req = DescribeTransactionsRequest(transactional_ids=["tx-a", "nope"])
        got = await alice(authz, ApiKey.DESCRIBE_TRANSACTIONS, 0, req)
        assert [(s.transactional_id, s.error_code, s.transaction_state, s.topics)
                for s in got.transaction_states] == [
            ("tx-a", TXN_DENIED, "", []), ("nope", TXN_DENIED, "", [])]
        await grant(authz, Op.DESCRIBE, RT.TRANSACTIONAL_ID, "*")
        await grant(authz, Op.DESCRIBE, RT.TOPIC, "orders")
        got = await alice(authz, ApiKey.DESCRIBE_TRANSACTIONS, 0, req)
        states = {s.transactional_id: s for s in got.transaction_states}
        assert (states["tx-a"].error_code, states["tx-a"].transaction_state,
                [(t.topic, t.partitions) for t in states["tx-a"].topics]) == (
            NONE, "Ongoing", [("orders", [0])])
        assert states["nope"].error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND
    run(authz, scenario)


def test_list_transactions_shows_only_describable_ids(authz: Broker) -> None:
    async def scenario() -> None:
        for tid in ("tx-a", "tx-b", "other"):
            await producer(authz, tid)

        async def listed() -> list[str]:
            got = await alice(authz, ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest())
            assert got.error_code == NONE
            return sorted(s.transactional_id for s in got.transaction_states)

        assert await listed() == []
        await grant(authz, Op.WRITE, RT.TRANSACTIONAL_ID, "tx-", PREFIXED)
        await refuse(authz, Op.DESCRIBE, RT.TRANSACTIONAL_ID, "tx-b")
        assert await listed() == ["tx-a"]
        got = await admin(authz, ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest())
        assert len(got.transaction_states) == 3
    run(authz, scenario)


# ---------------------------------------------------------------------- no authorizer
def test_without_an_authorizer_nothing_is_refused(tmp_path: Path) -> None:
    """The control: the same requests by alice on a node without authorizer.class.name."""
    broker = Broker(str(tmp_path / "logs"))
    broker.create_topic("orders", 2)

    async def scenario() -> None:
        got = await alice(broker, ApiKey.OFFSET_COMMIT, 8, commit_req("g", {("orders", 0): 5}))
        assert errors(got) == {("orders", 0): NONE}
        got = await alice(broker, ApiKey.OFFSET_FETCH, 5, fetch_req("g", None))
        assert errors(got) == {("orders", 0): NONE}
        got = await alice(broker, ApiKey.LIST_GROUPS, 3, ListGroupsRequest())
        assert [g.group_id for g in got.groups] == ["g"]
        got = await alice(broker, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
            groups=["g"], include_authorized_operations=True))
        assert got.groups[0].authorized_operations == (
            (1 << Op.READ) | (1 << Op.DELETE) | (1 << Op.DESCRIBE))
        pid, epoch = await producer(broker, "tx")
        got = await alice(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                          add_req("tx", pid, epoch, {"orders": [0]}))
        assert added(got) == {("orders", 0): NONE}
        got = await alice(broker, ApiKey.WRITE_TXN_MARKERS, 1, markers_req(pid, {"orders": [1]}))
        assert errors(got.markers[0]) == {("orders", 1): NONE}
    try:
        run(broker, scenario)
    finally:
        broker.close()
