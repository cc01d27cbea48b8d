"""``kafka.*`` security options of format("millrace"): passed through to every client the
connector builds (consumers on the driver and executors, producers, the exactly-once
sink's admin client, the pipeline's reachability check), and never shown in a repr or an
error."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest

from millrace.common.errors import ConfigError
from millrace.spark.options import (
    HIDDEN,
    KafkaParams,
    SinkOptions,
    SourceOptions,
    admin_config,
    hide_secrets,
    is_secret,
    kafka_options,
    redact,
)

PASSWORD = "pa55-Wörd-s3cret"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="alice" password="{PASSWORD}";')
SECURED = {
    "kafka.bootstrap.servers": "broker:9093",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-512",
    "kafka.sasl.username": "alice",
    "kafka.sasl.password": PASSWORD,
    "kafka.ssl.ca.location": "/etc/millrace/ca.pem",
    "kafka.ssl.endpoint.identification.algorithm": "https",
}


def source(**options: str) -> SourceOptions:
    return SourceOptions.parse({**SECURED, "subscribe": "orders", **options}, streaming=True)


def test_every_kafka_option_becomes_the_consumers_setting() -> None:
    config = source().consumer_config("reader-1")
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["sasl.username"] == "alice" and config["sasl.password"] == PASSWORD
    assert config["ssl.ca.location"] == "/etc/millrace/ca.pem"
    assert config["ssl.endpoint.identification.algorithm"] == "https"
    assert config["bootstrap.servers"] == "broker:9093"
    # the connector still owns groups and resets, whatever else is passed
    assert config["group.id"] is None and config["enable.auto.commit"] is False
    assert type(config) is dict  # a plain dict for the client, not the hiding wrapper


def test_every_kafka_option_becomes_the_producers_setting() -> None:
    sink = SinkOptions.parse({**SECURED, "topic": "out", "kafka.ssl.key.password": "k3y",
                              "kafka.ssl.certificate.location": "/c.pem",
                              "kafka.ssl.key.location": "/k.pem"})
    config = sink.producer_config("writer-1")
    for name, value in SECURED.items():
        assert config[name.removeprefix("kafka.")] == value
    assert config["ssl.key.password"] == "k3y"
    assert config["ssl.certificate.location"] == "/c.pem" and config["acks"] == "all"


def test_java_style_jaas_config_and_librdkafka_mechanisms_pass() -> None:
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "b:1", "subscribe": "t",
                                "kafka.security.protocol": "SASL_PLAINTEXT",
                                "kafka.sasl.mechanisms": "PLAIN",
                                "kafka.sasl.jaas.config": JAAS}, streaming=False)
    config = opts.consumer_config("c")
    assert config["sasl.jaas.config"] == JAAS and config["sasl.mechanisms"] == "PLAIN"


def test_option_names_are_case_insensitive_values_are_not() -> None:
    opts = SourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "b:1", "subscribe": "t",
                                "Kafka.Security.Protocol": "SASL_SSL",
                                "kafka.SASL.Mechanism": "PLAIN",
                                "kafka.sasl.PASSWORD": "MiXeD"}, streaming=True)
    config = opts.consumer_config("c")
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.password"] == "MiXeD"


def test_options_travel_pickled_to_the_executors_intact() -> None:
    opts = source()
    back = pickle.loads(pickle.dumps(opts))
    assert back.consumer_config("x") == opts.consumer_config("x")
    assert isinstance(back.kafka_params, KafkaParams)


@pytest.mark.parametrize("name, value", [
    ("kafka.security.protocol", "SASL_TLS"),
    ("kafka.ssl.endpoint.identification.algorithm", "dns"),
])
def test_a_bad_security_value_is_refused_when_the_query_is_defined(name: str,
                                                                   value: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"option '{name}'")):
        source(**{name: value})


def test_refused_keys_stay_refused_with_security_set() -> None:
    with pytest.raises(ConfigError, match=re.escape("'kafka.group.id' is not supported")):
        source(**{"kafka.group.id": "g"})
    with pytest.raises(ConfigError, match=re.escape("'kafka.value.serializer' is not supported")):
        SinkOptions.parse({**SECURED, "kafka.value.serializer": "x"})


# ---------------------------------------------------------------------------- secrets
def test_reprs_hide_every_secret() -> None:
    opts = source(**{"kafka.sasl.jaas.config": JAAS, "kafka.ssl.key.password": "k3y"})
    sink = SinkOptions.parse({**SECURED, "kafka.sasl.jaas.config": JAAS})
    for shown in (repr(opts), str(opts), repr(sink), repr(opts.kafka_params),
                  str(opts.kafka_params), f"{sink.kafka_params}"):
        assert PASSWORD not in shown and "k3y" not in shown, shown
        assert HIDDEN in shown and "alice" in shown  # the user name is not a secret
        assert "SASL_SSL" in shown


def test_which_settings_are_secret() -> None:
    for name in ("sasl.password", "kafka.sasl.password", "sasl.jaas.config",
                 "ssl.key.password", "KAFKA.SASL.JAAS.CONFIG", "ssl.keystore.password",
                 "ssl.truststore.password", "sasl.oauthbearer.token.endpoint.url",
                 "basic.auth.user.info.secret"):
        assert is_secret(name), name
    for name in ("sasl.username", "security.protocol", "ssl.key.location",
                 "ssl.ca.location", "bootstrap.servers", "sasl.mechanism"):
        assert not is_secret(name), name
    assert redact({"sasl.password": "x", "sasl.username": "u", "ssl.key.password": None}) == {
        "sasl.password": HIDDEN, "sasl.username": "u", "ssl.key.password": None}


def test_a_configuration_error_never_quotes_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Java keystore password is no millrace setting: the error names the key only.
    with pytest.raises(ConfigError) as unknown:
        source(**{"kafka.ssl.keystore.password": PASSWORD})
    assert "'kafka.ssl.keystore.password'" in str(unknown.value)
    assert PASSWORD not in str(unknown.value)

    # Whatever the client's own check says, a secret value in it is hidden.
    from millrace.spark import options as options_module

    def complaining(props: dict[str, Any]) -> None:
        raise ConfigError(f"Invalid value {props['sasl.password']} for configuration "
                          "sasl.password: too short")

    monkeypatch.setattr(options_module, "ConsumerConfig", complaining)
    with pytest.raises(ConfigError) as invalid:
        source()
    assert str(invalid.value) == (f"Invalid value {HIDDEN} for option 'kafka.sasl.password': "
                                  "too short")
    assert hide_secrets(f"a {PASSWORD} b", {"sasl.jaas.config": PASSWORD}) == f"a {HIDDEN} b"


# ---------------------------------------------------------------------------- other clients
def test_kafka_options_and_the_admin_clients_share() -> None:
    params = kafka_options({**SECURED, "subscribe": "t", "KAFKA.MAX.POLL.RECORDS": "5"})
    assert params["security.protocol"] == "SASL_SSL" and params["max.poll.records"] == "5"
    assert "subscribe" not in params
    producer = SinkOptions.parse({**SECURED, "kafka.linger.ms": "7"}).producer_config("p")
    admin = admin_config(producer)
    assert admin["sasl.password"] == PASSWORD and admin["ssl.ca.location"]
    assert admin["bootstrap.servers"] == "broker:9093" and admin["client.id"] == "p"
    assert "linger.ms" not in admin and "acks" not in admin


class FakeAdmin:
    configs: list[dict[str, Any]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        FakeAdmin.configs.append(dict(config))

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def list_topics(self) -> dict[str, Any]:
        return {}

    def list_group_offsets(self, group: str, **kwargs: Any) -> dict[str, Any]:
        return {}


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    import millrace.client.admin as admin_module

    FakeAdmin.configs = []
    monkeypatch.setattr(admin_module, "KafkaAdminClient", FakeAdmin)
    return FakeAdmin.configs


def test_the_exactly_once_sinks_admin_client_authenticates_too(
        fake_admin: list[dict[str, Any]]) -> None:
    from millrace.spark.exactly_once import committed_batch

    sink = SinkOptions.parse({**SECURED, "deliveryGuarantee": "exactly-once"})
    assert committed_batch("tx-0", {**sink.producer_config("p"),
                                    "transactional.id": "tx-0"}) == -1
    (config,) = fake_admin
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.password"] == PASSWORD
    assert config["ssl.ca.location"] == "/etc/millrace/ca.pem"
    assert "transactional.id" not in config and "acks" not in config


def test_the_pipelines_reachability_check_uses_the_source_settings(
        fake_admin: list[dict[str, Any]]) -> None:
    from millrace.spark.pipeline import SourceConfig
    from millrace.spark.pipeline.runner import _check_reachable

    source_config = SourceConfig(bootstrap_servers="broker:9093", subscribe="orders",
                                 options={**{k: v for k, v in SECURED.items()
                                             if k != "kafka.bootstrap.servers"},
                                          "startingOffsets": "earliest",
                                          "kafka.max.poll.records": "10"})
    _check_reachable(source_config.client_config())
    (config,) = fake_admin
    assert config == {"bootstrap.servers": "broker:9093", "security.protocol": "SASL_SSL",
                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                      "sasl.password": PASSWORD, "ssl.ca.location": "/etc/millrace/ca.pem",
                      "ssl.endpoint.identification.algorithm": "https"}
    assert PASSWORD not in repr(source_config) and HIDDEN in repr(source_config)


def test_spark_kafka_sources_java_keystores_leave_the_check_to_spark(
        fake_admin: list[dict[str, Any]]) -> None:
    from millrace.spark.pipeline.runner import _check_reachable

    _check_reachable({"bootstrap.servers": "b:1", "security.protocol": "SSL",
                      "ssl.truststore.location": "/t.jks"})
    assert fake_admin == []
    _check_reachable({"bootstrap.servers": "b:1", "max.poll.records": "3"})
    assert fake_admin == [{"bootstrap.servers": "b:1"}]
