"""Client quota management (KIP-546): the bodies of
``KafkaAdminClient.describe_client_quotas`` and ``alter_client_quotas`` (Java
``describeClientQuotas`` / ``alterClientQuotas``), over ``client_quota``'s values.

Each call is one request to any broker (the least loaded): in a ZooKeeper cluster every
broker reads and writes the same znodes.

* DescribeClientQuotas: the entities matching the filter with their quota values
  (entity -> key -> value), or the broker's error raised (INVALID_REQUEST for a bad
  filter, CLUSTER_AUTHORIZATION_FAILED without DescribeConfigs on the Cluster).
* AlterClientQuotas: one result per distinct entity, in the request's order; a broker
  error fails only its entity (INVALID_REQUEST naming why, CLUSTER_AUTHORIZATION_FAILED
  without AlterConfigs on the Cluster).  An entity given twice is sent once, with the
  ops of both (Java keys the request by entity too).  Answers are matched to entities by
  the entity the broker names.
"""

from __future__ import annotations

from collections.abc import Iterable

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.client_quota import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaOp,
)
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.common.errors import KafkaError, for_code
from millrace.protocol import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

DESCRIBING, ALTERING = "describing client quotas", "client quota entity"


def describe_client_quotas(net: AdminNetwork, flt: ClientQuotaFilter, deadline_ms: int
                           ) -> dict[ClientQuotaEntity, dict[str, float]]:
    component = DescribeClientQuotasRequest.ComponentData
    body = DescribeClientQuotasRequest(strict=flt.strict, components=[
        component(entity_type=c.entity_type, match_type=c.match_type, match=c.match)
        for c in flt.components])
    response: DescribeClientQuotasResponse
    response, _ = net.send(body, deadline_ms)
    if response.error_code:
        raise for_code(response.error_code)(response.error_message or DESCRIBING)
    return {ClientQuotaEntity({e.entity_type: e.entity_name for e in entry.entity}):
            {v.key: v.value for v in entry.values} for entry in response.entries or ()}


def alter_client_quotas(net: AdminNetwork, entries: Iterable[ClientQuotaAlteration],
                        validate_only: bool, deadline_ms: int
                        ) -> AdminResult[ClientQuotaEntity, None]:
    ops: dict[ClientQuotaEntity, list[ClientQuotaOp]] = {}
    for alteration in entries:
        ops.setdefault(alteration.entity, []).extend(alteration.ops)
    result: AdminResult[ClientQuotaEntity, None] = AdminResult()
    if not ops:
        return result
    entry = AlterClientQuotasRequest.EntryData
    body = AlterClientQuotasRequest(validate_only=validate_only, entries=[entry(
        entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[entry.OpData(key=o.key, value=0.0 if o.value is None else float(o.value),
                          remove=o.value is None) for o in entity_ops])
        for entity, entity_ops in ops.items()])
    try:
        response: AlterClientQuotasResponse
        response, _ = net.send(body, deadline_ms)
    except KafkaError as e:
        for entity in ops:
            result.set_error(entity, e)
        return result
    answered: dict[ClientQuotaEntity, BaseException | None] = {}
    for r in response.entries:
        entity = ClientQuotaEntity({e.entity_type: e.entity_name for e in r.entity})
        answered[entity] = (kafka_error(r.error_code, r.error_message, ALTERING, entity)
                            if r.error_code else None)
    for entity in ops:
        if entity not in answered:
            result.set_error(entity, KafkaError(
                f"{ALTERING} '{entity}': the broker did not answer for this entity"))
        elif (error := answered[entity]) is not None:
            result.set_error(entity, error)
        else:
            result.set_value(entity, None)
    return result
