"""Metadata, CreateTopics, DeleteTopics and CreatePartitions through the handlers on one
node: this broker is the leader, the replicas and the ISR of everything; each refusal
carries the error Kafka names."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from millrace.common.errors import Errors
from millrace.protocol import (
    ApiKey,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
)
from tests.unit.broker.brokergen import NODE, Broker, create_topics_req, produce

METADATA_V = 12


def topics_req(*names: str | None, ids: tuple[uuid.UUID, ...] = (),
               allow_create: bool = True) -> Any:
    return MetadataRequest(allow_auto_topic_creation=allow_create, topics=[
        MetadataRequest.MetadataRequestTopic(name=n) for n in names] + [
        MetadataRequest.MetadataRequestTopic(name=None, topic_id=i) for i in ids])


def partitions(topic: Any) -> list[tuple[int, int, int, int, list[int], list[int], list[int]]]:
    return [(p.error_code, p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes,
             p.isr_nodes, p.offline_replicas) for p in topic.partitions]


def led_here(n: int, epoch: int = 0
             ) -> list[tuple[int, int, int, int, list[int], list[int], list[int]]]:
    """``n`` partitions led here (leader_epoch exists from v7: -1 before)."""
    return [(0, i, NODE, epoch, [NODE], [NODE], []) for i in range(n)]


def errors(response: Any, field: str = "topics") -> dict[str, int]:
    return {t.name: t.error_code for t in getattr(response, field)}


# ---------------------------------------------------------------------- Metadata
def test_metadata_of_every_topic(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        for version, request in ((METADATA_V, MetadataRequest(topics=None)),
                                 (0, MetadataRequest(topics=[]))):
            got = await broker.call(ApiKey.METADATA, version, request)
            assert [(b.node_id, b.host, b.port) for b in got.brokers] == [
                (NODE, "localhost", 9092)]
            assert [t.name for t in got.topics] == ["__consumer_offsets",
                                                    "__transaction_state", "t"]
            epoch = 0 if version >= 7 else -1
            assert [partitions(t) for t in got.topics] == [
                led_here(1, epoch), led_here(1, epoch), led_here(2, epoch)]
        assert (got.cluster_id, got.controller_id) == (None, -1)          # not in v0
        got = await broker.call(ApiKey.METADATA, METADATA_V, MetadataRequest(topics=None))
        assert got.cluster_id == broker.services.metadata.cluster_id and got.cluster_id
        assert got.controller_id == NODE
        assert [(t.name, t.is_internal, t.topic_id) for t in got.topics] == [
            (name, name.startswith("__"), broker.services.metadata.topics[name].topic_id)
            for name in ("__consumer_offsets", "__transaction_state", "t")]

    asyncio.run(main())


def test_metadata_of_named_topics_and_topic_ids(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        known = broker.services.metadata.topics["t"].topic_id
        got = await broker.call(ApiKey.METADATA, METADATA_V, topics_req(
            "nope", ids=(known, uuid.UUID(int=77)), allow_create=False))
        assert [(t.name, t.topic_id, t.error_code) for t in got.topics] == [
            ("nope", uuid.UUID(int=0), Errors.UNKNOWN_TOPIC_OR_PARTITION),
            ("t", known, 0), (None, uuid.UUID(int=77), Errors.UNKNOWN_TOPIC_ID)]
        assert partitions(got.topics[1]) == led_here(1)
        assert "nope" not in broker.services.metadata.topics

    asyncio.run(main())


def test_metadata_creates_unknown_topics_when_allowed(tmp_path: Path) -> None:
    async def main() -> None:
        on = Broker(str(tmp_path / "on"), **{"num.partitions": 3})
        off = Broker(str(tmp_path / "off"), **{"auto.create.topics.enable": False})
        try:
            got = await on.call(ApiKey.METADATA, METADATA_V, topics_req("new", "bad/name"))
            assert errors(got) == {"new": 0, "bad/name": Errors.INVALID_TOPIC_EXCEPTION}
            assert partitions(got.topics[0]) == led_here(3)
            assert on.services.replica_manager.get_partition("new", 2) is not None
            got = await on.call(ApiKey.METADATA, 3, MetadataRequest(topics=[
                MetadataRequest.MetadataRequestTopic(name="old")]))   # v3: always allowed
            assert errors(got) == {"old": 0}
            got = await off.call(ApiKey.METADATA, METADATA_V, topics_req("new"))
            assert errors(got) == {"new": Errors.UNKNOWN_TOPIC_OR_PARTITION}
            assert "new" not in off.services.metadata.topics
        finally:
            on.close()
            off.close()

    asyncio.run(main())


# ---------------------------------------------------------------------- CreateTopics
def test_create_topics_hosts_the_partitions_here(broker: Broker) -> None:
    async def main() -> None:
        got = await broker.call(ApiKey.CREATE_TOPICS, 7, create_topics_req(
            ("a", 3, 1), ("b", -1, -1), configs={"cleanup.policy": "compact"}))
        assert [(t.name, t.error_code, t.num_partitions, t.replication_factor)
                for t in got.topics] == [("a", 0, 3, 1), ("b", 0, 1, 1)]
        meta = broker.services.metadata
        assert [t.topic_id for t in got.topics] == [meta.topics["a"].topic_id,
                                                    meta.topics["b"].topic_id]
        configs = {c.name: (c.value, c.config_source) for c in got.topics[0].configs}
        assert configs["cleanup.policy"] == ("compact", 1)          # TOPIC_CONFIG
        assert configs["retention.ms"][1] == 5                       # DEFAULT_CONFIG
        for i in range(3):
            p = broker.services.replica_manager.get_partition("a", i)
            assert p is not None and (p.is_leader, p.isr) == (True, (NODE,))
        assert broker.partition("a", 2).log.config.compact is True
        assert await produce(broker, "a", b"x", partition=2) == 0

    asyncio.run(main())


def test_create_topics_errors(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("taken")
        got = await broker.call(ApiKey.CREATE_TOPICS, 7, create_topics_req(
            ("taken", 1, 1), ("zero", 0, 1), ("rf2", 1, 2), ("rf0", 1, 0), ("bad/name", 1, 1),
            ("dup", 1, 1), ("dup", 1, 1)))
        assert [(t.name, t.error_code) for t in got.topics] == [
            ("taken", Errors.TOPIC_ALREADY_EXISTS), ("zero", Errors.INVALID_PARTITIONS),
            ("rf2", Errors.INVALID_REPLICATION_FACTOR),
            ("rf0", Errors.INVALID_REPLICATION_FACTOR),
            ("bad/name", Errors.INVALID_TOPIC_EXCEPTION), ("dup", 0),
            ("dup", Errors.INVALID_REQUEST)]
        got = await broker.call(ApiKey.CREATE_TOPICS, 7, create_topics_req(
            ("cfg", 1, 1), configs={"no.such.config": "1"}))
        assert errors(got) == {"cfg": Errors.INVALID_CONFIG}
        assert got.topics[0].error_message is not None
        assert "no.such.config" in got.topics[0].error_message
        assert sorted(broker.services.metadata.topics) == [
            "__consumer_offsets", "__transaction_state", "dup", "taken"]

    asyncio.run(main())


def test_create_topics_validate_only_and_explicit_assignments(broker: Broker) -> None:
    async def main() -> None:
        got = await broker.call(ApiKey.CREATE_TOPICS, 7, create_topics_req(
            ("dry", 4, 1), validate_only=True))
        assert [(t.error_code, t.num_partitions) for t in got.topics] == [(0, 4)]
        assert "dry" not in broker.services.metadata.topics
        assert broker.services.replica_manager.get_partition("dry", 0) is None
        cls = CreateTopicsRequest.CreatableTopic
        assigned = [cls.CreatableReplicaAssignment(partition_index=i, broker_ids=[NODE])
                    for i in (0, 1)]
        got = await broker.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[
            cls(name="manual", num_partitions=-1, replication_factor=-1,
                assignments=assigned, configs=[]),
            cls(name="both", num_partitions=2, replication_factor=-1,
                assignments=assigned, configs=[])]))
        assert [(t.name, t.error_code, t.num_partitions) for t in got.topics] == [
            ("manual", 0, 2), ("both", Errors.INVALID_REQUEST, -1)]

    asyncio.run(main())


def test_create_topics_refuses_an_assignment_to_an_unknown_broker(broker: Broker) -> None:
    async def main() -> None:
        cls = CreateTopicsRequest.CreatableTopic
        got = await broker.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[
            cls(name="elsewhere", num_partitions=-1, replication_factor=-1, configs=[],
                assignments=[cls.CreatableReplicaAssignment(partition_index=0,
                                                            broker_ids=[NODE + 1])])]))
        assert errors(got) == {"elsewhere": Errors.INVALID_REPLICA_ASSIGNMENT}

    asyncio.run(main())


# ---------------------------------------------------------------------- DeleteTopics
def test_delete_topics_by_name_and_by_id(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("a", 2)
        broker.create_topic("b")
        await produce(broker, "a", b"old")
        meta, rm = broker.services.metadata, broker.services.replica_manager
        a_id, b_id = meta.topics["a"].topic_id, meta.topics["b"].topic_id
        got = await broker.call(ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(
            topic_names=["a", "nope"], timeout_ms=1000))
        assert errors(got, "responses") == {"a": 0, "nope": Errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert "a" not in meta.topics
        assert [rm.get_partition("a", i) for i in (0, 1)] == [None, None]
        got = await broker.call(ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(topics=[
            DeleteTopicsRequest.DeleteTopicState(topic_id=b_id),
            DeleteTopicsRequest.DeleteTopicState(topic_id=uuid.UUID(int=5))], timeout_ms=1000))
        assert [(r.name, r.error_code) for r in got.responses] == [
            ("b", 0), (None, Errors.UNKNOWN_TOPIC_ID)]
        assert got.responses[0].topic_id == b_id
        assert sorted(meta.topics) == ["__consumer_offsets", "__transaction_state"]
        broker.create_topic("a")                          # a new topic under the old name
        assert meta.topics["a"].topic_id != a_id
        assert await produce(broker, "a", b"new") == 0

    asyncio.run(main())


def test_delete_topics_echoes_an_unknown_topic_id(broker: Broker) -> None:
    async def main() -> None:
        got = await broker.call(ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(topics=[
            DeleteTopicsRequest.DeleteTopicState(topic_id=uuid.UUID(int=5))], timeout_ms=1000))
        assert [(r.topic_id, r.error_code) for r in got.responses] == [
            (uuid.UUID(int=5), Errors.UNKNOWN_TOPIC_ID)]

    asyncio.run(main())


def test_delete_topics_disabled(tmp_path: Path) -> None:
    async def main() -> None:
        b = Broker(str(tmp_path / "logs"), **{"delete.topic.enable": False})
        try:
            b.create_topic("keep")
            got = await b.call(ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(
                topic_names=["keep"], timeout_ms=1000))
            assert errors(got, "responses") == {"keep": Errors.TOPIC_DELETION_DISABLED}
            assert "keep" in b.services.metadata.topics
        finally:
            b.close()

    asyncio.run(main())


# ---------------------------------------------------------------------- CreatePartitions
def create_partitions_req(name: str, count: int, assignments: list[list[int]] | None = None,
                          validate_only: bool = False) -> Any:
    cls = CreatePartitionsRequest.CreatePartitionsTopic
    return CreatePartitionsRequest(timeout_ms=1000, validate_only=validate_only, topics=[
        cls(name=name, count=count, assignments=None if assignments is None else [
            cls.CreatePartitionsAssignment(broker_ids=a) for a in assignments])])


def test_create_partitions_grows_a_topic_here(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        got = await broker.call(ApiKey.CREATE_PARTITIONS, 3, create_partitions_req("t", 3))
        assert errors(got, "results") == {"t": 0}
        meta = await broker.call(ApiKey.METADATA, METADATA_V, topics_req("t"))
        assert partitions(meta.topics[0]) == led_here(3)
        assert await produce(broker, "t", b"x", partition=2) == 0

    asyncio.run(main())


def test_create_partitions_errors_and_validate_only(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        cases = [(create_partitions_req("t", 2), Errors.INVALID_PARTITIONS),
                 (create_partitions_req("t", 1), Errors.INVALID_PARTITIONS),
                 (create_partitions_req("nope", 4), Errors.UNKNOWN_TOPIC_OR_PARTITION),
                 (create_partitions_req("t", 5, [[NODE]]), Errors.INVALID_PARTITIONS),
                 (create_partitions_req("t", 5, validate_only=True), 0)]
        for request, error in cases:
            got = await broker.call(ApiKey.CREATE_PARTITIONS, 3, request)
            assert [r.error_code for r in got.results] == [error]
        assert broker.services.metadata.topics["t"].partitions == 2
        assert broker.services.replica_manager.get_partition("t", 2) is None

    asyncio.run(main())
