"""The admin client's configuration: Kafka's names and defaults (Java ``AdminClientConfig``).

``AdminClientConfig(props)`` validates a ``{name: value}`` mapping (strings as in a
properties file, or typed values) and raises ``ConfigError`` naming the key for unknown
keys and bad values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.common.config import ConfigDef, at_least

ADMIN_CONFIG = (
    ConfigDef()
    .define("bootstrap.servers", "list", doc="host:port pairs used to find the cluster")
    .define("client.id", "string", "", doc="an id sent with every request")
    .define("request.timeout.ms", "int", 30000, at_least(0),
            doc="how long one request may wait for its answer")
    .define("default.api.timeout.ms", "int", 60000, at_least(0),
            doc="how long one admin operation may take, retries included")
    .define("retry.backoff.ms", "long", 100, at_least(0),
            doc="pause before retrying a failed request")
    .define("retry.backoff.max.ms", "long", 1000, at_least(0))
    .define("metadata.max.age.ms", "long", 300000, at_least(0),
            doc="refresh the broker list at least this often")
    .define("reconnect.backoff.ms", "long", 50, at_least(0))
    .define("reconnect.backoff.max.ms", "long", 1000, at_least(0))
    .define("socket.connection.setup.timeout.ms", "long", 10000, at_least(0))
    .define("socket.connection.setup.timeout.max.ms", "long", 30000, at_least(0))
    .define("send.buffer.bytes", "int", 131072, at_least(-1))
    .define("receive.buffer.bytes", "int", 65536, at_least(-1))
)


class AdminClientConfig:
    """Validated admin settings: ``config["request.timeout.ms"]`` and so on."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.values: dict[str, Any] = ADMIN_CONFIG.parse(props)
        self.originals = dict(props)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __repr__(self) -> str:
        return f"AdminClientConfig({self.values!r})"
