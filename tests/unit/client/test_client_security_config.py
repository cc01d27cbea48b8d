"""The security settings of the clients: declared once, checked when the client is built.

``security.protocol``, ``ssl.*`` and ``sasl.*`` are common client keys (every client has
them, with Kafka's/librdkafka's names and defaults); ``client_security`` turns them into a
TLS context and SASL credentials or a ``ConfigError`` that names the key.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from millrace.client import client_utils
from millrace.client._client_security import (
    PLAINTEXT,
    SaslCredentials,
    client_security,
)
from millrace.client._ssl_selector import SslSelector
from millrace.client.admin import AdminClientConfig
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.metadata import Metadata
from millrace.client.producer.config import ProducerConfig
from millrace.common.errors import ConfigError
from millrace.common.time import MockTime
from millrace.security.certs import CertificateAuthority, write_pem
from millrace.security.kafka_principal import SecurityProtocol

BOOT = {"bootstrap.servers": "localhost:9092"}
CLIENTS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "producer": ProducerConfig, "consumer": ConsumerConfig, "admin": AdminClientConfig}
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="alice-secret";')


def security(**settings: Any) -> Any:
    props = {k.replace("_", "."): v for k, v in settings.items()}
    return client_security(ProducerConfig({**BOOT, **props}).values)


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_has_the_security_keys_with_kafkas_defaults(client: str) -> None:
    values = CLIENTS[client](BOOT).values
    assert values["security.protocol"] == "PLAINTEXT"
    assert values["sasl.mechanism"] == "GSSAPI"  # Kafka's default (refused when used)
    assert values["ssl.endpoint.identification.algorithm"] == "https"
    for key in ("ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location",
                "ssl.key.location", "ssl.key.password", "sasl.mechanisms", "sasl.username",
                "sasl.password", "sasl.jaas.config"):
        assert values[key] is None
    assert client_security(values) is PLAINTEXT


def test_plaintext_ignores_sasl_and_ssl_settings() -> None:
    assert security(sasl_mechanism="GSSAPI", ssl_ca_location="/nonexistent") is PLAINTEXT


@pytest.mark.parametrize("name", ["sasl_plaintext", "SASL_Plaintext", " SASL_PLAINTEXT "])
def test_the_protocol_is_case_insensitive(name: str) -> None:
    got = security(security_protocol=name, sasl_mechanism="PLAIN", sasl_username="a",
                   sasl_password="b")
    assert got.protocol is SecurityProtocol.SASL_PLAINTEXT and got.ssl_context is None
    assert got.sasl == SaslCredentials("PLAIN", "a", "b")


def test_an_unknown_protocol_names_the_key() -> None:
    with pytest.raises(ConfigError, match=re.escape(
            "security.protocol: String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, "
            "SASL_SSL")):
        ProducerConfig({**BOOT, "security.protocol": "TLS"})


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "AWS_MSK_IAM"])
def test_unsupported_mechanisms_are_refused_clearly(mechanism: str) -> None:
    with pytest.raises(ConfigError) as e:
        security(security_protocol="SASL_SSL", sasl_mechanism=mechanism, sasl_username="a",
                 sasl_password="b")
    assert str(e.value).startswith(
        f"{mechanism} is not supported; set sasl.mechanism to PLAIN, SCRAM-SHA-256 or "
        "SCRAM-SHA-512")


def test_the_default_mechanism_gssapi_is_refused_for_sasl() -> None:
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        security(security_protocol="SASL_PLAINTEXT", sasl_username="a", sasl_password="b")


def test_librdkafkas_alias_sasl_mechanisms() -> None:
    got = security(security_protocol="SASL_PLAINTEXT", sasl_mechanisms="scram-sha-512",
                   sasl_username="a", sasl_password="b")
    assert got.sasl.mechanism == "SCRAM-SHA-512"
    same = security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                    sasl_mechanisms="SCRAM-SHA-512", sasl_username="a", sasl_password="b")
    assert same.sasl == got.sasl
    with pytest.raises(ConfigError, match="disagree"):
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                 sasl_mechanisms="SCRAM-SHA-256", sasl_username="a", sasl_password="b")
    with pytest.raises(ConfigError, match="exactly one mechanism"):
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanisms="PLAIN,SCRAM-SHA-256",
                 sasl_username="a", sasl_password="b")


def test_a_missing_user_name_or_password() -> None:
    with pytest.raises(ConfigError, match=re.escape("needs a user name: set sasl.username")):
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                 sasl_password="b")
    with pytest.raises(ConfigError, match=re.escape("needs the password of user a: set sasl.password")):
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                 sasl_username="a")


def test_credentials_from_a_java_style_jaas_config() -> None:
    got = security(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                   sasl_jaas_config=SCRAM_JAAS)
    assert got.sasl == SaslCredentials("SCRAM-SHA-256", "alice", "alice-secret")
    plain = security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                     sasl_jaas_config='org.apache.kafka.common.security.plain.PlainLoginModule'
                                      ' required username=bob password="b\\"c";')
    assert plain.sasl == SaslCredentials("PLAIN", "bob", 'b"c')
    explicit = security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                        sasl_jaas_config=SCRAM_JAAS, sasl_username="carol",
                        sasl_password="carol-secret")
    assert explicit.sasl == SaslCredentials("PLAIN", "carol", "carol-secret")


def test_bad_jaas_configs() -> None:
    with pytest.raises(ConfigError, match=re.escape("sasl.jaas.config")) as e:
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                 sasl_jaas_config='org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required username="a" password="s3cret"')  # no ';'
    assert "s3cret" not in str(e.value)
    with pytest.raises(ConfigError, match=re.escape(
            "login module com.sun.security.auth.module.Krb5LoginModule is not supported")):
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                 sasl_jaas_config="com.sun.security.auth.module.Krb5LoginModule required;")
    with pytest.raises(ConfigError, match="needs a user name"):
        security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                 sasl_jaas_config="org.apache.kafka.common.security.plain.PlainLoginModule "
                                  "required;")


def test_passwords_stay_out_of_reprs() -> None:
    got = security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                   sasl_username="alice", sasl_password="hunter2")
    assert "hunter2" not in repr(got) and "hunter2" not in repr(got.sasl)
    assert "alice" in repr(got.sasl)


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    write_pem(path, CertificateAuthority.generate().cert_pem)
    return str(path)


@pytest.mark.parametrize("algorithm,check", [("https", True), ("HTTPS", True),
                                             ("none", False), ("", False)])
def test_ssl_context_follows_endpoint_identification(ca_file: str, algorithm: str,
                                                     check: bool) -> None:
    got = security(security_protocol="SSL", ssl_ca_location=ca_file,
                   ssl_endpoint_identification_algorithm=algorithm)
    assert got.protocol is SecurityProtocol.SSL and got.sasl is None
    assert isinstance(got.ssl_context, ssl.SSLContext)
    assert got.ssl_context.check_hostname is check
    assert got.ssl_context.verify_mode is ssl.CERT_REQUIRED


def test_a_bad_endpoint_identification_algorithm() -> None:
    with pytest.raises(ConfigError, match=re.escape("ssl.endpoint.identification.algorithm")):
        ProducerConfig({**BOOT, "ssl.endpoint.identification.algorithm": "http"})


def test_sasl_ssl_has_both(ca_file: str) -> None:
    got = security(security_protocol="SASL_SSL", ssl_ca_location=ca_file,
                   sasl_mechanism="PLAIN", sasl_username="a", sasl_password="b")
    assert got.ssl_context is not None and got.sasl is not None


def test_unreadable_tls_files_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("ssl.ca.location")):
        security(security_protocol="SSL", ssl_ca_location=str(tmp_path / "missing.pem"))


def test_create_network_client_builds_the_tls_selector_and_sasl(ca_file: str) -> None:
    values = ProducerConfig({**BOOT, "security.protocol": "SASL_SSL",
                             "ssl.ca.location": ca_file, "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.username": "u", "sasl.password": "p"}).values
    client = client_utils.create_network_client(
        values, Metadata(), client_id="c", max_in_flight_requests_per_connection=1,
        time=MockTime())
    try:
        assert isinstance(client._selector, SslSelector)
        assert client._sasl == SaslCredentials("SCRAM-SHA-512", "u", "p")
    finally:
        client.close()


def test_a_bad_security_setting_fails_building_the_client() -> None:
    from millrace.client.admin import KafkaAdminClient

    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        KafkaAdminClient({**BOOT, "security.protocol": "SASL_SSL"})
