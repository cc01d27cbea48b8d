"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DeleteRecords (21).

Resource types: 2 = topic, 4 = broker (read-only here: dynamic broker configs are a
later milestone).  Topic overrides are validated with the log's own config table, then
persisted in the metadata store and applied to the live logs, so they survive restarts.
AlterConfigs replaces the whole override set; IncrementalAlterConfigs applies SET (0),
DELETE (1), APPEND (2) and SUBTRACT (3) to list-valued keys.

Authorization (Kafka 3.9's ``ConfigHelper`` and ``KafkaApis``), per resource and before
existence: DescribeConfigs needs DescribeConfigs (implied by AlterConfigs) on the Topic,
else TOPIC_AUTHORIZATION_FAILED, and on the Cluster for a broker, broker-logger or
client-metrics resource, else CLUSTER_AUTHORIZATION_FAILED; AlterConfigs and
IncrementalAlterConfigs need AlterConfigs on the same resources, with the same codes.
Kafka has no other config resource types (quotas are DescribeClientQuotas'), and those
stay INVALID_REQUEST unasked.  DeleteRecords needs Delete on the Topic, per partition
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from millrace.broker.config import BROKER_CONFIG
from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.topic_config import SOURCE_DEFAULT
from millrace.common.errors import ConfigError, Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from millrace.security.acl import AclOperation, ResourceType

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 8, 16
CLUSTER_TYPES = (BROKER, BROKER_LOGGER, CLIENT_METRICS)
"""Config resource types Kafka authorizes on the Cluster resource."""
SOURCE_STATIC_BROKER = 4


class _ConfigAuthorization:
    """Which config resources of one request the principal may describe or alter: each
    topic name and the Cluster asked at most once (Kafka's ``ConfigHelper`` rules).
    ``denied`` is the error of a refused resource, NONE for an allowed one (and for a
    type Kafka does not authorize, which the handler refuses on its own)."""

    def __init__(self, ctx: RequestContext, operation: AclOperation,
                 resources: list[tuple[int, str]],
                 cluster_types: tuple[int, ...] = CLUSTER_TYPES) -> None:
        self._ctx = ctx
        self._operation = operation
        self._cluster_types = cluster_types
        self._topics = ctx.authorized_names(operation, ResourceType.TOPIC,
                                            [name for t, name in resources if t == TOPIC])
        self._cluster: bool | None = None

    def denied(self, resource_type: int, name: str) -> Errors:
        if resource_type == TOPIC:
            return Errors.NONE if name in self._topics else Errors.TOPIC_AUTHORIZATION_FAILED
        if resource_type in self._cluster_types:
            if self._cluster is None:
                self._cluster = self._ctx.authorize_cluster(self._operation)
            return Errors.NONE if self._cluster else Errors.CLUSTER_AUTHORIZATION_FAILED
        return Errors.NONE


DENIED_MESSAGE = {Errors.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                  Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}
"""Kafka's default messages, which DescribeConfigs puts on a refused resource."""


@handles(ApiKey.DESCRIBE_CONFIGS)
async def handle_describe_configs(ctx: RequestContext, body: DescribeConfigsRequest) -> DescribeConfigsResponse:
    services = ctx.services
    cls = DescribeConfigsResponse
    result_cls = cls.DescribeConfigsResult
    entry_cls = result_cls.DescribeConfigsResourceResult
    authorization = _ConfigAuthorization(ctx, AclOperation.DESCRIBE_CONFIGS, [
        (r.resource_type, r.resource_name) for r in body.resources])
    results = []
    for r in body.resources:
        res = result_cls(error_code=Errors.NONE, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name, configs=[])
        if denied := authorization.denied(r.resource_type, r.resource_name):
            res.error_code, res.error_message = denied, DENIED_MESSAGE[denied]
        elif r.resource_type == TOPIC:
            info = services.metadata.topics.get(r.resource_name)
            if info is None:
                res.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                res.error_message = f"Topic {r.resource_name} does not exist"
            else:
                entries = services.topic_configs.describe(info.configs)
                res.configs = [entry_cls(name=k, value=v, read_only=False, config_source=src,
                                         is_default=src == SOURCE_DEFAULT, is_sensitive=False,
                                         synonyms=[])
                               for k, v, src in entries
                               if r.configuration_keys is None or k in r.configuration_keys]
        elif r.resource_type == BROKER:
            values = services.config.values
            # Kafka's rule: a password-type value (sasl.jaas.config with its users'
            # passwords, keystore passwords) is sensitive and never leaves the broker.
            res.configs = [entry_cls(name=k, value=None if v is None or sensitive
                                     else _fmt(v),
                                     read_only=True,
                                     config_source=SOURCE_STATIC_BROKER
                                     if k in services.config.originals else SOURCE_DEFAULT,
                                     is_default=k not in services.config.originals,
                                     is_sensitive=sensitive, synonyms=[])
                           for k, v in sorted(values.items())
                           if r.configuration_keys is None or k in r.configuration_keys
                           for sensitive in (BROKER_CONFIG.keys[k].type == "password",)]
        else:
            res.error_code = Errors.INVALID_REQUEST
            res.error_message = f"Unsupported resource type {r.resource_type}"
        results.append(res)
    return cls(throttle_time_ms=0, results=results)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(v)
    return str(v)


_Resource = (AlterConfigsRequest.AlterConfigsResource
             | IncrementalAlterConfigsRequest.AlterConfigsResource)


def _apply(ctx: RequestContext, name: str, new: dict[str, str],
           validate_only: bool) -> tuple[int, str | None]:
    try:
        ctx.services.admin_manager.alter_topic_configs(name, new, validate_only)
    except ConfigError as e:
        return Errors.INVALID_CONFIG, str(e)
    return Errors.NONE, None


def _check_resource(ctx: RequestContext, authorization: _ConfigAuthorization,
                    r: _Resource) -> tuple[int, str | None]:
    if denied := authorization.denied(r.resource_type, r.resource_name):
        return denied, None
    if r.resource_type == BROKER:
        return Errors.INVALID_REQUEST, "Dynamic broker configs are not supported by this broker"
    if r.resource_type != TOPIC:
        return Errors.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}"
    if r.resource_name not in ctx.services.metadata.topics:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist"
    return Errors.NONE, None


@handles(ApiKey.ALTER_CONFIGS)
async def handle_alter_configs(ctx: RequestContext, body: AlterConfigsRequest) -> AlterConfigsResponse:
    cls = AlterConfigsResponse
    # Kafka refuses a BROKER_LOGGER resource in the legacy API without authorizing it.
    authorization = _ConfigAuthorization(ctx, AclOperation.ALTER_CONFIGS, [
        (r.resource_type, r.resource_name) for r in body.resources],
        cluster_types=(BROKER, CLIENT_METRICS))
    out = []
    for r in body.resources:
        code, msg = _check_resource(ctx, authorization, r)
        if not code:
            new = {c.name: c.value for c in r.configs if c.value is not None}
            code, msg = _apply(ctx, r.resource_name, new, body.validate_only)
        out.append(cls.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=r.resource_type,
            resource_name=r.resource_name))
    return cls(throttle_time_ms=0, responses=out)


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle_incremental_alter_configs(ctx: RequestContext, body: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    cls = IncrementalAlterConfigsResponse
    authorization = _ConfigAuthorization(ctx, AclOperation.ALTER_CONFIGS, [
        (r.resource_type, r.resource_name) for r in body.resources])
    out = []
    for r in body.resources:
        code, msg = _check_resource(ctx, authorization, r)
        if not code:
            new = dict(ctx.services.metadata.topics[r.resource_name].configs)
            for c in r.configs:
                current = new.get(c.name, "")
                items = [x for x in current.split(",") if x]
                if c.config_operation == 0:
                    if c.value is None:
                        code, msg = Errors.INVALID_REQUEST, f"Null value for {c.name}"
                        break
                    new[c.name] = c.value
                elif c.config_operation == 1:
                    new.pop(c.name, None)
                elif c.config_operation in (2, 3) and c.value is not None:
                    change = [x for x in c.value.split(",") if x]
                    if c.config_operation == 2:
                        items += [x for x in change if x not in items]
                    else:
                        items = [x for x in items if x not in change]
                    new[c.name] = ",".join(items)
                else:
                    code, msg = Errors.INVALID_REQUEST, f"Bad operation {c.config_operation}"
                    break
            if not code:
                code, msg = _apply(ctx, r.resource_name, new, body.validate_only)
        out.append(cls.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=r.resource_type,
            resource_name=r.resource_name))
    return cls(throttle_time_ms=0, responses=out)


@handles(ApiKey.DELETE_RECORDS)
async def handle_delete_records(ctx: RequestContext, body: DeleteRecordsRequest) -> DeleteRecordsResponse:
    rm = ctx.services.replica_manager
    cls = DeleteRecordsResponse
    topic_cls = cls.DeleteRecordsTopicResult
    deletable = ctx.authorized_names(AclOperation.DELETE, ResourceType.TOPIC,
                                     [t.name for t in body.topics])
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            code, low = (rm.delete_records(t.name, p.partition_index, p.offset)
                         if t.name in deletable else (Errors.TOPIC_AUTHORIZATION_FAILED, -1))
            parts.append(topic_cls.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(topic_cls(name=t.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)
