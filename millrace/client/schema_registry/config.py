"""The config names of the schema-registry client and serdes, with nothing heavy imported:
the producer's and consumer's config tables ask ``is_serde_config`` which keys to pass
through to their serializers (Java passes every key to ``configure``).

- ``SchemaRegistryClient``: ``CLIENT_CONFIGS`` (Confluent's names: ``url``, ``basic.auth.*``,
  ``ssl.*``, ``timeout``); in a Kafka client's configs they carry the prefix
  ``schema.registry.`` (``basic.auth.*`` may go without it, as in Java).
- Serializers: ``SERIALIZER_CONFIGS`` with their defaults; deserializers:
  ``DESERIALIZER_CONFIGS``; and the per-side and per-format keys of ``SERDE_KEYS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLIENT_CONFIGS = frozenset({
    "url", "basic.auth.credentials.source", "basic.auth.user.info", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "timeout",
})
REGISTRY_PREFIX = "schema.registry."
UNPREFIXED_CLIENT_CONFIGS = ("basic.auth.user.info", "basic.auth.credentials.source")

SERIALIZER_CONFIGS: dict[str, Any] = {
    "auto.register.schemas": True,
    "use.latest.version": False,
    "normalize.schemas": False,
    "subject.name.strategy": None,
}
DESERIALIZER_CONFIGS: dict[str, Any] = {
    "use.latest.version": False,
    "subject.name.strategy": None,
}
SERDE_KEYS = frozenset({
    "key.subject.name.strategy", "value.subject.name.strategy",
    "key.serializer.schema", "value.serializer.schema",
    "key.deserializer.schema", "value.deserializer.schema",
    "json.fail.invalid.schema", "skip.known.types",
    "specific.protobuf.key.type", "specific.protobuf.value.type",
})


def is_serde_config(name: str) -> bool:
    """Whether a producer/consumer config key belongs to the schema-registry serdes."""
    return (name.startswith(REGISTRY_PREFIX) or name in UNPREFIXED_CLIENT_CONFIGS
            or name in SERIALIZER_CONFIGS or name in SERDE_KEYS)


def registry_client_config(configs: Mapping[str, Any]) -> dict[str, Any]:
    """``SchemaRegistryClient``'s config from a Kafka client's (``schema.registry.url`` ->
    ``url``...)."""
    out: dict[str, Any] = {}
    for name, value in configs.items():
        if name.startswith(REGISTRY_PREFIX) and value is not None:
            out[name[len(REGISTRY_PREFIX):]] = value
    for name in UNPREFIXED_CLIENT_CONFIGS:
        if configs.get(name) is not None:
            out.setdefault(name, configs[name])
    return out  # SchemaRegistryClient rejects a name it does not know
