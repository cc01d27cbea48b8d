"""SCRAM credentials (KIP-554) against a real single-node broker process with a PLAINTEXT
listener (administration) and a SASL_PLAINTEXT one (SCRAM-SHA-256 and -512 logins).

Credentials are created, described and deleted through the millrace admin client,
confluent-kafka's ``AdminClient`` and the ``millrace configs`` command (both forms); each
change is proved by what a SCRAM login can do afterwards, with the millrace client and
with librdkafka.  Credentials survive a broker restart (the local metadata store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ScramCredentialInfo as CkInfo
from confluent_kafka.admin import ScramMechanism as CkMechanism
from confluent_kafka.admin import UserScramCredentialDeletion as CkDeletion
from confluent_kafka.admin import UserScramCredentialUpsertion as CkUpsertion

from millrace.client.admin import (
    KafkaAdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from millrace.common.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    SaslAuthenticationError,
    UnacceptableCredentialError,
)
from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.integration

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


class SaslBroker(BrokerProcess):
    """A broker with a PLAINTEXT listener (``bootstrap``) and a SASL_PLAINTEXT one
    (``sasl_bootstrap``) taking SCRAM-SHA-256 and SCRAM-SHA-512."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.sasl_port = free_port()
        self.overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        })

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    with SaslBroker(tmp_path_factory.mktemp("scram-broker")) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: SaslBroker) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                          default_api_timeout_ms=15_000) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def logs_in(broker: SaslBroker, user: str, password: str,
            mechanism: ScramMechanism = SHA256) -> bool:
    """A SCRAM login on the SASL listener with the millrace client: True if the broker
    answered a request after it, False if it refused the credentials."""
    try:
        with KafkaAdminClient({"bootstrap.servers": broker.sasl_bootstrap,
                               "security.protocol": "SASL_PLAINTEXT",
                               "sasl.mechanism": mechanism.mechanism_name,
                               "sasl.username": user, "sasl.password": password,
                               "default.api.timeout.ms": 10_000}) as client:
            return client.describe_cluster().cluster_id is not None
    except SaslAuthenticationError:
        return False


def upsert(user: str, password: str, mechanism: ScramMechanism = SHA256,
           iterations: int = 4096) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations),
                                        password)


# ---------------------------------------------------------------------- millrace admin
def test_millrace_admin_alters_describes_and_logins_follow(
        broker: SaslBroker, admin: KafkaAdminClient) -> None:
    alice, bob = unique("alice"), unique("bob")
    assert not logs_in(broker, alice, "alice-secret")
    result = admin.alter_user_scram_credentials([
        upsert(alice, "alice-secret", SHA256, 8192), upsert(alice, "alice-512", SHA512),
        upsert(bob, "bob-secret", SHA512, 16384)])
    assert result.all() == {alice: None, bob: None}

    described = admin.describe_user_scram_credentials().all()
    assert described[alice] == UserScramCredentialsDescription(alice, [
        ScramCredentialInfo(SHA256, 8192), ScramCredentialInfo(SHA512, 4096)])
    assert described[bob] == UserScramCredentialsDescription(bob, [
        ScramCredentialInfo(SHA512, 16384)])
    assert list(described) == sorted(described)
    assert list(admin.describe_user_scram_credentials([bob]).all()) == [bob]

    assert logs_in(broker, alice, "alice-secret", SHA256)
    assert logs_in(broker, alice, "alice-512", SHA512)
    assert not logs_in(broker, alice, "alice-512", SHA256)
    assert logs_in(broker, bob, "bob-secret", SHA512)
    assert not logs_in(broker, bob, "bob-secret", SHA256)  # no SHA-256 credential

    # a new password applies to the next login; a deletion ends logins with it
    admin.alter_user_scram_credentials([upsert(alice, "rotated", SHA256),
                                        UserScramCredentialDeletion(alice, SHA512)]).all()
    assert logs_in(broker, alice, "rotated", SHA256)
    assert not logs_in(broker, alice, "alice-secret", SHA256)
    assert not logs_in(broker, alice, "alice-512", SHA512)
    assert admin.describe_user_scram_credentials([alice]).all()[alice].credential_infos == [
        ScramCredentialInfo(SHA256, 4096)]


def test_millrace_admin_per_user_errors(broker: SaslBroker, admin: KafkaAdminClient) -> None:
    ok, few, twice, ghost = unique("ok"), unique("few"), unique("twice"), unique("ghost")
    result = admin.alter_user_scram_credentials([
        upsert(ok, "pw"), upsert(few, "pw", iterations=4095),
        upsert(twice, "pw"), upsert(twice, "pw2"),
        UserScramCredentialDeletion(ghost, SHA512)])
    assert result[ok].result() is None
    errors = result.errors()
    assert isinstance(errors[few], UnacceptableCredentialError)
    assert "Too few iterations" in str(errors[few])
    assert isinstance(errors[twice], DuplicateResourceError)
    assert isinstance(errors[ghost], ResourceNotFoundError)
    described = admin.describe_user_scram_credentials([ok, ghost])
    assert described[ok].result().credential_infos == [ScramCredentialInfo(SHA256, 4096)]
    with pytest.raises(ResourceNotFoundError, match="does not exist"):
        described[ghost].result()
    assert not logs_in(broker, few, "pw") and not logs_in(broker, twice, "pw")


# ---------------------------------------------------------------------- confluent-kafka
def _ck_result(future: Any) -> Any:
    return future.result(timeout=15)


def test_confluent_kafka_admin(broker: SaslBroker, admin: KafkaAdminClient) -> None:
    carol = unique("carol")
    ck = ConfluentAdmin({"bootstrap.servers": broker.bootstrap})
    futures = ck.alter_user_scram_credentials([
        CkUpsertion(carol, CkInfo(CkMechanism.SCRAM_SHA_512, 10000), b"carol-secret"),
        CkUpsertion(carol, CkInfo(CkMechanism.SCRAM_SHA_256, 4096), b"carol-256",
                    b"salt-from-the-client")],
        request_timeout=15)
    assert _ck_result(futures[carol]) is None
    everyone = _ck_result(ck.describe_user_scram_credentials(request_timeout=15))
    mine = everyone[carol]
    assert sorted((i.mechanism, i.iterations) for i in mine.scram_credential_infos) == [
        (CkMechanism.SCRAM_SHA_256, 4096), (CkMechanism.SCRAM_SHA_512, 10000)]
    # what the millrace client and the broker see of confluent's alteration
    assert admin.describe_user_scram_credentials([carol]).all()[carol].credential_infos == [
        ScramCredentialInfo(SHA256, 4096), ScramCredentialInfo(SHA512, 10000)]
    assert logs_in(broker, carol, "carol-secret", SHA512)
    assert logs_in(broker, carol, "carol-256", SHA256)

    # a librdkafka SCRAM login on the SASL listener
    sasl = {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": carol,
            "sasl.password": "carol-secret"}
    brokers = ConfluentAdmin(sasl).list_topics(timeout=15).brokers
    assert [b.port for b in brokers.values()] == [broker.sasl_port]

    futures = ck.alter_user_scram_credentials(
        [CkDeletion(carol, CkMechanism.SCRAM_SHA_256), CkDeletion(carol,
                                                                   CkMechanism.SCRAM_SHA_256)],
        request_timeout=15)
    with pytest.raises(KafkaException) as refused:
        _ck_result(futures[carol])
    assert refused.value.args[0].name() == "DUPLICATE_RESOURCE"
    nobody = unique("nobody")
    futures = ck.describe_user_scram_credentials([carol, nobody], request_timeout=15)
    assert sorted(i.iterations for i in _ck_result(futures[carol]).scram_credential_infos) == [
        4096, 10000]
    with pytest.raises(KafkaException) as missing:
        _ck_result(futures[nobody])
    assert missing.value.args[0].name() == "RESOURCE_NOT_FOUND"


# ---------------------------------------------------------------------- CLI
def cli(broker: SaslBroker, *args: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MILLRACE_BOOTSTRAP"}
    env["MILLRACE_BOOTSTRAP"] = broker.bootstrap
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_cli_both_forms(broker: SaslBroker) -> None:
    dave = unique("dave")
    secret = "dave-S3cret-" + uuid.uuid4().hex[:6]
    out = cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", dave,
              "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={secret}],"
                              f"SCRAM-SHA-512=[password={secret}]")
    assert out.stdout == f"Completed updating config for user {dave}.\n"
    described = cli(broker, "configs", "--describe", "--entity-type", "users",
                    "--entity-name", dave).stdout
    assert described == (f"SCRAM credential configs for user-principal '{dave}' are "
                         "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert logs_in(broker, dave, secret, SHA256) and logs_in(broker, dave, secret, SHA512)

    out = cli(broker, "configs", "alter", "--entity-type", "users", "--entity-name", dave,
              "--delete-config", "SCRAM-SHA-512", "-o", "json")
    assert json.loads(out.stdout) == {"entity_type": "users", "entity_name": dave,
                                      "updated": True, "error": None}
    assert not logs_in(broker, dave, secret, SHA512)
    everyone = json.loads(cli(broker, "configs", "describe", "--entity-type", "users",
                              "-o", "json").stdout)
    assert {"entity_type": "users", "entity_name": dave, "credentials": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 8192}]} in everyone

    failed = cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", dave,
                 "--add-config", f"SCRAM-SHA-512=[iterations=99999,password={secret}]", rc=1)
    assert failed.stderr == (f"Error: UNACCEPTABLE_CREDENTIAL: user '{dave}': Too many "
                             "iterations\n")
    missing = cli(broker, "configs", "--describe", "--entity-type", "users",
                  "--entity-name", unique("nobody"), rc=1)
    assert "RESOURCE_NOT_FOUND" in missing.stderr
    for done in (out, failed, missing):
        assert secret not in done.stdout + done.stderr


# ---------------------------------------------------------------------- restart
def test_credentials_survive_a_restart(tmp_path: Path) -> None:
    with SaslBroker(tmp_path) as broker:
        with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.alter_user_scram_credentials([upsert("erin", "erin-secret", SHA512, 5000),
                                                upsert("frank", "frank-secret")]).all()
            admin.alter_user_scram_credentials([
                UserScramCredentialDeletion("frank", SHA256)]).all()
        broker.stop()
        broker.start()
        with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
            assert admin.describe_user_scram_credentials().all() == {
                "erin": UserScramCredentialsDescription(
                    "erin", [ScramCredentialInfo(SHA512, 5000)])}
        assert logs_in(broker, "erin", "erin-secret", SHA512)
        assert not logs_in(broker, "frank", "frank-secret", SHA256)
