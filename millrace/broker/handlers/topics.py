"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

Errors are per topic, with Kafka's codes: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
UNKNOWN_TOPIC_OR_PARTITION.  ``validate_only`` checks everything and changes nothing.

Authorization (Kafka 3.9's ``KafkaApis``), asked before existence so that no name can be
probed: CreateTopics needs Create on the Cluster, else Create on each Topic (per topic
TOPIC_AUTHORIZATION_FAILED); the created topic's configs, partition count, replication
factor and id are returned only with DescribeConfigs on it, else its
``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED.  DeleteTopics needs Delete on
each Topic; a topic named by id needs Describe too, without which its name is not
returned.  CreatePartitions needs Alter on each Topic.
"""

from __future__ import annotations

import asyncio
import uuid

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.metadata import TopicInfo
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
from millrace.security.acl import AclOperation, ResourceType

TOPIC = ResourceType.TOPIC


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, body: CreateTopicsRequest) -> CreateTopicsResponse:
    services = ctx.services
    cls = CreateTopicsResponse
    result_cls = cls.CreatableTopicResult
    names = [t.name for t in body.topics]
    # Kafka asks the Cluster quietly: a denial there only means "ask per topic".
    creatable = (set(names) if ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False)
                 else ctx.authorized_names(AclOperation.CREATE, TOPIC, names))
    describable = ctx.authorized_names(AclOperation.DESCRIBE_CONFIGS, TOPIC, names,
                                       log_if_denied=False)
    results = []
    created: list[tuple[CreateTopicsResponse.CreatableTopicResult, int]] = []
    seen: set[str] = set()
    for t in body.topics:
        res = result_cls(name=t.name, error_code=Errors.NONE, error_message=None)
        results.append(res)
        if t.name in seen:
            res.error_code = Errors.INVALID_REQUEST
            res.error_message = f"Duplicate topic name {t.name} in the request"
        elif t.name not in creatable:
            res.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
            res.error_message = "Authorization failed."
        seen.add(t.name)
        if t.name not in describable:
            # Kafka keeps this on a topic it refuses above, and clears it on one whose
            # creation fails below.
            res.topic_config_error_code = Errors.TOPIC_AUTHORIZATION_FAILED
        if res.error_code:
            continue
        try:
            info = _create_topic(ctx, t, body.validate_only)
        except ConfigError as e:
            res.error_code, res.error_message = Errors.INVALID_CONFIG, str(e)
        except KafkaError as e:
            res.error_code, res.error_message = e.code, e.message
        if res.error_code:
            res.topic_config_error_code = Errors.NONE
            continue
        created.append((res, info.partitions))
        if t.name in describable:
            res.topic_id = info.topic_id
            res.num_partitions = info.partitions
            res.replication_factor = len(info.replicas(0))
            res.configs = [result_cls.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=src, is_sensitive=False)
                for k, v, src in services.topic_configs.describe(info.configs)]
    if services.cluster is not None and not body.validate_only:
        await _await_leaders(ctx, created, body.timeout_ms)
    return cls(throttle_time_ms=0, topics=results)


def _create_topic(ctx: RequestContext, t: CreateTopicsRequest.CreatableTopic,
                  validate_only: bool) -> TopicInfo:
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
    return ctx.services.admin_manager.create_topic(t.name, partitions, configs, rf,
                                                   validate_only=validate_only,
                                                   assignment=assignment)


async def _await_leaders(ctx: RequestContext,
                         created: list[tuple[CreateTopicsResponse.CreatableTopicResult, int]],
                         timeout_ms: int) -> None:
    """Kafka's DelayedCreatePartitions: in a cluster the controller elects the new
    partitions' leaders after the ZooKeeper write, so the answer waits (up to the
    request's timeout) until this broker's metadata has a leader for every partition;
    topics still without one answer REQUEST_TIMED_OUT (they are created all the same).
    ``created`` pairs each result with its partition count (a result without
    DescribeConfigs does not carry it)."""
    metadata = ctx.services.metadata
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000

    def ready(created_topic: tuple[CreateTopicsResponse.CreatableTopicResult, int]) -> bool:
        r, count = created_topic
        return all((s := metadata.partition_state(r.name, p)) is not None and s.leader >= 0
                   for p in range(count))
    waiting = [c for c in created if not ready(c)]
    while waiting and loop.time() < deadline:
        await asyncio.sleep(0.02)
        waiting = [c for c in waiting if not ready(c)]
    for r, _ in waiting:
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
    resolved: list[tuple[DeleteTopicsResponse.DeletableTopicResult, str, bool]] = []
    for name, topic_id in wanted:
        res = res_cls(name=name, error_code=Errors.NONE, error_message=None)
        results.append(res)
        by_id = False
        if name is None and topic_id is not None:
            by_id = True
            info = services.metadata.topic_by_id(topic_id)
            res.topic_id = topic_id
            if info is None:
                res.error_code = Errors.UNKNOWN_TOPIC_ID
                continue
            name = info.name
        assert name is not None
        resolved.append((res, name, by_id))
    enabled = services.config["delete.topic.enable"]
    # Kafka: the id itself is not secret, the name behind it is (Describe).
    describable = ctx.authorized_names(AclOperation.DESCRIBE, TOPIC,
                                       [name for _, name, by_id in resolved if by_id])
    deletable = ctx.authorized_names(AclOperation.DELETE, TOPIC,
                                     [name for _, name, _ in resolved]) if enabled else set()
    for res, name, by_id in resolved:
        if by_id:
            res.name = name if name in describable else None
        if not enabled:
            res.error_code = Errors.TOPIC_DELETION_DISABLED
        elif (by_id and name not in describable) or name not in deletable:
            res.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
        else:
            info = services.metadata.topics.get(name)
            if info is not None:
                res.topic_id = info.topic_id
            try:
                services.admin_manager.delete_topic(name)
            except KafkaError as e:
                res.error_code, res.error_message = e.code, e.message
    return cls(throttle_time_ms=0, responses=results)


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(ctx: RequestContext, body: CreatePartitionsRequest) -> CreatePartitionsResponse:
    admin = ctx.services.admin_manager
    cls = CreatePartitionsResponse
    alterable = ctx.authorized_names(AclOperation.ALTER, TOPIC, [t.name for t in body.topics])
    results = []
    for t in body.topics:
        res = cls.CreatePartitionsTopicResult(name=t.name, error_code=Errors.NONE,
                                              error_message=None)
        results.append(res)
        if t.name not in alterable:
            res.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
            res.error_message = "The topic authorization is failed."
            continue
        assignments = None if t.assignments is None else [a.broker_ids for a in t.assignments]
        try:
            admin.create_partitions(t.name, t.count, assignments, body.validate_only)
        except KafkaError as e:
            res.error_code, res.error_message = e.code, e.message
    return cls(throttle_time_ms=0, results=results)
