"""Authorization of the data-plane APIs through their handlers, on one in-process node
with the ACL authorizer (reference security.md 5, Kafka 3.9's ``KafkaApis``): Produce
(Write on the topic; Write on the TransactionalId when any partition's batch is
transactional), Fetch (Read for consumers; ClusterAction for a replica id, CVE-2018-1288),
ListOffsets and OffsetForLeaderEpoch (Describe; ClusterAction too for the latter),
DescribeProducers (Read), Metadata and DescribeCluster (Describe, auto-creation, the
authorized-operations bitfields) and InitProducerId (TransactionalId Write; IdempotentWrite
or Write on some topic).  Each check is asked before existence: an unknown topic answers
TOPIC_AUTHORIZATION_FAILED to a caller who may not see it, never
UNKNOWN_TOPIC_OR_PARTITION.  Every refusal has its control: the same request allowed."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.broker.metadata import BrokerRegistration, PartitionState
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    DescribeClusterRequest,
    DescribeProducersRequest,
    FetchRequest,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
)
from millrace.record import RecordBatchBuilder
from millrace.security.acl import AclOperation as Op
from millrace.security.acl import PatternType, ResourceType
from millrace.security.kafka_principal import KafkaPrincipal
from tests.unit.broker.brokergen import (
    AUTHORIZER,
    FETCH_V,
    LIST_OFFSETS_V,
    NODE,
    PRODUCE_V,
    T0,
    Broker,
    batch,
    fetch_req,
    fetched,
    list_offsets_req,
    produce_req,
    produced,
    records,
)

TOPIC, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ALICE, ADMIN = KafkaPrincipal.user("alice"), KafkaPrincipal.user("admin")
DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
UNKNOWN = Errors.UNKNOWN_TOPIC_OR_PARTITION
OMITTED = -2147483648
BIG = 1 << 20


@pytest.fixture
def b(tmp_path: Path) -> Iterator[Broker]:
    """A node with the authorizer, ``User:admin`` a super user, topic ``orders`` holding
    two records at offsets 0-1."""
    broker = Broker(str(tmp_path / "logs"), **AUTHORIZER, **{"super.users": "User:admin"})
    try:
        broker.create_topic("orders")
        got = call(broker, ApiKey.PRODUCE, PRODUCE_V,
                   produce_req({("orders", 0): batch(b"a", b"b")}), ADMIN)
        assert produced(got) == {("orders", 0): (0, 0)}
        yield broker
    finally:
        broker.close()


def call(broker: Broker, key: int, version: int, body: Any,
         principal: KafkaPrincipal = ALICE) -> Any:
    return asyncio.run(broker.call(key, version, body, principal=principal))


def log_end(broker: Broker, topic: str = "orders") -> int:
    return broker.partition(topic).log.log_end_offset


def bits(*ops: Op) -> int:
    out = 0
    for op in ops:
        out |= 1 << op
    return out


# ---------------------------------------------------------------------------- Produce
def produce_as(b: Broker, entries: dict[tuple[str, int], bytes | None], *,
               principal: KafkaPrincipal = ALICE, acks: int = 1,
               transactional_id: str | None = None, version: int = PRODUCE_V) -> Any:
    request = produce_req(entries, acks)
    request.transactional_id = transactional_id
    return call(b, ApiKey.PRODUCE, version, request, principal)


def test_produce_needs_write_on_the_topic(b: Broker) -> None:
    got = produce_as(b, {("orders", 0): batch(b"x")})
    assert produced(got) == {("orders", 0): (DENIED, -1)}
    assert log_end(b) == 2                                    # nothing appended
    b.allow("User:alice", Op.READ, TOPIC, "orders")           # Read is not Write
    assert produced(produce_as(b, {("orders", 0): batch(b"x")})) == {
        ("orders", 0): (DENIED, -1)}
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    assert produced(produce_as(b, {("orders", 0): batch(b"x")})) == {("orders", 0): (0, 2)}
    assert log_end(b) == 3


def test_produce_denied_partitions_fail_alone_and_the_others_are_appended(
        b: Broker) -> None:
    b.create_topic("audit")
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    got = produce_as(b, {("audit", 0): batch(b"x"), ("orders", 0): batch(b"y")})
    assert [(t.name, p.error_code, p.base_offset) for t in got.responses
            for p in t.partition_responses] == [("audit", DENIED, -1), ("orders", 0, 2)]
    assert (log_end(b, "audit"), log_end(b)) == (0, 3)


def test_produce_to_an_unknown_topic_unauthorized_is_29_not_3(b: Broker) -> None:
    assert produced(produce_as(b, {("ghost", 0): batch(b"x")})) == {("ghost", 0): (DENIED, -1)}
    b.allow("User:alice", Op.WRITE, TOPIC, "ghost")
    assert produced(produce_as(b, {("ghost", 0): batch(b"x")})) == {("ghost", 0): (UNKNOWN, -1)}


def test_produce_prefixed_acl_deny_wins_and_super_user(b: Broker) -> None:
    b.create_topic("other")
    b.allow("User:alice", Op.WRITE, TOPIC, "ord", PatternType.PREFIXED)
    got = produce_as(b, {("orders", 0): batch(b"x"), ("other", 0): batch(b"y")})
    assert produced(got) == {("orders", 0): (0, 2), ("other", 0): (DENIED, -1)}
    b.deny("User:alice", Op.WRITE, TOPIC, "orders")           # deny beats the prefix
    assert produced(produce_as(b, {("orders", 0): batch(b"z")})) == {
        ("orders", 0): (DENIED, -1)}
    got = produce_as(b, {("other", 0): batch(b"y")}, principal=ADMIN)  # no ACL needed
    assert produced(got) == {("other", 0): (0, 0)}


def test_produce_with_acks_0_denied_answers_nothing_and_appends_nothing(b: Broker) -> None:
    assert produce_as(b, {("orders", 0): batch(b"x")}, acks=0) is None
    assert produce_as(b, {("orders", 0): txn_batch()}, acks=0,
                      transactional_id="txn-1") is None
    assert log_end(b) == 2
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")          # control
    assert produce_as(b, {("orders", 0): batch(b"x")}, acks=0) is None
    assert log_end(b) == 3


def txn_batch(pid: int = 7) -> bytes:
    builder = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0,
                                 is_transactional=True)
    builder.append(T0, b"k", b"t")
    return builder.build()


def test_a_transactional_batch_in_the_second_partition_needs_the_transactional_id(
        b: Broker) -> None:
    """CVE-2018-17196: the flag is read from every partition, not the last or the
    first; refused, every slot answers 53 (and nothing is appended anywhere)."""
    b.create_topic("audit")
    b.allow("User:alice", Op.WRITE, TOPIC, "*")
    entries: dict[tuple[str, int], bytes | None] = {
        ("audit", 0): batch(b"plain", producer_id=7, producer_epoch=0,
                            base_sequence=0),
        ("orders", 0): txn_batch(), ("other", 0): batch(b"plain")}
    got = produce_as(b, entries, transactional_id="txn-1")
    assert [(t.name, p.error_code, p.base_offset, p.error_message) for t in got.responses
            for p in t.partition_responses] == [
        (name, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1,
         "Transactional Id authorization failed.") for name in ("audit", "orders", "other")]
    assert (log_end(b, "audit"), log_end(b)) == (0, 2)
    # control, without KIP-890 verification (it would ask a coordinator over the network)
    b.services.replica_manager.transaction_verification_enabled = False
    b.allow("User:alice", Op.WRITE, TXN, "txn-1")
    got = produce_as(b, entries, transactional_id="txn-1")
    assert produced(got) == {("audit", 0): (0, 0), ("orders", 0): (0, 2),
                             ("other", 0): (UNKNOWN, -1)}


def test_the_transactional_id_alone_does_not_make_a_request_transactional(
        b: Broker) -> None:
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    got = produce_as(b, {("orders", 0): batch(b"x")}, transactional_id="txn-1")
    assert produced(got) == {("orders", 0): (0, 2)}


def test_a_transactional_batch_without_a_transactional_id_is_refused(b: Broker) -> None:
    """Kafka asks Write on the id the request names; naming none, it cannot have it --
    not even through an ACL on every transactional id."""
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    b.allow("User:alice", Op.WRITE, TXN, "*")
    got = produce_as(b, {("orders", 0): txn_batch()}, transactional_id=None)
    assert produced(got) == {("orders", 0): (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)}
    assert log_end(b) == 2


def test_produce_by_topic_id_resolves_the_id_before_asking(b: Broker) -> None:
    known = b.services.metadata.topics["orders"].topic_id
    stranger = uuid.UUID(int=12345)
    request = produce_req({("orders", 0): batch(b"x"), ("gone", 0): batch(b"y")})
    request.topic_data[0].topic_id, request.topic_data[1].topic_id = known, stranger
    got = call(b, ApiKey.PRODUCE, 13, request)
    assert [(t.topic_id, p.error_code) for t in got.responses for p in t.partition_responses] \
        == [(known, DENIED), (stranger, Errors.UNKNOWN_TOPIC_ID)]
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    got = call(b, ApiKey.PRODUCE, 13, request)
    assert [p.error_code for t in got.responses for p in t.partition_responses] == [
        0, Errors.UNKNOWN_TOPIC_ID]


# ---------------------------------------------------------------------------- Fetch
def fetch_as(b: Broker, *topics: str, principal: KafkaPrincipal = ALICE,
             version: int = FETCH_V) -> Any:
    return call(b, ApiKey.FETCH, version, fetch_req([(t, 0, 0, BIG) for t in topics]),
                principal)


def test_consumer_fetch_needs_read_on_the_topic(b: Broker) -> None:
    part = fetched(fetch_as(b, "orders"))[("orders", 0)]
    assert (part.error_code, records(part.records), part.high_watermark) == (DENIED, [], -1)
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")          # Write is not Read
    assert fetched(fetch_as(b, "orders"))[("orders", 0)].error_code == DENIED
    b.allow("User:alice", Op.READ, TOPIC, "orders")
    part = fetched(fetch_as(b, "orders"))[("orders", 0)]
    assert (part.error_code, records(part.records)) == (0, [(0, b"a"), (1, b"b")])


def test_denied_partitions_answer_29_in_request_order_and_the_others_read(
        b: Broker) -> None:
    b.create_topic("audit")
    b.create_topic("zebra")
    b.allow("User:alice", Op.READ, TOPIC, "orders")
    got = fetch_as(b, "zebra", "orders", "audit", "ghost")
    assert [(t.topic, p.error_code, len(records(p.records))) for t in got.responses
            for p in t.partitions] == [
        ("zebra", DENIED, 0), ("orders", 0, 2), ("audit", DENIED, 0), ("ghost", DENIED, 0)]
    b.allow("User:alice", Op.READ, TOPIC, "ghost")            # control: now it may know
    assert fetched(fetch_as(b, "ghost"))[("ghost", 0)].error_code == UNKNOWN


def test_fetch_prefixed_acl_deny_wins_and_super_user(b: Broker) -> None:
    b.allow("User:alice", Op.READ, TOPIC, "or", PatternType.PREFIXED)
    assert fetched(fetch_as(b, "orders"))[("orders", 0)].error_code == 0
    b.deny("User:alice", Op.READ, TOPIC, "orders")
    assert fetched(fetch_as(b, "orders"))[("orders", 0)].error_code == DENIED
    assert fetched(fetch_as(b, "orders", principal=ADMIN))[("orders", 0)].error_code == 0


def test_an_incremental_fetch_session_is_no_way_around(b: Broker) -> None:
    request = fetch_req([("orders", 0, 0, BIG)])
    request.session_id, request.session_epoch = 1, 1
    got = call(b, ApiKey.FETCH, FETCH_V, request)
    assert (got.error_code, got.responses) == (Errors.FETCH_SESSION_ID_NOT_FOUND, [])
    request.session_id, request.session_epoch = 0, 0        # a new session: not kept
    got = call(b, ApiKey.FETCH, FETCH_V, request)
    assert (got.session_id, fetched(got)[("orders", 0)].error_code) == (0, DENIED)


def follower_setup(b: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """``orders`` led here with broker 2 in its ISR that has not fetched yet: the high
    watermark stays at 2 (the records before) until broker 2 reports where its log
    ends."""
    metadata = b.services.metadata
    brokers = [*metadata.brokers(), BrokerRegistration(2, "localhost", 9093)]
    monkeypatch.setattr(metadata, "brokers", lambda: brokers)
    p = b.partition("orders")
    p.make_leader(PartitionState(leader=NODE, leader_epoch=1, isr=(NODE, 2)), [NODE, 2])
    got = call(b, ApiKey.PRODUCE, PRODUCE_V, produce_req({("orders", 0): batch(b"c")}), ADMIN)
    assert produced(got) == {("orders", 0): (0, 2)}
    assert (p.log.log_end_offset, p.log.high_watermark) == (3, 2)


def follower_fetch(b: Broker, version: int, replica_id: int, *topics: str) -> Any:
    """A fetch of ``topics`` (partition 0; ``orders`` from offset 3) naming a replica:
    by name before v13, by id after, with the replica id in ``replica_state`` from
    v15."""
    request = fetch_req([(t, 0, 3 if t == "orders" else 0, BIG) for t in topics])
    if version >= 13:
        for t in request.topics:
            t.topic_id = b.services.metadata.topics[t.topic].topic_id
    if version >= 15:
        request.replica_state = FetchRequest.ReplicaState(replica_id=replica_id,
                                                          replica_epoch=-1)
    else:
        request.replica_id = replica_id
    return request


@pytest.mark.parametrize("version", [12, 15])
def test_a_forged_follower_fetch_gets_29_everywhere_and_moves_nothing(
        b: Broker, monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """CVE-2018-1288: a client naming a replica id is not a follower.  Read on the
    topic does not help; without ClusterAction the high watermark, the follower's
    position and the ISR stay where they were."""
    follower_setup(b, monkeypatch)
    b.create_topic("audit")
    b.allow("User:alice", Op.READ, TOPIC, "*")
    got = call(b, ApiKey.FETCH, version, follower_fetch(b, version, 2, "orders", "audit"))
    assert [(p.error_code, p.high_watermark, bytes(p.records or b""))
            for t in got.responses for p in t.partitions] == [(DENIED, -1, b"")] * 2
    p = b.partition("orders")
    assert (p.log.high_watermark, p.remote_replicas[2].log_end_offset, p.isr) == (
        2, -1, (NODE, 2))
    # control: the broker's own principal, with ClusterAction
    b.allow("User:broker2", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster")
    got = call(b, ApiKey.FETCH, version, follower_fetch(b, version, 2, "orders"),
               KafkaPrincipal.user("broker2"))
    assert got.responses[0].partitions[0].error_code == 0
    assert (p.log.high_watermark, p.remote_replicas[2].log_end_offset) == (3, 3)


# ---------------------------------------------------------------------------- ListOffsets
def list_offsets_as(b: Broker, *topics: str, principal: KafkaPrincipal = ALICE
                    ) -> list[tuple[str, int, int, int]]:
    got = call(b, ApiKey.LIST_OFFSETS, LIST_OFFSETS_V,
               list_offsets_req([(t, 0, -1) for t in topics]), principal)
    return [(t.name, p.error_code, p.timestamp, p.offset) for t in got.topics
            for p in t.partitions]


def test_list_offsets_needs_describe_which_read_or_write_imply(b: Broker) -> None:
    assert list_offsets_as(b, "orders", "ghost") == [
        ("orders", DENIED, -1, -1), ("ghost", DENIED, -1, -1)]
    b.allow("User:alice", Op.READ, TOPIC, "orders")
    b.allow("User:alice", Op.WRITE, TOPIC, "ghost")
    assert list_offsets_as(b, "orders", "ghost") == [
        ("orders", 0, -1, 2), ("ghost", UNKNOWN, -1, -1)]


def test_list_offsets_prefixed_deny_and_super_user(b: Broker) -> None:
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "ord", PatternType.PREFIXED)
    assert list_offsets_as(b, "orders") == [("orders", 0, -1, 2)]
    b.deny("User:alice", Op.DESCRIBE, TOPIC, "orders")
    assert list_offsets_as(b, "orders") == [("orders", DENIED, -1, -1)]
    assert list_offsets_as(b, "orders", principal=ADMIN) == [("orders", 0, -1, 2)]


# ---------------------------------------------------------------------------- OffsetForLeaderEpoch
def epoch_ends(b: Broker, *topics: str, principal: KafkaPrincipal = ALICE
               ) -> list[tuple[str, int, int, int]]:
    cls = OffsetForLeaderEpochRequest
    request = cls(replica_id=-2, topics=[cls.OffsetForLeaderTopic(topic=t, partitions=[
        cls.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, leader_epoch=0)])
        for t in topics])
    got = call(b, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request, principal)
    return [(t.topic, p.error_code, p.leader_epoch, p.end_offset) for t in got.topics
            for p in t.partitions]


def test_offset_for_leader_epoch_needs_describe_on_the_topic(b: Broker) -> None:
    assert epoch_ends(b, "orders", "ghost") == [
        ("orders", DENIED, -1, -1), ("ghost", DENIED, -1, -1)]
    b.allow("User:alice", Op.READ, TOPIC, "orders")            # implies Describe
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "ghost")
    assert epoch_ends(b, "orders", "ghost") == [
        ("orders", 0, 0, 2), ("ghost", UNKNOWN, -1, -1)]


def test_offset_for_leader_epoch_cluster_action_covers_every_topic(b: Broker) -> None:
    b.deny("User:alice", Op.DESCRIBE, TOPIC, "orders")         # not even asked
    b.allow("User:alice", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster")
    assert epoch_ends(b, "orders", "ghost") == [
        ("orders", 0, 0, 2), ("ghost", UNKNOWN, -1, -1)]
    assert epoch_ends(b, "orders", principal=ADMIN) == [("orders", 0, 0, 2)]


# ---------------------------------------------------------------------------- DescribeProducers
def producers(b: Broker, *topics: str, principal: KafkaPrincipal = ALICE
              ) -> list[tuple[str, int, str | None]]:
    cls = DescribeProducersRequest
    request = cls(topics=[cls.TopicRequest(name=t, partition_indexes=[0]) for t in topics])
    got = call(b, ApiKey.DESCRIBE_PRODUCERS, 0, request, principal)
    return [(t.name, p.error_code, p.error_message) for t in got.topics for p in t.partitions]


def test_describe_producers_needs_read_not_just_describe(b: Broker) -> None:
    refused = "Topic authorization failed."
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "*")
    assert producers(b, "orders", "ghost") == [
        ("orders", DENIED, refused), ("ghost", DENIED, refused)]
    b.allow("User:alice", Op.READ, TOPIC, "*")
    assert producers(b, "orders", "ghost") == [("orders", 0, None), ("ghost", UNKNOWN, None)]
    b.deny("User:alice", Op.READ, TOPIC, "orders")
    assert producers(b, "orders") == [("orders", DENIED, refused)]
    assert producers(b, "orders", principal=ADMIN) == [("orders", 0, None)]


# ---------------------------------------------------------------------------- Metadata
def metadata(b: Broker, topics: list[str] | None, *, version: int = 9,
             principal: KafkaPrincipal = ALICE, allow_create: bool = True,
             topic_ops: bool = False, cluster_ops: bool = False) -> Any:
    request = MetadataRequest(
        topics=None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=allow_create,
        include_cluster_authorized_operations=cluster_ops,
        include_topic_authorized_operations=topic_ops)
    return call(b, ApiKey.METADATA, version, request, principal)


def entries(got: Any) -> list[tuple[str, int, int]]:
    return [(t.name, t.error_code, len(t.partitions)) for t in got.topics]


def test_metadata_of_a_named_topic_needs_describe(b: Broker) -> None:
    got = metadata(b, ["orders"], topic_ops=True, version=10)
    t = got.topics[0]
    assert (t.name, t.error_code, t.topic_id, t.partitions, t.topic_authorized_operations) == (
        "orders", DENIED, uuid.UUID(int=0), [], OMITTED)
    b.allow("User:alice", Op.READ, TOPIC, "orders")           # implies Describe
    t = metadata(b, ["orders"], topic_ops=True, version=10).topics[0]
    assert (t.error_code, t.topic_id, len(t.partitions), t.topic_authorized_operations) == (
        0, b.services.metadata.topics["orders"].topic_id, 1, bits(Op.READ, Op.DESCRIBE))
    assert metadata(b, ["orders"]).topics[0].topic_authorized_operations == OMITTED


def test_metadata_of_an_unknown_topic_unauthorized_is_29_and_creates_nothing(
        b: Broker) -> None:
    assert entries(metadata(b, ["ghost"])) == [("ghost", DENIED, 0)]
    assert "ghost" not in b.services.metadata.topics
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "ghost")        # may see, may not create
    assert entries(metadata(b, ["ghost"])) == [("ghost", DENIED, 0)]
    assert "ghost" not in b.services.metadata.topics
    assert entries(metadata(b, ["ghost"], allow_create=False)) == [("ghost", UNKNOWN, 0)]


@pytest.mark.parametrize("acl", [(CLUSTER, "kafka-cluster"), (TOPIC, "ghost")])
def test_metadata_auto_creation_needs_create_on_the_cluster_or_the_topic(
        b: Broker, acl: tuple[ResourceType, str]) -> None:
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "ghost")
    b.allow("User:alice", Op.CREATE, *acl)
    assert entries(metadata(b, ["ghost"])) == [("ghost", 0, 1)]
    assert "ghost" in b.services.metadata.topics


def test_metadata_of_all_topics_leaves_out_what_the_caller_may_not_describe(
        b: Broker, caplog: pytest.LogCaptureFixture) -> None:
    b.create_topic("audit")
    b.create_topic("other")
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "oth", PatternType.PREFIXED)
    with caplog.at_level(logging.INFO, "millrace.authorizer"):
        assert entries(metadata(b, None)) == [("orders", 0, 1), ("other", 0, 1)]
        assert entries(metadata(b, [], version=0)) == [("orders", 0, 1), ("other", 0, 1)]
    assert not [r for r in caplog.records if "Denied" in r.getMessage()]
    with caplog.at_level(logging.INFO, "millrace.authorizer"):  # named: logged
        assert entries(metadata(b, ["audit"])) == [("audit", DENIED, 0)]
    assert [r for r in caplog.records if "Denied" in r.getMessage()]
    everything = sorted(b.services.metadata.topics)
    assert {"audit", "orders", "other"} < set(everything)
    assert [n for n, _, _ in entries(metadata(b, None, principal=ADMIN))] == everything


def test_metadata_deny_wins_over_an_implied_describe(b: Broker) -> None:
    b.allow("User:alice", Op.READ, TOPIC, "*")
    b.deny("User:alice", Op.DESCRIBE, TOPIC, "orders")
    assert entries(metadata(b, ["orders"])) == [("orders", DENIED, 0)]
    listed = [n for n, _, _ in entries(metadata(b, None))]
    assert listed == sorted(set(b.services.metadata.topics) - {"orders"})


def test_metadata_by_topic_id_tells_unknown_ids_and_keeps_the_id_when_denied(
        b: Broker) -> None:
    known = b.services.metadata.topics["orders"].topic_id
    stranger = uuid.UUID(int=4242)
    request = MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=None, topic_id=known),
        MetadataRequest.MetadataRequestTopic(name=None, topic_id=stranger)],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    got = call(b, ApiKey.METADATA, 12, request)
    assert [(t.name, t.topic_id, t.error_code, t.partitions) for t in got.topics] == [
        (None, known, DENIED, []), (None, stranger, Errors.UNKNOWN_TOPIC_ID, [])]
    b.allow("User:alice", Op.DESCRIBE, TOPIC, "orders")
    got = call(b, ApiKey.METADATA, 12, request)
    assert [(t.name, t.error_code) for t in got.topics] == [
        ("orders", 0), (None, Errors.UNKNOWN_TOPIC_ID)]


def test_metadata_cluster_operations_need_describe_on_the_cluster(b: Broker) -> None:
    assert metadata(b, [], cluster_ops=True).cluster_authorized_operations == 0
    assert metadata(b, []).cluster_authorized_operations == OMITTED
    b.allow("User:alice", Op.DESCRIBE, CLUSTER, "kafka-cluster")
    b.allow("User:alice", Op.IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")
    assert metadata(b, [], cluster_ops=True).cluster_authorized_operations == bits(
        Op.DESCRIBE, Op.IDEMPOTENT_WRITE)


# ---------------------------------------------------------------------------- DescribeCluster
def describe_cluster(b: Broker, principal: KafkaPrincipal = ALICE, ops: bool = True) -> Any:
    return call(b, ApiKey.DESCRIBE_CLUSTER, 1,
                DescribeClusterRequest(include_cluster_authorized_operations=ops), principal)


def test_describe_cluster_answers_anyone_but_the_operations_need_describe(
        b: Broker) -> None:
    got = describe_cluster(b)
    assert (got.error_code, [x.broker_id for x in got.brokers],
            got.cluster_authorized_operations) == (0, [NODE], 0)
    assert describe_cluster(b, ops=False).cluster_authorized_operations == OMITTED
    b.allow("User:alice", Op.DESCRIBE, CLUSTER, "kafka-cluster")
    assert describe_cluster(b).cluster_authorized_operations == bits(Op.DESCRIBE)
    every = bits(Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                 Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE)
    assert describe_cluster(b, ADMIN).cluster_authorized_operations == every


# ---------------------------------------------------------------------------- InitProducerId
def init_pid(b: Broker, transactional_id: str | None = None,
             principal: KafkaPrincipal = ALICE) -> Any:
    return call(b, ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60_000), principal)


def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_some_topic(
        b: Broker) -> None:
    got = init_pid(b)
    assert (got.error_code, got.producer_id, got.producer_epoch) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED, -1, -1)
    b.allow("User:alice", Op.READ, TOPIC, "*")                 # Read is not Write
    assert init_pid(b).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    b.allow("User:alice", Op.WRITE, TOPIC, "some-", PatternType.PREFIXED)
    got = init_pid(b)
    assert (got.error_code, got.producer_epoch) == (0, 0) and got.producer_id >= 0


def test_init_producer_id_idempotent_write_on_the_cluster_and_deny_wins(b: Broker) -> None:
    b.allow("User:alice", Op.WRITE, TOPIC, "orders")
    b.deny("User:alice", Op.WRITE, TOPIC, "*")                 # covers every topic
    assert init_pid(b).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    b.allow("User:alice", Op.IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")
    assert init_pid(b).error_code == 0
    assert init_pid(b, principal=KafkaPrincipal.user("bob")).error_code == \
        Errors.CLUSTER_AUTHORIZATION_FAILED
    assert init_pid(b, principal=ADMIN).error_code == 0


def test_init_producer_id_transactional_needs_write_on_the_transactional_id(
        b: Broker) -> None:
    b.allow("User:alice", Op.IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")  # not enough
    got = init_pid(b, "txn-1")
    assert (got.error_code, got.producer_id, got.producer_epoch) == (
        Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    b.allow("User:alice", Op.WRITE, TXN, "txn-", PatternType.PREFIXED)
    # past the check: the coordinator answers (its partition is not loaded here)
    assert init_pid(b, "txn-1").error_code == Errors.NOT_COORDINATOR
    assert init_pid(b, "other").error_code == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# ---------------------------------------------------------------------------- no authorizer
def test_without_an_authorizer_the_bitfields_hold_every_supported_operation(
        broker: Broker) -> None:
    broker.create_topic("orders")
    got = call(broker, ApiKey.METADATA, 9, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True))
    assert got.topics[0].topic_authorized_operations == bits(
        Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
        Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    assert got.cluster_authorized_operations == bits(
        Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE)
    got = fetched(call(broker, ApiKey.FETCH, FETCH_V, fetch_req([("orders", 0, 0, BIG)])))
    assert got[("orders", 0)].error_code == 0
