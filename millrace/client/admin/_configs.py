"""DescribeConfigs and IncrementalAlterConfigs (the bodies of ``KafkaAdminClient``'s
``describe_configs`` and ``incremental_alter_configs``).

A broker's own configuration is answered by that broker, so resources of type BROKER are
sent to the node whose id is the resource name (an empty name -- the cluster-wide
default -- and topic resources go to any node).  One request per destination node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.client.admin.types import (
    AlterConfigOp,
    Config,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
)
from millrace.client.cluster import Node
from millrace.common.errors import Errors, KafkaError, for_code
from millrace.protocol import DescribeConfigsRequest, IncrementalAlterConfigsRequest

V = TypeVar("V")


def _route(net: AdminNetwork, resources: Iterable[ConfigResource], deadline_ms: int,
           result: AdminResult[ConfigResource, Any]) -> dict[Node | None, list[ConfigResource]]:
    """Destination node (None = any) of each resource; unknown broker ids fail at once."""
    routes: dict[Node | None, list[ConfigResource]] = {}
    for resource in resources:
        node: Node | None = None
        if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) \
                and resource.name:
            cluster = net.cluster(deadline_ms)
            node = (cluster.node_by_id(int(resource.name))
                    if resource.name.lstrip("-").isdigit() else None)
            if node is None:
                known = ", ".join(str(n.id) for n in cluster.nodes)
                result.set_error(resource, for_code(Errors.BROKER_NOT_AVAILABLE)(
                    f"broker '{resource.name}' is not in the cluster (brokers: {known})"))
                continue
        routes.setdefault(node, []).append(resource)
    return routes


def _collect(resources: list[ConfigResource], answers: Iterable[Any],
             value: Callable[[Any], V], result: AdminResult[ConfigResource, V]) -> None:
    by_key = {(a.resource_type, a.resource_name): a for a in answers}
    for resource in resources:
        a = by_key.get((int(resource.type), resource.name))
        if a is None:
            result.set_error(resource, KafkaError(f"{resource}: no answer from the broker"))
        elif a.error_code:
            result.set_error(resource, kafka_error(a.error_code, a.error_message,
                                                   resource.type.name.lower(), resource.name))
        else:
            result.set_value(resource, value(a))


def _config(answer: Any) -> Config:
    return Config([
        ConfigEntry(c.name, c.value, ConfigSource.of(c.config_source), c.is_sensitive,
                    c.read_only,
                    [ConfigSynonym(s.name, s.value, ConfigSource.of(s.source))
                     for s in c.synonyms],
                    c.documentation or None)
        for c in answer.configs])


def describe_configs(net: AdminNetwork, resources: Iterable[ConfigResource],
                     include_synonyms: bool, include_documentation: bool, deadline_ms: int
                     ) -> AdminResult[ConfigResource, Config]:
    ordered = list(dict.fromkeys(resources))
    result: AdminResult[ConfigResource, Config] = AdminResult()
    outcome: AdminResult[ConfigResource, Config] = AdminResult()
    for node, batch in _route(net, ordered, deadline_ms, outcome).items():
        body = DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=int(r.type), resource_name=r.name, configuration_keys=None)
                for r in batch],
            include_synonyms=include_synonyms, include_documentation=include_documentation)
        response, _ = net.send(body, deadline_ms, node)
        _collect(batch, response.results, _config, outcome)
    for resource in ordered:
        result[resource] = outcome[resource]
    return result


def incremental_alter_configs(net: AdminNetwork,
                              changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
                              validate_only: bool, deadline_ms: int
                              ) -> AdminResult[ConfigResource, None]:
    ops = {resource: list(items) for resource, items in changes.items()}
    result: AdminResult[ConfigResource, None] = AdminResult()
    outcome: AdminResult[ConfigResource, None] = AdminResult()
    cls = IncrementalAlterConfigsRequest.AlterConfigsResource
    for node, batch in _route(net, ops, deadline_ms, outcome).items():
        body = IncrementalAlterConfigsRequest(
            resources=[cls(resource_type=int(r.type), resource_name=r.name, configs=[
                cls.AlterableConfig(name=op.name, config_operation=int(op.op_type),
                                    value=op.value) for op in ops[r]])
                for r in batch],
            validate_only=validate_only)
        response, _ = net.send(body, deadline_ms, node)
        _collect(batch, response.responses, lambda _: None, outcome)
    for resource in ops:
        result[resource] = outcome[resource]
    return result
