"""Helpers for the in-process broker tests: the broker's services on ``MockTime`` and
requests driven through the handlers as the network layer drives them.

``Broker`` builds ``BrokerServices`` with ``KafkaServer.build_services`` (the same wiring
as a running broker, minus sockets) over a ``tmp_path`` log dir, registers the broker so
Metadata has an endpoint to report, and ``call``s a handler the way a connection does:
the request is encoded at a version and decoded, the handler runs, and its response is
encoded and decoded at that version too (so every answer must be legal on the wire).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from millrace.broker.config import KafkaConfig
from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS
from millrace.broker.metadata import BrokerRegistration
from millrace.broker.partition import Partition
from millrace.broker.server import KafkaServer
from millrace.broker.services import BrokerServices
from millrace.common.time import MockTime
from millrace.protocol import (
    API,
    ApiKey,
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
    RequestHeader,
)
from millrace.record import RecordBatch, RecordBatchBuilder, iter_batches
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.security.kafka_principal import ANONYMOUS, KafkaPrincipal

NODE = 1
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
"""``Broker(dir, **AUTHORIZER)``: the broker with the ACL authorizer on."""
T0 = 1_700_000_000_000
PRODUCE_V = 9     # flexible, topic names
FETCH_V = 12      # flexible, topic names
LIST_OFFSETS_V = 7


class Broker:
    """One broker's services on ``MockTime``; ``close`` as ``KafkaServer.shutdown`` does."""

    def __init__(self, log_dir: str, **extra: Any) -> None:
        self.time = MockTime(T0)
        self.config = KafkaConfig({"log.dirs": log_dir, "node.id": NODE,
                                   "offsets.topic.num.partitions": 1,
                                   "transaction.state.log.num.partitions": 1,
                                   "group.initial.rebalance.delay.ms": 0, **extra})
        self.services: BrokerServices = KafkaServer.build_services(self.config, self.time)
        self.services.metadata.register_broker(BrokerRegistration(NODE, "localhost", 9092))

    async def call(self, key: int, version: int, body: Any,
                   principal: KafkaPrincipal = ANONYMOUS, host: str = "127.0.0.1") -> Any:
        """Encode ``body`` at ``version``, decode, run the handler as ``principal`` from
        ``host``, and return its response after an encode/decode round trip (None when
        the handler sends none)."""
        api = API[key]
        body = api.request.decode(api.request.encode(body, version), version)
        ctx = RequestContext(RequestHeader(key, version, 7, "test"), api, host, 5555,
                             self.services, principal=principal)
        response = await HANDLERS[key](ctx, body)
        if response is None:
            return None
        return api.response.decode(api.response.encode(response, version), version)

    def allow(self, principal: str, operation: AclOperation, resource_type: ResourceType,
              name: str, pattern_type: PatternType = PatternType.LITERAL,
              permission: AclPermissionType = AclPermissionType.ALLOW,
              host: str = "*") -> None:
        """Add one ACL (the broker needs ``authorizer.class.name`` in ``extra``)."""
        assert self.services.acls is not None, "built without authorizer.class.name"
        binding = AclBinding(ResourcePattern(resource_type, name, pattern_type),
                             AccessControlEntry(principal, host, operation, permission))
        results = asyncio.run(self.services.acls.create_acls([binding]))
        assert results[0].error == 0, results

    def deny(self, principal: str, operation: AclOperation, resource_type: ResourceType,
             name: str, pattern_type: PatternType = PatternType.LITERAL) -> None:
        self.allow(principal, operation, resource_type, name, pattern_type,
                   AclPermissionType.DENY)

    def create_topic(self, name: str, partitions: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        self.services.admin_manager.create_topic(name, partitions, dict(configs or {}))

    def partition(self, topic: str, index: int = 0) -> Partition:
        p = self.services.replica_manager.get_partition(topic, index)
        assert p is not None
        return p

    def close(self) -> None:
        if self.services.acls is not None:
            self.services.acls.stop()
        self.services.replica_manager.shutdown()
        self.services.log_manager.shutdown()


# ---------------------------------------------------------------------- records
def batch(*values: bytes, timestamps: Sequence[int] = (), producer_id: int = -1,
          producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One v2 batch holding ``values`` (timestamps default to T0, T0+1, ...)."""
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence)
    for i, value in enumerate(values):
        builder.append(timestamps[i] if timestamps else T0 + i, b"k%d" % i, value)
    return builder.build()


def records(data: Any) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetch response's records field."""
    if not data:
        return []
    buf = bytes(data)
    return [(r.offset, r.value) for pos, _ in iter_batches(buf)
            for r in RecordBatch(buf, pos).records()]


def batch_sizes(data: Any) -> list[int]:
    buf = bytes(data or b"")
    return [RecordBatch(buf, pos).size for pos, _ in iter_batches(buf)]


# ---------------------------------------------------------------------- requests
def produce_req(entries: dict[tuple[str, int], bytes | None], acks: int = 1,
                timeout_ms: int = 30_000) -> Any:
    topics: dict[str, list[Any]] = {}
    for (topic, index), data in entries.items():
        topics.setdefault(topic, []).append(
            ProduceRequest.TopicProduceData.PartitionProduceData(index=index, records=data))
    return ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=name, partition_data=parts)
        for name, parts in topics.items()])


def produced(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(error_code, base_offset) per partition of a ProduceResponse."""
    return {(t.name, p.index): (p.error_code, p.base_offset)
            for t in response.responses for p in t.partition_responses}


async def produce(broker: Broker, topic: str, *values: bytes, partition: int = 0,
                  acks: int = 1) -> int:
    """Produce one batch; its base offset (fails the test on an error)."""
    got = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                            produce_req({(topic, partition): batch(*values)}, acks))
    error, offset = produced(got)[(topic, partition)]
    assert error == 0, error
    return offset


def fetch_req(parts: Iterable[tuple[str, int, int, int]], *, max_wait_ms: int = 0,
              min_bytes: int = 1, max_bytes: int = 0x7FFFFFFF) -> Any:
    """A fetch of (topic, partition, fetch_offset, partition_max_bytes) each."""
    topics: dict[str, list[Any]] = {}
    for topic, index, offset, pmax in parts:
        topics.setdefault(topic, []).append(FetchRequest.FetchTopic.FetchPartition(
            partition=index, fetch_offset=offset, partition_max_bytes=pmax))
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        topics=[FetchRequest.FetchTopic(topic=name, partitions=ps)
                                for name, ps in topics.items()])


def fetched(response: Any) -> dict[tuple[str, int], Any]:
    """Each partition of a FetchResponse by (topic, partition)."""
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def start_fetch(broker: Broker, request: Any, version: int = FETCH_V) -> asyncio.Task[Any]:
    return asyncio.create_task(broker.call(ApiKey.FETCH, version, request))


async def settle(rounds: int = 5) -> None:
    """Let the loop run every ready callback a few times (no wall-clock wait)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def list_offsets_req(parts: Iterable[tuple[str, int, int]]) -> Any:
    """ListOffsets of (topic, partition, timestamp) each."""
    topics: dict[str, list[Any]] = {}
    for topic, index, ts in parts:
        topics.setdefault(topic, []).append(
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=index,
                                                                     timestamp=ts))
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=ps)
        for name, ps in topics.items()])


def create_topics_req(*topics: tuple[str, int, int], configs: dict[str, str] | None = None,
                      validate_only: bool = False) -> Any:
    """CreateTopics of (name, num_partitions, replication_factor) each."""
    cfg = [CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
           for k, v in (configs or {}).items()]
    return CreateTopicsRequest(validate_only=validate_only, topics=[
        CreateTopicsRequest.CreatableTopic(name=n, num_partitions=p, replication_factor=rf,
                                           assignments=[], configs=cfg)
        for n, p, rf in topics])
