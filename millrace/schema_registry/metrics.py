"""``RegistryMetrics``: the registry's ``/metrics`` in the Prometheus text format
(prometheus-client), under Confluent's JMX names in Prometheus form where one exists
(``kafka_schema_registry_registered_count``, ``..._master_slave_role``) and millrace's own
for the rest:

- ``kafka_schema_registry_registered_count{schema_type}``: live schema versions by type;
- ``kafka_schema_registry_subjects``: live subjects;
- ``kafka_schema_registry_master_slave_role``: 1 on the leader, 0 elsewhere;
- ``kafka_schema_registry_store_applied_offset``: the last ``_schemas`` record applied;
- ``kafka_schema_registry_store_skipped_total``: records that did not parse;
- ``kafka_schema_registry_requests_total`` and ``..._request_errors_total{error_code}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from millrace.schema_registry.rest import RestApp
    from millrace.schema_registry.server import SchemaRegistryServer


class RegistryMetrics:
    def __init__(self, server: SchemaRegistryServer) -> None:
        self.server = server
        self.app: RestApp | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Any]:
        store = self.server.store
        with store.lock:
            live = [v for vs in store.subjects.values() for v in vs.values() if not v.deleted]
            subjects = len({v.subject for v in live})
            applied, skipped = store.applied_offset, store.skipped
        by_type = GaugeMetricFamily("kafka_schema_registry_registered_count",
                                    "Live schema versions by schema type",
                                    labels=["schema_type"])
        for schema_type in ("AVRO", "JSON", "PROTOBUF"):
            by_type.add_metric([schema_type],
                               sum(1 for v in live if v.schema.schema_type == schema_type))
        yield by_type
        yield GaugeMetricFamily("kafka_schema_registry_subjects", "Live subjects",
                                value=subjects)
        elector = self.server.elector
        yield GaugeMetricFamily("kafka_schema_registry_master_slave_role",
                                "1 when this instance is the leader (the writer)",
                                value=1 if elector is not None and elector.is_leader else 0)
        yield GaugeMetricFamily("kafka_schema_registry_store_applied_offset",
                                "The offset of the last _schemas record applied",
                                value=applied)
        yield CounterMetricFamily("kafka_schema_registry_store_skipped",
                                  "_schemas records that did not parse", value=skipped)
        app = self.app
        yield CounterMetricFamily("kafka_schema_registry_requests", "HTTP requests served",
                                  value=app.requests if app else 0)
        errors = CounterMetricFamily("kafka_schema_registry_request_errors",
                                     "HTTP requests answered with an error",
                                     labels=["error_code"])
        for code, count in sorted((app.errors_by_code if app else {}).items()):
            errors.add_metric([str(code)], count)
        yield errors
