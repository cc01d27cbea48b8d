"""ConsumerConfig: Kafka's names and defaults, errors naming the key, cross-key rules;
KafkaConsumer's keyword mapping; deserializer and interceptor resolution."""

from __future__ import annotations

import json

import pytest

from millrace.client.consumer import ConsumerInterceptor, KafkaConsumer
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.consumer.deserialization import (
    FunctionDeserializer,
    IntegerDeserializer,
    StringDeserializer,
    resolve,
)
from millrace.common.errors import ConfigError

BOOT = {"bootstrap.servers": "localhost:9092"}


def test_defaults_are_kafkas() -> None:
    c = ConsumerConfig({**BOOT, "group.id": "g"})
    expected = {
        "fetch.min.bytes": 1, "fetch.max.wait.ms": 500, "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 1048576, "max.poll.records": 500,
        "max.poll.interval.ms": 300000, "session.timeout.ms": 45000,
        "heartbeat.interval.ms": 3000, "enable.auto.commit": True,
        "auto.commit.interval.ms": 5000, "auto.offset.reset": "latest",
        "isolation.level": "read_uncommitted", "check.crcs": True,
        "partition.assignment.strategy": ["range", "cooperative-sticky"],
        "request.timeout.ms": 30000, "default.api.timeout.ms": 60000,
        "retry.backoff.ms": 100, "group.instance.id": None, "group.protocol": "classic",
    }
    assert {k: c[k] for k in expected} == expected


def test_properties_strings_are_converted() -> None:
    c = ConsumerConfig({**BOOT, "group.id": "g", "fetch.min.bytes": "1024",
                        "enable.auto.commit": "false", "isolation.level": "read_committed",
                        "partition.assignment.strategy": "roundrobin, sticky"})
    assert c["fetch.min.bytes"] == 1024 and c["enable.auto.commit"] is False
    assert c.isolation_level == 1
    assert c["partition.assignment.strategy"] == ["roundrobin", "sticky"]


@pytest.mark.parametrize("props, key", [
    ({"fetch.min.byte": 1}, "fetch.min.byte"),
    ({"max.poll.records": 0}, "max.poll.records"),
    ({"auto.offset.reset": "smallest"}, "auto.offset.reset"),
    ({"isolation.level": "serializable"}, "isolation.level"),
    ({"fetch.max.wait.ms": "soon"}, "fetch.max.wait.ms"),
    ({"group.protocol": "consumer"}, "group.protocol"),
    ({"heartbeat.interval.ms": 45000}, "heartbeat.interval.ms"),
    ({"group.id": ""}, "group.id"),
    ({"partition.assignment.strategy": []}, "partition.assignment.strategy"),
])
def test_bad_settings_name_the_key(props: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ConsumerConfig({**BOOT, "group.id": "g", **props})


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        ConsumerConfig({"group.id": "g"})


def test_no_group_means_no_auto_commit() -> None:
    assert ConsumerConfig(BOOT)["enable.auto.commit"] is False
    with pytest.raises(ConfigError, match=r"enable\.auto\.commit"):
        ConsumerConfig({**BOOT, "enable.auto.commit": True})
    with pytest.raises(ConfigError, match=r"group\.instance\.id"):
        ConsumerConfig({**BOOT, "group.instance.id": "i"})


def test_kafka_consumer_rejects_unknown_keyword_settings_before_connecting() -> None:
    with pytest.raises(ConfigError, match=r"fetch\.min\.bites"):
        KafkaConsumer("t", bootstrap_servers="localhost:9092", fetch_min_bites=1)
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        KafkaConsumer(config={**BOOT, "auto.offset.reset": "oldest"})
    with pytest.raises(ConfigError, match=r"interceptor\.classes"):
        KafkaConsumer(config={**BOOT, "interceptor.classes": [object()]})
    with pytest.raises(ConfigError, match=r"partition\.assignment\.strategy"):
        KafkaConsumer(config={**BOOT, "partition.assignment.strategy": "no.such.Assignor"})


def test_deserializers_resolve_like_the_serializers() -> None:
    assert isinstance(resolve("str", "value.deserializer", {}, False), StringDeserializer)
    java = "org.apache.kafka.common.serialization.IntegerDeserializer"
    assert isinstance(resolve(java, "value.deserializer", {}, False), IntegerDeserializer)
    fn = resolve(json.loads, "value.deserializer", {}, False)
    assert isinstance(fn, FunctionDeserializer)
    assert fn.deserialize("t", b'{"a": 1}') == {"a": 1}
    assert fn.deserialize("t", None) is None
    with pytest.raises(ConfigError, match=r"key\.deserializer"):
        resolve("no.such.Deserializer", "key.deserializer", {}, True)


def test_interceptor_chain_survives_a_failing_interceptor() -> None:
    from millrace.client.consumer.consumer_record import ConsumerRecords
    from millrace.client.consumer.interceptor import ConsumerInterceptors

    class Boom(ConsumerInterceptor):
        def on_consume(self, records: ConsumerRecords) -> ConsumerRecords:  # type: ignore[type-arg]
            raise RuntimeError("boom")

    class Count(ConsumerInterceptor):
        seen = 0

        def on_consume(self, records: ConsumerRecords) -> ConsumerRecords:  # type: ignore[type-arg]
            Count.seen += len(records)
            return records

    records: ConsumerRecords = ConsumerRecords()  # type: ignore[type-arg]
    assert ConsumerInterceptors([Boom(), Count()]).on_consume(records) is records
    assert Count.seen == 0
