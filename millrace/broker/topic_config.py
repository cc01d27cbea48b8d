"""``TopicConfigs``: a topic's effective log config = its overrides over the broker defaults.

Kafka's ``LogConfig.fromProps(defaults, overrides)``: the broker's ``log.*`` settings give
the defaults (``KafkaConfig.default_topic_config``), a topic's overrides (from the
metadata store) win.  Validation uses the log's own config table, so a bad override is
refused with the same message whether it arrives with CreateTopics or AlterConfigs.
"""

from __future__ import annotations

from millrace.broker.config import KafkaConfig
from millrace.storage import LogConfig

SOURCE_TOPIC, SOURCE_DEFAULT = 1, 5  # DescribeConfigs config_source values


class TopicConfigs:
    def __init__(self, config: KafkaConfig) -> None:
        self._config = config

    def props(self, overrides: dict[str, str]) -> dict[str, str]:
        props = self._config.default_topic_config()
        props.update(overrides)
        return props

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_props(self.props(overrides))

    def validate(self, overrides: dict[str, str]) -> None:
        """Raise ConfigError naming the key when an override is unknown or bad."""
        LogConfig.from_props(self.props(overrides))

    def describe(self, overrides: dict[str, str]) -> list[tuple[str, str, int]]:
        """(name, value, source) for every topic config; source 1 = topic, 5 = broker."""
        merged = self.props(overrides)
        out = []
        for name in sorted(LogConfig.names()):
            value = merged.get(name, LogConfig.default_of(name))
            out.append((name, str(value), SOURCE_TOPIC if name in overrides else SOURCE_DEFAULT))
        return out
