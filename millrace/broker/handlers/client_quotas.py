"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (Kafka's
``KafkaApis.handleDescribeClientQuotasRequest`` / ``handleAlterClientQuotasRequest`` in
ZooKeeper mode, over ``services.quota_store``; the rules are ``quota.quota_admin``'s).

DescribeClientQuotas answers the entities with quotas that the filter matches, read from
the store (ZooKeeper in a cluster, so a change made through any broker shows at once), or
one top-level error with null entries: INVALID_REQUEST / UNSUPPORTED_VERSION for a bad
filter.  AlterClientQuotas answers one result per entry, naming its entity: an invalid
entity or operation is INVALID_REQUEST for that entry alone, the others are applied
(``validate_only``: checked, not written).  A write is published to this broker's quota
watchers at once; the other brokers get it through the config change notification.
Entities are users, client ids and both, and IP addresses (``ip``, KIP-612:
``connection_creation_rate``, enforced at accept by the connection quotas).

Authorization: DescribeClientQuotas needs DescribeConfigs on the Cluster and
AlterClientQuotas AlterConfigs on it, checked before the request is looked at; without,
CLUSTER_AUTHORIZATION_FAILED (31) in every error slot -- Describe's one error (null
entries), each Alter entry's (nothing written).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.quota.quota_admin import (
    Component,
    QuotaRequestError,
    describe,
    parse_entity,
    parse_filter,
    parse_ops,
    wire_entity,
)
from millrace.broker.quota.quota_store import QuotaStore
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from millrace.security.acl import AclOperation

log = logging.getLogger(__name__)
T = TypeVar("T")

CLUSTER_DENIED = "Cluster authorization failed."


async def _call(store: QuotaStore, fn: Callable[[], T]) -> T:
    if store.blocking:
        return await asyncio.get_running_loop().run_in_executor(None, fn)
    return fn()


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
async def handle_describe_client_quotas(ctx: RequestContext, body: DescribeClientQuotasRequest
                                        ) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=CLUSTER_DENIED, entries=None)
    try:
        flt = parse_filter((Component(c.entity_type, c.match_type, c.match)
                            for c in body.components), body.strict)
    except QuotaRequestError as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=e.error,
                                            error_message=e.message, entries=None)
    store = ctx.services.quota_store
    quotas = await _call(store, store.read_all)
    entry = DescribeClientQuotasResponse.EntryData
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=Errors.NONE, error_message=None, entries=[entry(
            entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in
                    wire_entity(entity)],
            values=[entry.ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in describe(quotas, flt)])


@handles(ApiKey.ALTER_CLIENT_QUOTAS)
async def handle_alter_client_quotas(ctx: RequestContext, body: AlterClientQuotasRequest
                                     ) -> AlterClientQuotasResponse:
    result = AlterClientQuotasResponse.EntryData

    def answer(entry: AlterClientQuotasRequest.EntryData, error: int, message: str | None
               ) -> AlterClientQuotasResponse.EntryData:
        return result(error_code=error, error_message=message, entity=[
            result.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity])

    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
            answer(entry, Errors.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
            for entry in body.entries])
    store = ctx.services.quota_store
    results = []
    for entry in body.entries:
        try:
            entity = parse_entity((e.entity_type, e.entity_name) for e in entry.entity)
            ops = parse_ops(((o.key, o.value, o.remove) for o in entry.ops), entity)
        except QuotaRequestError as e:
            log.info("Invalid client quota alteration %s: %s", entry, e.message)
            results.append(answer(entry, e.error, e.message))
            continue
        if body.validate_only or not ops:
            results.append(answer(entry, Errors.NONE, None))
            continue
        try:
            values = await _call(store, partial(store.alter, entity, ops))
        except Exception as e:
            log.warning("Error while updating the client quotas of %s", entity, exc_info=True)
            results.append(answer(entry, Errors.UNKNOWN_SERVER_ERROR, str(e) or None))
            continue
        store.publish(entity, values)  # this broker's watchers hear of it now
        results.append(answer(entry, Errors.NONE, None))
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=results)

