"""Every request carries its connection's principal, as the request log shows: the
mapped DN of the client's certificate on a mutual-TLS listener
(``ssl.principal.mapping.rules``), the SASL user on a SASL listener, ``User:ANONYMOUS`` on
PLAINTEXT and on TLS without a client certificate."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from millrace.launcher.broker_process import BrokerProcess, free_port
from millrace.security.certs import CertificateAuthority, write_pem

pytestmark = [pytest.mark.integration]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_bob="bob-secret";')


def _principals(broker: BrokerProcess, client_id: str) -> set[str]:
    """The principals of the client's requests after any authentication (ApiVersions
    is answered before it, as User:ANONYMOUS)."""
    found = re.findall(rf"Completed request: (\w+) v\d+ correlation id \d+ from client "
                       rf"'{client_id}' at \S+ principal (\S+)", broker.logs())
    return {principal for api, principal in found if api != "ApiVersions"}


def test_the_request_log_names_each_connections_principal(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    write_pem(tmp_path / "ca.pem", ca.cert_pem)
    write_pem(tmp_path / "broker.pem", ca.issue("broker", hosts=["127.0.0.1"]).key_and_chain_pem,
              private=True)
    client = ca.issue("Alice", organizational_unit="Payments", organization="Example")
    write_pem(tmp_path / "client.pem", client.chain_pem)
    write_pem(tmp_path / "client.key", client.key_pem, private=True)
    plain, mtls, sasl = free_port(), free_port(), free_port()
    overrides = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{plain},MTLS://127.0.0.1:{mtls},"
                      f"SASL_PLAINTEXT://127.0.0.1:{sasl}"),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/L,DEFAULT",
        "ssl.keystore.location": str(tmp_path / "broker.pem"),
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": JAAS,
    }
    with BrokerProcess(tmp_path / "data", port=plain, overrides=overrides,
                       log_level="debug") as broker:
        clients = {
            "c-plain": {"bootstrap.servers": f"127.0.0.1:{plain}"},
            "c-mtls": {"bootstrap.servers": f"127.0.0.1:{mtls}", "security.protocol": "SSL",
                       "ssl.ca.location": str(tmp_path / "ca.pem"),
                       "ssl.certificate.location": str(tmp_path / "client.pem"),
                       "ssl.key.location": str(tmp_path / "client.key")},
            "c-sasl": {"bootstrap.servers": f"127.0.0.1:{sasl}",
                       "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                       "sasl.username": "bob", "sasl.password": "bob-secret"},
        }
        for client_id, config in clients.items():
            md = AdminClient({**config, "client.id": client_id}).list_topics(timeout=10)
            assert md.brokers
        deadline = time.monotonic() + 5
        while not all(_principals(broker, c) for c in clients) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _principals(broker, "c-plain") == {"User:ANONYMOUS"}
        assert _principals(broker, "c-mtls") == {"User:alice@payments"}
        assert _principals(broker, "c-sasl") == {"User:bob"}
