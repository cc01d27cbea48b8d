"""SCRAM credentials in ZooKeeper, as Kafka keeps them, against a real ZooKeeper server:

* ``millrace configs --zookeeper`` writes ``/config/users/<sanitized user>`` =
  ``{"version":1,"config":{"SCRAM-SHA-256":"salt=..,stored_key=..,server_key=..,
  iterations=.."}}`` and a ``config_change_<n>`` notification naming ``users/<user>``;
* two cluster brokers (real processes) load the users written before they started, pick
  up a password changed in ZooKeeper behind their backs, and a user created through the
  controller logs in on the other broker too (the notification reached it); a broker
  that is not the controller answers AlterUserScramCredentials with NOT_CONTROLLER.

A login is checked on exactly one broker: SaslHandshake + SaslAuthenticate over a raw
socket, driven by millrace's SCRAM client.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from millrace.broker.zk import KafkaZkClient
from millrace.client.admin import (
    KafkaAdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from millrace.common.errors import Errors
from millrace.launcher.broker_process import BrokerProcess, free_port
from millrace.protocol import (
    AlterUserScramCredentialsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from millrace.security.sasl import create_sasl_client
from millrace.security.sasl.scram import ScramCredential, ScramFormatter
from millrace.security.sasl.scram import ScramMechanism as SaslMechanism
from millrace.testing.raw_connection import RawConnection

pytestmark = [pytest.mark.integration]

Factory = Callable[[], KafkaZkClient]
CREDENTIAL = re.compile(r"salt=[A-Za-z0-9+/]+=*,stored_key=[A-Za-z0-9+/]+=*,"
                        r"server_key=[A-Za-z0-9+/]+=*,iterations=\d+")


def cli(*args: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MILLRACE_BOOTSTRAP"}
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def zk_json(zk: KafkaZkClient, path: str) -> object:
    got = zk.zk.get_data(path)
    assert got is not None, f"{path} does not exist"
    return json.loads(got[0])


def scram_login(port: int, user: str, password: str,
                mechanism: str = "SCRAM-SHA-256") -> bool:
    """One SCRAM exchange with the broker on ``port`` (and no other)."""
    with RawConnection(port) as raw:
        assert raw.call(SaslHandshakeRequest(mechanism=mechanism), 1).error_code == 0
        client = create_sasl_client(mechanism, user, password)
        token = client.evaluate_challenge(b"")
        while token is not None:
            response = raw.call(SaslAuthenticateRequest(auth_bytes=token), 2)
            if response.error_code:
                assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED
                return False
            token = client.evaluate_challenge(response.auth_bytes)
        return client.is_complete()


def eventually(check: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


# ---------------------------------------------------------------------- the layout
def test_cli_writes_kafkas_layout_and_a_notification(connect: str,
                                                     zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    user, password = "CN=alice smith,O=acme", "alice-secret"
    out = cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users",
              "--entity-name", user, "--add-config",
              f"SCRAM-SHA-256=[iterations=8192,password={password}],"
              f"SCRAM-SHA-512=[password={password}]")
    assert out.stdout == f"Completed updating config for user {user}.\n"
    assert password not in out.stdout + out.stderr

    assert zk.zk.get_children("/config/users") == ["CN%3Dalice%20smith%2CO%3Dacme"]
    stored = zk_json(zk, "/config/users/CN%3Dalice%20smith%2CO%3Dacme")
    assert isinstance(stored, dict) and stored["version"] == 1
    config = stored["config"]
    assert sorted(config) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    for name, iterations in (("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)):
        assert CREDENTIAL.fullmatch(config[name]), config[name]
        credential = ScramCredential.from_kafka_string(config[name])
        mechanism = SaslMechanism.from_name(name)
        assert mechanism is not None and credential.iterations == iterations
        assert credential == ScramFormatter(mechanism).generate_credential(
            password, iterations, credential.salt)
    changes = zk.zk.get_children("/config/changes")
    assert changes == ["config_change_0000000000"]
    assert zk_json(zk, "/config/changes/config_change_0000000000") == {
        "version": 2, "entity_path": "users/CN%3Dalice%20smith%2CO%3Dacme"}

    described = cli("configs", "--zookeeper", connect, "--describe", "--entity-type", "users",
                    "-o", "json").stdout
    assert json.loads(described) == [{"entity_type": "users", "entity_name": user,
                                      "credentials": [
                                          {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
                                          {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}]
    # deleting one mechanism keeps the other and the quota keys Kafka keeps there too
    entity = zk_json(zk, "/config/users/CN%3Dalice%20smith%2CO%3Dacme")
    assert isinstance(entity, dict)
    zk.set_or_create_entity_configs("users", "CN%3Dalice%20smith%2CO%3Dacme",
                                    {**entity["config"], "producer_byte_rate": "1024"})
    cli("configs", "--zookeeper", connect, "alter", "--entity-type", "users", "--entity-name",
        user, "--delete-config", "SCRAM-SHA-512")
    after = zk_json(zk, "/config/users/CN%3Dalice%20smith%2CO%3Dacme")
    assert isinstance(after, dict)
    assert sorted(after["config"]) == ["SCRAM-SHA-256", "producer_byte_rate"]
    assert len(zk.zk.get_children("/config/changes")) == 2


def test_cli_with_zookeeper_down_is_one_line() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = cli("configs", "--zookeeper", f"127.0.0.1:{port}", "--timeout", "500",
               "--describe", "--entity-type", "users", rc=1)
    assert done.stdout == ""
    assert done.stderr.startswith(f"Error: cannot connect to ZooKeeper at 127.0.0.1:{port}")
    assert len(done.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------- brokers
class ClusterBroker(BrokerProcess):
    """A ZooKeeper-mode broker with PLAINTEXT (inter-broker, admin) and SASL_PLAINTEXT."""

    def __init__(self, data_dir: Path, node_id: int, connect: str) -> None:
        super().__init__(data_dir / f"broker-{node_id}")
        self.sasl_port = free_port()
        self.overrides.update({
            "node.id": str(node_id), "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": "6000",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        })


@pytest.fixture
def brokers() -> Iterator[list[ClusterBroker]]:
    started: list[ClusterBroker] = []
    yield started
    for b in started:
        b.stop()


def test_brokers_follow_credentials_in_zookeeper(connect: str, tmp_path: Path,
                                                 brokers: list[ClusterBroker]) -> None:
    # written before any broker runs: Kafka's way to create the inter-broker user
    cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users",
        "--entity-name", "admin", "--add-config", "SCRAM-SHA-512=[password=admin-secret]")
    for node_id in (1, 2):
        brokers.append(ClusterBroker(tmp_path, node_id, connect).start())
    b1, b2 = brokers
    for b in brokers:
        assert scram_login(b.sasl_port, "admin", "admin-secret", "SCRAM-SHA-512")
        assert not scram_login(b.sasl_port, "admin", "wrong", "SCRAM-SHA-512")

    # a password changed in ZooKeeper behind the brokers' backs: each re-reads the user
    cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users",
        "--entity-name", "admin", "--add-config", "SCRAM-SHA-512=[password=rotated]")
    for b in brokers:
        assert eventually(lambda b=b: scram_login(b.sasl_port, "admin", "rotated",
                                                  "SCRAM-SHA-512"))
        assert not scram_login(b.sasl_port, "admin", "admin-secret", "SCRAM-SHA-512")

    # through the admin client: the controller writes, the other broker follows
    with KafkaAdminClient(bootstrap_servers=f"{b1.bootstrap},{b2.bootstrap}",
                          default_api_timeout_ms=30_000) as admin:
        controller = admin.describe_cluster().controller
        assert controller is not None and controller.id in (1, 2)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "bob-secret")]
        ).all()
        assert list(admin.describe_user_scram_credentials().all()) == ["admin", "bob"]
    other = b2 if controller.id == 1 else b1
    for b in brokers:
        assert eventually(lambda b=b: scram_login(b.sasl_port, "bob", "bob-secret"))

    # the broker that is not the controller refuses to alter, for every user named
    u = AlterUserScramCredentialsRequest
    with RawConnection(other.port) as raw:
        response = raw.call(u(deletions=[u.ScramCredentialDeletion(name="bob", mechanism=1)],
                              upsertions=[u.ScramCredentialUpsertion(
                                  name="carol", mechanism=1, iterations=4096, salt=b"s",
                                  salted_password=b"p" * 32)]), 0)
    assert [(r.user, r.error_code) for r in response.results] == [
        ("bob", Errors.NOT_CONTROLLER), ("carol", Errors.NOT_CONTROLLER)]
    assert scram_login(other.sasl_port, "bob", "bob-secret")
