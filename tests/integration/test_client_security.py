"""millrace's own clients over TLS and SASL, against a real broker process.

One broker, one listener per case (the spec's example, plus a few named listeners)::

    PLAINTEXT        administration (SCRAM users are created over it, KIP-554)
    SSL              TLS, no client certificate asked
    MTLS   (SSL)     ssl.client.auth=required
    WRONGHOST (SSL)  a certificate for broker.example only (endpoint identification)
    SASL_PLAINTEXT   PLAIN (JAAS user_alice), SCRAM-SHA-256, SCRAM-SHA-512
    SASL_SSL         the same over TLS
    PLAINONLY (SASL_PLAINTEXT)  sasl.enabled.mechanisms=PLAIN only
    REAUTH (SASL_PLAINTEXT)     connections.max.reauth.ms=2500 (KIP-368)

The producer, the consumer and the admin client each go through every protocol and
mechanism; authentication failures (a wrong password, a mechanism the listener does not
enable, an untrusted CA, a missing client certificate, a host the certificate does not
name) must surface from the waiting call as their own non-retriable error, quickly --
never as a timeout.  The ``millrace`` CLI connects with ``--command-config``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millrace.client.admin import (
    KafkaAdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from millrace.client.consumer import KafkaConsumer, TopicPartition
from millrace.client.errors import SslAuthenticationError
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.errors import SaslAuthenticationError, UnsupportedSaslMechanismError
from millrace.security.certs import CertificateAuthority, write_pem
from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.integration

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_admin="admin-secret";')
SCRAM_USERS = {"scram-user": "scram-secret"}
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "WRONGHOST", "SASL_PLAINTEXT", "SASL_SSL",
             "PLAINONLY", "REAUTH")
PROTOCOL_OF = {"MTLS": "SSL", "WRONGHOST": "SSL", "PLAINONLY": "SASL_PLAINTEXT",
               "REAUTH": "SASL_PLAINTEXT"}
REAUTH_MS = 2500
QUICKLY = 10.0  # seconds: an authentication failure, against default timeouts of 30-60 s


@dataclass
class Pki:
    dir: Path
    ca: str
    client_cert: str
    client_key: str
    other_ca: str


class SecureBroker(BrokerProcess):
    def __init__(self, data_dir: Path, pki: Pki, keystore: str, wrong_host_keystore: str
                 ) -> None:
        super().__init__(data_dir)
        self.ports = {name: self.port if name == "PLAINTEXT" else free_port()
                      for name in LISTENERS}
        protocol_map = ",".join(f"{n}:{PROTOCOL_OF.get(n, n)}" for n in LISTENERS)
        self.overrides.update({
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "listener.security.protocol.map": protocol_map,
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.plainonly.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": keystore,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki.ca,
            "ssl.client.auth": "none",
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.wronghost.ssl.keystore.location": wrong_host_keystore,
        })
        for listener in ("sasl_plaintext", "sasl_ssl", "plainonly", "reauth"):
            self.overrides[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.generate("integration CA")
    write_pem(d / "ca.pem", ca.cert_pem)
    broker = ca.issue("broker", hosts=["localhost", "127.0.0.1"])
    write_pem(d / "broker.pem", broker.key_and_chain_pem, private=True)
    elsewhere = ca.issue("broker", hosts=["broker.example"])
    write_pem(d / "wronghost.pem", elsewhere.key_and_chain_pem, private=True)
    client = ca.issue("alice", organization="Org")
    write_pem(d / "client.pem", client.chain_pem)
    write_pem(d / "client.key", client.key_pem, private=True)
    write_pem(d / "other-ca.pem", CertificateAuthority.generate("someone else").cert_pem)
    return Pki(d, str(d / "ca.pem"), str(d / "client.pem"), str(d / "client.key"),
               str(d / "other-ca.pem"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureBroker]:
    with SecureBroker(tmp_path_factory.mktemp("secure-broker"), pki,
                      str(pki.dir / "broker.pem"), str(pki.dir / "wronghost.pem")) as b:
        with KafkaAdminClient({"bootstrap.servers": b.bootstrap,
                               "default.api.timeout.ms": 20_000}) as admin:
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096),
                                             password)
                for user, password in SCRAM_USERS.items()
                for mechanism in (ScramMechanism.SCRAM_SHA_256,
                                  ScramMechanism.SCRAM_SHA_512)]).all()
        yield b


# ---------------------------------------------------------------------- client settings
def tls(pki: Pki, **extra: Any) -> dict[str, Any]:
    return {"ssl.ca.location": pki.ca, **extra}


def settings(broker: SecureBroker, pki: Pki, listener: str, mechanism: str | None = None,
             password: str | None = None, extra: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    protocol = PROTOCOL_OF.get(listener, listener)
    out: dict[str, Any] = {"bootstrap.servers": broker.address(listener),
                           "security.protocol": protocol}
    if "SSL" in protocol:
        out.update(tls(pki))
    if mechanism is not None:
        user = "alice" if mechanism == "PLAIN" else "scram-user"
        out.update({"sasl.mechanism": mechanism, "sasl.username": user,
                    "sasl.password": password or ("alice-secret" if user == "alice"
                                                  else SCRAM_USERS[user])})
    out.update(extra or {})
    return out


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def round_trip(config: dict[str, Any], records: int = 20) -> None:
    """Admin creates a topic, the producer writes, the consumer reads it all back."""
    topic = unique("sec")
    with KafkaAdminClient({**config, "default.api.timeout.ms": 20_000}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)]).all()
        assert topic in [t.name for t in admin.list_topics()]
    values = [f"v{i}".encode() for i in range(records)]
    producer: Any
    with KafkaProducer({**config, "linger.ms": 5}) as producer:
        futures = [producer.send(ProducerRecord(topic, value, key=str(i).encode()))
                   for i, value in enumerate(values)]
        producer.flush(20)
        assert all(f.get(10).offset >= 0 for f in futures)
    consumer: Any = KafkaConsumer(config={**config, "auto.offset.reset": "earliest",
                                          "group.id": unique("g")})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < records and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(200))
        assert sorted(got) == sorted(values)
    finally:
        consumer.close()


def fails_quickly(call: Callable[[], object], error: type[BaseException]) -> BaseException:
    started = time.monotonic()
    with pytest.raises(error) as info:
        call()
    assert time.monotonic() - started < QUICKLY
    return info.value


# ---------------------------------------------------------------------- TLS
def test_ssl_without_a_client_certificate(broker: SecureBroker, pki: Pki) -> None:
    round_trip(settings(broker, pki, "SSL"))


def test_ssl_with_a_client_certificate(broker: SecureBroker, pki: Pki) -> None:
    round_trip(settings(broker, pki, "MTLS", extra={"ssl.certificate.location": pki.client_cert,
                                                   "ssl.key.location": pki.client_key}))


def test_a_listener_requiring_a_certificate_refuses_a_client_without(
        broker: SecureBroker, pki: Pki) -> None:
    config = {**settings(broker, pki, "MTLS"), "default.api.timeout.ms": 60_000}
    with KafkaAdminClient(config) as admin:
        error = fails_quickly(admin.describe_cluster, SslAuthenticationError)
    assert "SSL handshake failed" in str(error)


def test_an_untrusted_broker_certificate(broker: SecureBroker, pki: Pki) -> None:
    config = settings(broker, pki, "SSL", extra={"ssl.ca.location": pki.other_ca,
                                                 "max.block.ms": 60_000})
    producer: Any
    with KafkaProducer(config) as producer:
        error = fails_quickly(lambda: producer.send(ProducerRecord("t", b"v")),
                              SslAuthenticationError)
    assert "certificate verify failed" in str(error)
    assert broker.address("SSL") in str(error)


def test_endpoint_identification(broker: SecureBroker, pki: Pki) -> None:
    config = {**settings(broker, pki, "WRONGHOST"), "default.api.timeout.ms": 60_000}
    with KafkaAdminClient(config) as admin:
        error = fails_quickly(admin.describe_cluster, SslAuthenticationError)
    assert "certificate verify failed: IP address mismatch, certificate is not valid for " \
        "'127.0.0.1'" in str(error)
    unchecked = {**config, "ssl.endpoint.identification.algorithm": "none"}
    with KafkaAdminClient(unchecked) as admin:
        assert admin.describe_cluster().cluster_id


# ---------------------------------------------------------------------- SASL
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl(broker: SecureBroker, pki: Pki, listener: str, mechanism: str) -> None:
    round_trip(settings(broker, pki, listener, mechanism))


def test_sasl_with_a_java_style_jaas_config(broker: SecureBroker, pki: Pki) -> None:
    config = settings(broker, pki, "SASL_SSL")
    config.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
                   'org.apache.kafka.common.security.scram.ScramLoginModule required '
                   'username="scram-user" password="scram-secret";'})
    with KafkaAdminClient(config) as admin:
        assert admin.describe_cluster().cluster_id


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_fails_every_client_quickly(broker: SecureBroker, pki: Pki,
                                                     mechanism: str) -> None:
    config = settings(broker, pki, "SASL_SSL", mechanism, password="wrong",
                      extra={"default.api.timeout.ms": 60_000})
    with KafkaAdminClient(config) as admin:
        error = fails_quickly(admin.describe_cluster, SaslAuthenticationError)
    assert isinstance(error, SaslAuthenticationError) and not error.retriable
    if mechanism == "PLAIN":  # the broker's words, verbatim
        assert str(error).endswith("Authentication failed: Invalid username or password")
    producer_config = {k: v for k, v in config.items() if k != "default.api.timeout.ms"}
    producer: Any
    with KafkaProducer({**producer_config, "max.block.ms": 60_000}) as producer:
        fails_quickly(lambda: producer.send(ProducerRecord("t", b"v")),
                      SaslAuthenticationError)
    consumer: Any = KafkaConsumer("t", config={**config, "group.id": unique("g")})
    try:
        fails_quickly(lambda: consumer.poll(30_000), SaslAuthenticationError)
    finally:
        consumer.close(0)


def test_an_unknown_user_looks_like_a_wrong_password(broker: SecureBroker,
                                                     pki: Pki) -> None:
    config = settings(broker, pki, "SASL_PLAINTEXT", "SCRAM-SHA-512",
                      extra={"sasl.username": "nobody", "default.api.timeout.ms": 60_000})
    with KafkaAdminClient(config) as admin:
        error = fails_quickly(admin.describe_cluster, SaslAuthenticationError)
    assert "SCRAM-SHA-512" in str(error) and "nobody" not in str(error)


def test_a_mechanism_the_listener_does_not_enable(broker: SecureBroker, pki: Pki) -> None:
    config = settings(broker, pki, "PLAINONLY", "SCRAM-SHA-256",
                      extra={"default.api.timeout.ms": 60_000})
    with KafkaAdminClient(config) as admin:
        error = fails_quickly(admin.describe_cluster, UnsupportedSaslMechanismError)
    assert "'SCRAM-SHA-256' not enabled in the server, enabled mechanisms are ['PLAIN']" \
        in str(error)


def test_the_session_is_renewed_before_the_broker_ends_it(
        broker: SecureBroker, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    config = settings(broker, pki, "REAUTH", "SCRAM-SHA-256")
    topic = unique("reauth")
    with KafkaAdminClient(config) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)]).all()
    caplog.set_level(logging.DEBUG, "millrace.client.network_client")
    producer: Any
    with KafkaProducer({**config, "linger.ms": 0, "retries": 0}) as producer:
        deadline = time.monotonic() + 3 * REAUTH_MS / 1000
        sent = 0
        while time.monotonic() < deadline:
            producer.send(ProducerRecord(topic, f"{sent}".encode())).get(10)
            sent += 1
            time.sleep(0.05)
    renewals = [r for r in caplog.records if "due for renewal" in r.getMessage()]
    assert len(renewals) >= 2  # every session renewed before the broker's expiry
    consumer: Any = KafkaConsumer(config={**config, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < sent and time.monotonic() < deadline:
            got.extend(consumer.poll(200))
        assert len(got) == sent  # nothing lost, nothing doubled by retries
    finally:
        consumer.close()


# ---------------------------------------------------------------------- the CLI
def millrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "millrace.cli.main", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_cli_command_config(broker: SecureBroker, pki: Pki, tmp_path: Path) -> None:
    topic = unique("cli")
    config = settings(broker, pki, "SASL_SSL", "SCRAM-SHA-512")
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items()
                             if k != "bootstrap.servers"))
    created = millrace("topics", "create", "--topic", topic, "--partitions", "1", "-b",
                       broker.address("SASL_SSL"), "--command-config", str(props))
    assert created.returncode == 0, created.stderr
    listed = millrace("topics", "list", "-b", broker.address("SASL_SSL"),
                      "--command-config", str(props))
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr
    wrong = millrace("topics", "list", "-b", broker.address("SASL_SSL"),
                     "--command-config", str(props), "-X", "sasl.password=wrong")
    assert wrong.returncode == 1
    assert wrong.stderr.startswith("Error: SASL_AUTHENTICATION_FAILED"), wrong.stderr
