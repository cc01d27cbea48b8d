"""One secured broker for the third-party client tests, and each client's settings for it.

The broker listens five times (reference security.md §1): PLAINTEXT (set-up only),
SASL_PLAINTEXT, SSL (no client certificate asked), SASL_SSL, and MTLS, an SSL listener
named through ``listener.security.protocol.map`` that requires a client certificate
(``listener.name.mtls.ssl.client.auth=required``).  One test CA signs the broker's
certificate (SANs ``localhost`` and ``127.0.0.1``, so hostname verification stays on in
every client) and a client certificate for MTLS.

Users: ``alice`` is a PLAIN user of the JAAS configuration; ``bob`` (SCRAM-SHA-256) and
``carol`` (SCRAM-SHA-512) are created once through KIP-554 (AlterUserScramCredentials)
with confluent-kafka's admin client, which is also how Kafka users create them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.security.certs import CertificateAuthority, write_pem
from millrace.testing.broker_process import BrokerProcess, free_port

PLAIN_USERS = {"alice": "alice-secret"}
SCRAM_USERS = {  # mechanism -> (user, password)
    "SCRAM-SHA-256": ("bob", "bob-secret"),
    "SCRAM-SHA-512": ("carol", "carol-secret"),
}
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL", "MTLS")


@dataclass(frozen=True)
class SecuredBroker:
    process: BrokerProcess
    ports: dict[str, int]  # listener name -> port
    ca: Path  # the CA every client trusts
    client_cert: Path  # MTLS: the client's certificate chain ...
    client_key: Path  # ... and its private key

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @staticmethod
    def credentials(mechanism: str) -> tuple[str, str]:
        if mechanism == "PLAIN":
            return next(iter(PLAIN_USERS.items()))
        return SCRAM_USERS[mechanism]

    def librdkafka(self, listener: str, mechanism: str | None = None,
                   password: str | None = None) -> dict[str, str]:
        """confluent-kafka / kcat (``-X``) settings for ``listener`` (its name is the
        security protocol, except MTLS: SSL with this module's client certificate)."""
        protocol = "SSL" if listener == "MTLS" else listener
        conf = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(self.ca)
        if listener == "MTLS":
            conf["ssl.certificate.location"] = str(self.client_cert)
            conf["ssl.key.location"] = str(self.client_key)
        if protocol.startswith("SASL_"):
            assert mechanism is not None, "a SASL listener needs a mechanism"
            user, secret = self.credentials(mechanism)
            conf |= {"sasl.mechanisms": mechanism, "sasl.username": user,
                     "sasl.password": secret if password is None else password}
        return conf

    def kafka_python(self, listener: str, mechanism: str | None = None,
                     password: str | None = None) -> dict[str, object]:
        """kafka-python keyword arguments (SSL and SASL_SSL only)."""
        conf: dict[str, object] = {"bootstrap_servers": self.bootstrap(listener),
                                   "security_protocol": listener, "ssl_cafile": str(self.ca)}
        if listener.startswith("SASL_"):
            assert mechanism is not None, "a SASL listener needs a mechanism"
            user, secret = self.credentials(mechanism)
            conf |= {"sasl_mechanism": mechanism, "sasl_plain_username": user,
                     "sasl_plain_password": secret if password is None else password}
        return conf

    def aiokafka(self, listener: str, mechanism: str | None = None,
                 password: str | None = None) -> dict[str, object]:
        """aiokafka keyword arguments: its SSL needs an ``SSLContext``, never file paths."""
        from aiokafka.helpers import create_ssl_context
        conf = self.kafka_python(listener, mechanism, password)
        del conf["ssl_cafile"]
        conf["ssl_context"] = create_ssl_context(cafile=str(self.ca))
        return conf


def _create_scram_users(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialAlteration,
        UserScramCredentialUpsertion,
    )
    mechanisms = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
                  "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanisms[m], 8192),
                                     password.encode())
        for m, (user, password) in SCRAM_USERS.items()]
    for user, future in admin.alter_user_scram_credentials(upserts).items():
        assert future.result(15) is None, user
    described = admin.describe_user_scram_credentials([u for u, _ in SCRAM_USERS.values()])
    assert isinstance(described, dict)  # one future per user named
    for m, (user, _) in SCRAM_USERS.items():
        infos = described[user].result(15).scram_credential_infos
        assert [(i.mechanism, i.iterations) for i in infos] == [(mechanisms[m], 8192)], user


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """One real broker with every listener kind, its SCRAM users already created."""
    data: Path = tmp_path_factory.mktemp("secured-broker")
    ca = CertificateAuthority.generate()
    leaf = ca.issue("localhost", hosts=["localhost", "127.0.0.1"])
    client = ca.issue("compat-client", organization="millrace compat tests")
    paths = {name: data / f"{name}.pem"
             for name in ("ca", "broker", "client-cert", "client-key")}
    write_pem(paths["ca"], ca.cert_pem)
    write_pem(paths["broker"], leaf.key_pem + leaf.chain_pem, private=True)
    write_pem(paths["client-cert"], client.chain_pem)
    write_pem(paths["client-key"], client.key_pem, private=True)
    ports = {name: free_port() for name in LISTENERS}
    users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                            f"required {users};",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(paths["broker"]),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(paths["ca"]),
    }
    with BrokerProcess(data, port=ports["PLAINTEXT"], overrides=overrides) as process:
        _create_scram_users(process.bootstrap)
        yield SecuredBroker(process, ports, paths["ca"], paths["client-cert"],
                            paths["client-key"])
    # A clean SIGTERM shutdown, as for every compat module's broker.
    assert process.proc is not None and process.proc.returncode == 0, process.logs()
    assert "stopped" in process.logs()
