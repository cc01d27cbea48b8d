"""Listener settings as Kafka reads them: named listeners and the protocol map,
advertised listeners, the inter-broker listener, listener- and mechanism-prefixed keys,
and the start-up errors that name the fault."""

from __future__ import annotations

import pytest

from millrace.broker.config import KafkaConfig
from millrace.common.errors import ConfigError

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


def config(**props: str) -> KafkaConfig:
    return KafkaConfig({k.replace("_", "."): v for k, v in props.items()})


def test_plaintext_stays_the_default() -> None:
    c = KafkaConfig({})
    assert [(ls.name, ls.protocol) for ls in c.listeners] == [("PLAINTEXT", "PLAINTEXT")]
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_named_listeners_take_their_protocol_from_the_map() -> None:
    c = KafkaConfig({
        "listeners": "CLIENT://:9093,REPLICATION://:9094",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:ssl",
        "inter.broker.listener.name": "replication",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    assert [(ls.name, ls.protocol) for ls in c.listeners] == [
        ("CLIENT", "SASL_SSL"), ("REPLICATION", "SSL")]
    assert c.inter_broker_listener_name == "REPLICATION"
    assert c.inter_broker_listener.port == 9094


def test_a_listener_missing_from_the_map_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="CLIENT"):
        KafkaConfig({"listeners": "CLIENT://:9093"})


def test_inter_broker_listener_must_be_advertised() -> None:
    with pytest.raises(ConfigError, match="inter-broker listener PLAINTEXT"):
        KafkaConfig({"listeners": "SSL://:9093"})
    c = KafkaConfig({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL"})
    assert c.inter_broker_listener_name == "SSL"


def test_inter_broker_name_and_protocol_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="Only one of"):
        KafkaConfig({"listeners": "PLAINTEXT://:9092",
                     "inter.broker.listener.name": "PLAINTEXT",
                     "security.inter.broker.protocol": "PLAINTEXT"})


def test_advertised_listeners_must_be_listeners_and_not_wildcards() -> None:
    with pytest.raises(ConfigError, match="SSL is not one of the listeners"):
        KafkaConfig({"listeners": "PLAINTEXT://:9092",
                     "advertised.listeners": "PLAINTEXT://h:9092,SSL://h:9093"})
    with pytest.raises(ConfigError, match="wildcard"):
        KafkaConfig({"listeners": "PLAINTEXT://:9092",
                     "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_duplicate_listener_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="once"):
        KafkaConfig({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"})


def test_bad_protocol_map_entries_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
        KafkaConfig({"listener.security.protocol.map": "CLIENT:TLS"})


def test_listener_and_mechanism_prefixes_override_the_plain_key() -> None:
    c = KafkaConfig({
        "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.jaas.config": "broker-wide required;",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "connections.max.reauth.ms": "1000",
        "listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms": "5000"})
    assert c.listener_value("SASL_SSL", "sasl.enabled.mechanisms") == [
        "PLAIN", "SCRAM-SHA-256"]
    assert c.listener_value("PLAINTEXT", "sasl.enabled.mechanisms") == ["PLAIN"]
    assert c.listener_value("SASL_SSL", "sasl.jaas.config", "PLAIN") == JAAS
    assert c.listener_value("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") == \
        "broker-wide required;"
    assert c.listener_value("SASL_SSL", "connections.max.reauth.ms", "SCRAM-SHA-256") == 5000
    assert c.listener_value("SASL_SSL", "connections.max.reauth.ms", "PLAIN") == 1000
    assert c.listener_has("SASL_SSL", "ssl.client.auth")
    assert not c.listener_has("PLAINTEXT", "ssl.client.auth")


@pytest.mark.parametrize("key", [
    "listener.name.nosuch.ssl.client.auth",          # no such listener
    "listener.name.plaintext.ssl.no.such.key",       # no such key
    "listener.name.plaintext.plain.num.partitions",  # not a mechanism-scoped key
])
def test_unknown_prefixed_keys_are_refused(key: str) -> None:
    with pytest.raises(ConfigError, match="Unknown configuration key"):
        KafkaConfig({key: "1"})


def test_prefixed_values_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth"):
        KafkaConfig({"listener.name.plaintext.ssl.client.auth": "sometimes"})


def test_gssapi_on_a_sasl_listener_is_refused_clearly() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):
        KafkaConfig({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"})


def test_inter_broker_mechanism_must_be_enabled_on_that_listener() -> None:
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        KafkaConfig({"listeners": "SASL_SSL://:9093",
                     "security.inter.broker.protocol": "SASL_SSL",
                     "sasl.enabled.mechanisms": "PLAIN",
                     "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})


def test_a_dedicated_control_plane_listener_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match=r"control\.plane\.listener\.name is not supported"):
        KafkaConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                     "control.plane.listener.name": "CONTROLLER"})
