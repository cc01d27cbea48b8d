"""The admin client's configuration: Kafka's names and defaults (Java ``AdminClientConfig``).

``AdminClientConfig(props)`` validates a ``{name: value}`` mapping (strings as in a
properties file, or typed values) and raises ``ConfigError`` naming the key for unknown
keys and bad values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.client.common_client_configs import (
    COMMON_CLIENT_CONFIGS,
    DEFAULT_API_TIMEOUT_CONFIGS,
)
from millrace.common.config import ConfigDef

ADMIN_CONFIG = (
    ConfigDef()
    .include(COMMON_CLIENT_CONFIGS, DEFAULT_API_TIMEOUT_CONFIGS)
)


class AdminClientConfig:
    """Validated admin settings: ``config["request.timeout.ms"]`` and so on."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.values: dict[str, Any] = ADMIN_CONFIG.parse(props)
        self.originals = dict(props)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __repr__(self) -> str:
        return f"AdminClientConfig({ADMIN_CONFIG.redacted(self.values)!r})"
