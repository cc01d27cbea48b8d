"""The producer's configuration: Kafka's names, defaults and rules (Java ``ProducerConfig``).

``ProducerConfig(props)`` validates a ``{name: value}`` mapping (strings as in a
properties file, or typed values) and raises ``ConfigError`` naming the key for unknown
keys and bad values.  Class-valued keys (``key.serializer``, ``value.serializer``,
``partitioner.class``, ``interceptor.classes``) also take Python objects and classes.

Cross-key rules, as in Java:

* ``enable.idempotence`` (default true) needs ``acks=all``, ``retries > 0`` and
  ``max.in.flight.requests.per.connection <= 5``.  Set explicitly to true, a conflict is
  a ``ConfigError`` naming the offending key; left at its default, a conflicting
  setting quietly turns idempotence off.
* ``delivery.timeout.ms`` must be at least ``linger.ms + request.timeout.ms``; if it was
  not set explicitly it is raised to that sum instead.
* ``transactional.id`` (non-empty) makes the producer transactional; it needs
  idempotence, so ``enable.idempotence=false`` or a setting that turns idempotence off
  (``acks`` other than all, ``retries=0``, more than 5 requests in flight) is a
  ``ConfigError`` ("Cannot set a transactional.id without also enabling idempotence.").
  ``transaction.timeout.ms`` (default 60000) is sent with InitProducerId; the
  coordinator refuses values above its ``transaction.max.timeout.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from millrace.client.common_client_configs import (
    COMMON_CLIENT_CONFIGS,
    METRICS_CONFIGS,
    post_process_retry_backoff,
)
from millrace.client.schema_registry.config import is_serde_config
from millrace.common.config import INT_MAX, LONG_MAX, ConfigDef, at_least, between, one_of
from millrace.common.errors import ConfigError
from millrace.record import CompressionType

log = logging.getLogger(__name__)

CLASS_KEYS = ("key.serializer", "value.serializer", "partitioner.class", "interceptor.classes",
              "metric.reporters")

def _non_empty_string(name: str, value: Any) -> None:
    if value is not None and not str(value).strip():
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: String may "
                          "not be empty")


PRODUCER_CONFIG = (
    ConfigDef()
    .include(COMMON_CLIENT_CONFIGS, METRICS_CONFIGS)
    .override_default("receive.buffer.bytes", 32768)  # Kafka: 32 KiB, a producer mostly writes
    .define("acks", "string", "all", one_of("all", "-1", "0", "1"),
            doc="acknowledgements the leader must have before answering")
    .define("linger.ms", "long", 5, at_least(0), doc="how long a batch waits for more records")
    .define("batch.size", "int", 16384, at_least(0), doc="batch size in bytes per partition")
    .define("buffer.memory", "long", 33554432, at_least(0),
            doc="bytes of records waiting to be sent")
    .define("max.block.ms", "long", 60000, at_least(0),
            doc="how long send() and partitions_for() may block")
    .define("compression.type", "string", "none",
            one_of("none", "gzip", "snappy", "lz4", "zstd"), doc="codec for batches")
    .define("compression.gzip.level", "int", -1, between(-1, 9))
    .define("compression.lz4.level", "int", 9, between(1, 17))
    .define("compression.zstd.level", "int", 3, between(-131072, 22))
    .define("retries", "int", INT_MAX, at_least(0), doc="how often a failed batch is resent")
    .define("delivery.timeout.ms", "int", 120000, at_least(0),
            doc="upper bound on the time from send() to the outcome")
    .define("max.in.flight.requests.per.connection", "int", 5, at_least(1))
    .define("max.request.size", "int", 1048576, at_least(0))
    .define("enable.idempotence", "boolean", True)
    .define("transactional.id", "string", None, _non_empty_string, nullable=True,
            doc="makes the producer transactional; stable across restarts (fences zombies)")
    .define("transaction.timeout.ms", "int", 60000,
            doc="how long the coordinator waits for a transaction's end before aborting it")
    .define("metadata.max.idle.ms", "long", 300000, at_least(5000))
    .define("partitioner.ignore.keys", "boolean", False)
    .define("partitioner.adaptive.partitioning.enable", "boolean", True)
    .define("partitioner.availability.timeout.ms", "long", 0, at_least(0))
)


class ProducerConfig:
    """Validated producer settings: ``config["linger.ms"]`` etc., plus helpers."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        props = dict(props)
        self.originals = props
        # the schema-registry serializers' own keys (schema.registry.url, ...) pass through
        # to their configure(); a misspelt one is still an error (is_serde_config)
        serde = {k: v for k, v in props.items() if is_serde_config(k)}
        self.values = PRODUCER_CONFIG.parse(props, ignore=(*CLASS_KEYS, *serde))
        self.values.update(serde)
        for key in CLASS_KEYS:
            self.values[key] = props.get(key)
        if self.values["metric.reporters"] is None:
            self.values["metric.reporters"] = []
        self._post_process()

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def explicitly_set(self, name: str) -> bool:
        return name in self.originals

    @property
    def acks(self) -> int:
        acks = self.values["acks"]
        return -1 if acks in ("all", "-1") else int(acks)

    @property
    def compression(self) -> CompressionType:
        return CompressionType[self.values["compression.type"].upper()]

    @property
    def compression_level(self) -> int | None:
        codec = self.values["compression.type"]
        key = f"compression.{codec}.level"
        if codec in ("gzip", "lz4", "zstd") and self.explicitly_set(key):
            level: int = self.values[key]
            return None if level == -1 else level
        return None  # the codec's default (Kafka's defaults are the codecs' defaults)

    @property
    def idempotence(self) -> bool:
        return bool(self.values["enable.idempotence"])

    @property
    def transactional_id(self) -> str | None:
        value: str | None = self.values["transactional.id"]
        return value

    def _post_process(self) -> None:
        v = self.values
        self._idempotence_rules()
        if v["transactional.id"] is not None and not v["enable.idempotence"]:
            raise ConfigError("Cannot set a transactional.id without also enabling "
                              "idempotence.")
        linger_and_request = v["linger.ms"] + v["request.timeout.ms"]
        if v["delivery.timeout.ms"] < linger_and_request:
            if self.explicitly_set("delivery.timeout.ms"):
                raise ConfigError(
                    "delivery.timeout.ms should be equal to or larger than linger.ms + "
                    "request.timeout.ms")
            log.warning("delivery.timeout.ms raised to linger.ms + request.timeout.ms = %d",
                        linger_and_request)
            v["delivery.timeout.ms"] = min(linger_and_request, INT_MAX)
        post_process_retry_backoff(v)
        if v["linger.ms"] > LONG_MAX:  # pragma: no cover - validated as long
            raise ConfigError("linger.ms is too large")

    def _idempotence_rules(self) -> None:
        v = self.values
        explicit = self.explicitly_set("enable.idempotence")
        if not v["enable.idempotence"]:
            return
        conflicts: list[tuple[str, str]] = []
        if v["max.in.flight.requests.per.connection"] > 5:
            conflicts.append(("max.in.flight.requests.per.connection",
                              "Must set max.in.flight.requests.per.connection to at most 5 "
                              "when using the idempotent producer."))
        if v["retries"] == 0:
            conflicts.append(("retries", "Must set retries to non-zero when using the "
                                         "idempotent producer."))
        if self.acks != -1:
            conflicts.append(("acks", "Must set acks to all in order to use the idempotent "
                                      "producer. Otherwise we cannot guarantee idempotence."))
        if not conflicts:
            return
        if explicit:
            key, message = conflicts[0]
            raise ConfigError(f"Invalid value {v[key]} for configuration {key}: {message}")
        log.info("idempotence is disabled because %s conflicts with it",
                 ", ".join(k for k, _ in conflicts))
        v["enable.idempotence"] = False
