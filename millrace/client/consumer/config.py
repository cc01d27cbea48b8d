"""The consumer's configuration: Kafka's names, defaults and rules (Java ``ConsumerConfig``).

``ConsumerConfig(props)`` validates a ``{name: value}`` mapping (strings as in a
properties file, or typed values) and raises ``ConfigError`` naming the key for unknown
keys and bad values.  Class-valued keys (``key.deserializer``, ``value.deserializer``,
``interceptor.classes``, ``partition.assignment.strategy``) also take Python objects.

Cross-key rules, as in Java:

* without ``group.id`` there is no group: ``enable.auto.commit`` defaults to false (true
  set explicitly is an error), and ``group.instance.id`` is refused;
* ``heartbeat.interval.ms`` must be lower than ``session.timeout.ms``;
* ``group.protocol`` is ``classic`` (KIP-848's ``consumer`` protocol is not implemented).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.client.common_client_configs import (
    COMMON_CLIENT_CONFIGS,
    DEFAULT_API_TIMEOUT_CONFIGS,
    METRICS_CONFIGS,
    post_process_retry_backoff,
)
from millrace.client.schema_registry.config import is_serde_config
from millrace.common.config import ConfigDef, at_least, one_of
from millrace.common.errors import ConfigError

CLASS_KEYS = ("key.deserializer", "value.deserializer", "interceptor.classes",
              "partition.assignment.strategy", "metric.reporters")
DEFAULT_ASSIGNORS = ["range", "cooperative-sticky"]

CONSUMER_CONFIG = (
    ConfigDef()
    .include(COMMON_CLIENT_CONFIGS, METRICS_CONFIGS, DEFAULT_API_TIMEOUT_CONFIGS)
    .define("client.rack", "string", "", doc="rack of this consumer (sent in fetches)")
    .define("group.id", "string", None, nullable=True,
            doc="the consumer group; None = no group (no commits, assign() only)")
    .define("group.instance.id", "string", None, nullable=True,
            doc="a static member id (KIP-345): a restart within the session keeps the "
                "assignment")
    .define("group.protocol", "string", "classic", one_of("classic"))
    .define("session.timeout.ms", "int", 45000, at_least(1))
    .define("heartbeat.interval.ms", "int", 3000, at_least(1))
    .define("max.poll.interval.ms", "int", 300000, at_least(1))
    .define("max.poll.records", "int", 500, at_least(1))
    .define("enable.auto.commit", "boolean", True)
    .define("auto.commit.interval.ms", "int", 5000, at_least(0))
    .define("auto.offset.reset", "string", "latest", one_of("earliest", "latest", "none"))
    .define("isolation.level", "string", "read_uncommitted",
            one_of("read_uncommitted", "read_committed"))
    .define("fetch.min.bytes", "int", 1, at_least(0))
    .define("fetch.max.bytes", "int", 52428800, at_least(0))
    .define("fetch.max.wait.ms", "int", 500, at_least(0))
    .define("max.partition.fetch.bytes", "int", 1048576, at_least(0))
    .define("check.crcs", "boolean", True)
    .define("exclude.internal.topics", "boolean", True)
    .define("allow.auto.create.topics", "boolean", True)
    .define("connections.max.idle.ms", "long", 540000)
    .define("internal.leave.group.on.close", "boolean", True)
)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


class ConsumerConfig:
    """Validated consumer settings: ``config["fetch.min.bytes"]`` etc."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        props = dict(props)
        self.originals = props
        # the schema-registry serializers' own keys (schema.registry.url, ...) pass through
        # to their configure(); a misspelt one is still an error (is_serde_config)
        serde = {k: v for k, v in props.items() if is_serde_config(k)}
        self.values = CONSUMER_CONFIG.parse(props, ignore=(*CLASS_KEYS, *serde))
        self.values.update(serde)
        v = self.values
        v["key.deserializer"] = props.get("key.deserializer")
        v["value.deserializer"] = props.get("value.deserializer")
        v["interceptor.classes"] = _as_list(props.get("interceptor.classes"))
        v["metric.reporters"] = _as_list(props.get("metric.reporters"))
        strategies = _as_list(props.get("partition.assignment.strategy", DEFAULT_ASSIGNORS))
        if not strategies:
            raise ConfigError("Invalid value [] for configuration "
                              "partition.assignment.strategy: at least one assignor is needed")
        v["partition.assignment.strategy"] = strategies
        self._post_process()

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def explicitly_set(self, name: str) -> bool:
        return name in self.originals

    @property
    def isolation_level(self) -> int:
        return 1 if self.values["isolation.level"] == "read_committed" else 0

    def _post_process(self) -> None:
        v = self.values
        if not v["bootstrap.servers"]:
            raise ConfigError("Missing required configuration bootstrap.servers which has "
                              "no default value")
        if v["group.id"] is None:
            if v["enable.auto.commit"] and self.explicitly_set("enable.auto.commit"):
                raise ConfigError("Invalid value true for configuration enable.auto.commit: "
                                  "enable.auto.commit cannot be set to true when default "
                                  "group id (null) is used.")
            v["enable.auto.commit"] = False
            if v["group.instance.id"] is not None:
                raise ConfigError("Invalid value for configuration group.instance.id: a "
                                  "static member needs a group.id")
        elif not v["group.id"].strip():
            raise ConfigError("Invalid value '' for configuration group.id: the group id "
                              "must not be empty (use None for no group)")
        if v["heartbeat.interval.ms"] >= v["session.timeout.ms"]:
            raise ConfigError(f"Invalid value {v['heartbeat.interval.ms']} for configuration "
                              "heartbeat.interval.ms: it must be lower than "
                              f"session.timeout.ms ({v['session.timeout.ms']})")
        post_process_retry_backoff(v)
