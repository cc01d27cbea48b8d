"""The settings the three clients share: declared once (CommonClientConfigs), read the
same by each client, with Kafka's defaults and the one default Kafka's producer changes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from millrace.client.admin import AdminClientConfig
from millrace.client.common_client_configs import (
    COMMON_CLIENT_CONFIGS,
    DEFAULT_API_TIMEOUT_CONFIGS,
    METRICS_CONFIGS,
)
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.producer.config import ProducerConfig
from millrace.common.config import ConfigDef, at_least
from millrace.common.errors import ConfigError

BOOT = {"bootstrap.servers": "localhost:9092"}
CLIENTS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "producer": ProducerConfig, "consumer": ConsumerConfig, "admin": AdminClientConfig}
KAFKA_DEFAULTS = {
    "client.id": "", "request.timeout.ms": 30000, "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000, "metadata.max.age.ms": 300000,
    "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 1000,
    "socket.connection.setup.timeout.ms": 10000,
    "socket.connection.setup.timeout.max.ms": 30000, "send.buffer.bytes": 131072,
}


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_has_kafkas_common_defaults(client: str) -> None:
    values = CLIENTS[client](BOOT).values
    assert {k: values[k] for k in KAFKA_DEFAULTS} == KAFKA_DEFAULTS
    assert values["bootstrap.servers"] == ["localhost:9092"]
    assert values["receive.buffer.bytes"] == (32768 if client == "producer" else 65536)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("key, bad", [
    ("request.timeout.ms", -1), ("retry.backoff.ms", "soon"), ("send.buffer.bytes", -2),
    ("socket.connection.setup.timeout.ms", -1), ("receive.buffer.bytes", -2)])
def test_every_client_refuses_a_bad_common_value_naming_the_key(client: str, key: str,
                                                                 bad: object) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        CLIENTS[client]({**BOOT, key: bad})


def test_the_optional_tables_go_to_the_clients_that_read_them() -> None:
    producer, consumer, admin = (CLIENTS[c](BOOT).values for c in CLIENTS)
    for key in METRICS_CONFIGS.keys:
        assert key in producer and key in consumer and key not in admin
    for key in DEFAULT_API_TIMEOUT_CONFIGS.keys:
        assert key not in producer and consumer[key] == admin[key] == 60000


@pytest.mark.parametrize("client", ["producer", "consumer"])
def test_a_max_retry_backoff_below_the_backoff_is_raised_to_it(client: str) -> None:
    values = CLIENTS[client]({**BOOT, "retry.backoff.ms": 2000}).values
    assert values["retry.backoff.max.ms"] == 2000


def test_override_default_keeps_the_included_key_but_not_the_shared_default() -> None:
    table = ConfigDef().include(COMMON_CLIENT_CONFIGS).override_default(
        "receive.buffer.bytes", 1024)
    assert table.parse(BOOT)["receive.buffer.bytes"] == 1024
    assert COMMON_CLIENT_CONFIGS.parse(BOOT)["receive.buffer.bytes"] == 65536
    with pytest.raises(ConfigError, match=r"receive\.buffer\.bytes"):
        table.parse({**BOOT, "receive.buffer.bytes": -2})


def test_a_later_define_replaces_an_included_key_in_place() -> None:
    shared = ConfigDef().define("a", "int", 1).define("b", "int", 2)
    table = ConfigDef().include(shared).define("a", "int", 5, at_least(5)).define("c", "int", 3)
    assert list(table.keys) == ["a", "b", "c"]
    assert table.parse({}) == {"a": 5, "b": 2, "c": 3}
    assert shared.parse({}) == {"a": 1, "b": 2}
