"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

Errors are per topic, with Kafka's codes: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
UNKNOWN_TOPIC_OR_PARTITION.  ``validate_only`` checks everything and changes nothing.
"""

from __future__ import annotations

import asyncio
import uuid

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import ConfigError, Errors, InvalidRequestError, KafkaError
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, body: CreateTopicsRequest) -> CreateTopicsResponse:
    services = ctx.services
    cls = CreateTopicsResponse
    result_cls = cls.CreatableTopicResult
    results = []
    seen: set[str] = set()
    for t in body.topics:
        res = result_cls(name=t.name, error_code=Errors.NONE, error_message=None)
        try:
            if t.name in seen:
                raise InvalidRequestError(f"Duplicate topic name {t.name} in the request")
            seen.add(t.name)
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise InvalidRequestError("Both numPartitions or replicationFactor and "
                                              "replicasAssignments were set.")
                partitions, rf = len(t.assignments), len(t.assignments[0].broker_ids)
                assignment: dict[int, list[int]] | None = {
                    a.partition_index: list(a.broker_ids) for a in t.assignments}
            else:
                partitions, rf = t.num_partitions, t.replication_factor
                assignment = None
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            info = services.admin_manager.create_topic(t.name, partitions, configs, rf,
                                                       validate_only=body.validate_only,
                                                       assignment=assignment)
            res.topic_id = info.topic_id
            res.num_partitions = info.partitions
            res.replication_factor = len(info.replicas(0))
            res.configs = [result_cls.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=src, is_sensitive=False)
                for k, v, src in services.topic_configs.describe(info.configs)]
        except ConfigError as e:
            res.error_code, res.error_message = Errors.INVALID_CONFIG, str(e)
        except KafkaError as e:
            res.error_code, res.error_message = e.code, e.message
        results.append(res)
    if services.cluster is not None and not body.validate_only:
        await _await_leaders(ctx, [r for r in results if r.error_code == Errors.NONE],
                             body.timeout_ms)
    return cls(throttle_time_ms=0, topics=results)


async def _await_leaders(ctx: RequestContext,
                         created: list[CreateTopicsResponse.CreatableTopicResult],
                         timeout_ms: int) -> None:
    """Kafka's DelayedCreatePartitions: in a cluster the controller elects the new
    partitions' leaders after the ZooKeeper write, so the answer waits (up to the
    request's timeout) until this broker's metadata has a leader for every partition;
    topics still without one answer REQUEST_TIMED_OUT (they are created all the same)."""
    metadata = ctx.services.metadata
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000

    def ready(r: CreateTopicsResponse.CreatableTopicResult) -> bool:
        return all((s := metadata.partition_state(r.name, p)) is not None and s.leader >= 0
                   for p in range(r.num_partitions))
    waiting = [r for r in created if not ready(r)]
    while waiting and loop.time() < deadline:
        await asyncio.sleep(0.02)
        waiting = [r for r in waiting if not ready(r)]
    for r in waiting:
        r.error_code = Errors.REQUEST_TIMED_OUT
        r.error_message = "Timed out waiting for the new partitions to get leaders"


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(ctx: RequestContext, body: DeleteTopicsRequest) -> DeleteTopicsResponse:
    services = ctx.services
    cls = DeleteTopicsResponse
    res_cls = cls.DeletableTopicResult
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(n, None) for n in body.topic_names]
    results = []
    for name, topic_id in wanted:
        res = res_cls(name=name, error_code=Errors.NONE, error_message=None)
        if name is None and topic_id is not None:
            info = services.metadata.topic_by_id(topic_id)
            if info is None:
                res.topic_id = topic_id
                res.error_code = Errors.UNKNOWN_TOPIC_ID
                results.append(res)
                continue
            name = res.name = info.name
        assert name is not None
        if not services.config["delete.topic.enable"]:
            res.error_code = Errors.TOPIC_DELETION_DISABLED
        else:
            info = services.metadata.topics.get(name)
            if info is not None:
                res.topic_id = info.topic_id
            try:
                services.admin_manager.delete_topic(name)
            except KafkaError as e:
                res.error_code, res.error_message = e.code, e.message
        results.append(res)
    return cls(throttle_time_ms=0, responses=results)


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(ctx: RequestContext, body: CreatePartitionsRequest) -> CreatePartitionsResponse:
    admin = ctx.services.admin_manager
    cls = CreatePartitionsResponse
    results = []
    for t in body.topics:
        res = cls.CreatePartitionsTopicResult(name=t.name, error_code=Errors.NONE,
                                              error_message=None)
        assignments = None if t.assignments is None else [a.broker_ids for a in t.assignments]
        try:
            admin.create_partitions(t.name, t.count, assignments, body.validate_only)
        except KafkaError as e:
            res.error_code, res.error_message = e.code, e.message
        results.append(res)
    return cls(throttle_time_ms=0, results=results)
