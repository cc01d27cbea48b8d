"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DeleteRecords (21).

Resource types: 2 = topic, 4 = broker (read-only here: dynamic broker configs are a
later milestone).  Topic overrides are validated with the log's own config table, then
persisted in the metadata store and applied to the live logs, so they survive restarts.
AlterConfigs replaces the whole override set; IncrementalAlterConfigs applies SET (0),
DELETE (1), APPEND (2) and SUBTRACT (3) to list-valued keys.
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

TOPIC, BROKER = 2, 4
SOURCE_STATIC_BROKER = 4


@handles(ApiKey.DESCRIBE_CONFIGS)
async def handle_describe_configs(ctx: RequestContext, body: DescribeConfigsRequest) -> DescribeConfigsResponse:
    services = ctx.services
    cls = DescribeConfigsResponse
    result_cls = cls.DescribeConfigsResult
    entry_cls = result_cls.DescribeConfigsResourceResult
    results = []
    for r in body.resources:
        res = result_cls(error_code=Errors.NONE, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name, configs=[])
        if r.resource_type == TOPIC:
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


def _check_resource(ctx: RequestContext, r: _Resource) -> tuple[int, str | None]:
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
    out = []
    for r in body.resources:
        code, msg = _check_resource(ctx, r)
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
    out = []
    for r in body.resources:
        code, msg = _check_resource(ctx, r)
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
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            code, low = rm.delete_records(t.name, p.partition_index, p.offset)
            parts.append(topic_cls.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(topic_cls(name=t.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)
