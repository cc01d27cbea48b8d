"""Client quotas against a real broker process: ``millrace configs`` with kafka-configs'
flags (users, clients, both, ``--entity-default``, add / delete / describe, table and
JSON), the millrace admin client, and kafka-python as a second client speaking
DescribeClientQuotas / AlterClientQuotas on its own (it has no admin call for them in
3.0.12, so its request classes go through its admin client's connection manager): what
one writes the others read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from millrace.client.admin import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
    KafkaAdminClient,
)
from millrace.common.errors import InvalidRequestError
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("quota-broker")) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


def cli(broker: BrokerProcess, *args: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MILLRACE_BOOTSTRAP"}
    env["MILLRACE_BOOTSTRAP"] = broker.bootstrap
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    if rc:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return done


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_user_quota_alter_describe_delete(broker: BrokerProcess) -> None:
    user = unique("alice")
    out = cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert out.stdout == f"Completed updating config for user {user}.\n"
    described = cli(broker, "configs", "--describe", "--entity-type", "users",
                    "--entity-name", user).stdout
    assert described == (f"Quota configs for user-principal '{user}' are "
                         "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n")
    cli(broker, "configs", "alter", "--entity-type", "users", "--entity-name", user,
        "--delete-config", "consumer_byte_rate")
    again = json.loads(cli(broker, "configs", "describe", "--entity-type", "users",
                           "--entity-name", user, "-o", "json").stdout)
    assert again == [{"entity": {"user": user}, "quotas": {"producer_byte_rate": 1048576.0}}]
    missing = cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name",
                  user, "--delete-config", "request_percentage", rc=1)
    assert missing.stderr == "Error: Invalid config(s): request_percentage\n"


def test_defaults_and_the_user_client_form(broker: BrokerProcess) -> None:
    user, client = unique("bob"), unique("app")
    out = cli(broker, "configs", "--alter", "--entity-type", "clients", "--entity-default",
              "--add-config", "request_percentage=50")
    assert out.stdout == "Completed updating default config for clients in the cluster.\n"
    cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", user,
        "--entity-type", "clients", "--entity-name", client, "--add-config",
        "producer_byte_rate=4096")
    cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", user,
        "--entity-type", "clients", "--entity-default", "--add-config",
        "consumer_byte_rate=8192")
    assert cli(broker, "configs", "--describe", "--entity-type", "clients",
               "--entity-default").stdout == (
        "Quota configs for the default client-id are request_percentage=50.0\n")
    both = cli(broker, "configs", "--describe", "--entity-type", "users", "--entity-name",
               user, "--entity-type", "clients").stdout.splitlines()
    assert both == [
        f"Quota configs for user-principal '{user}', client-id '{client}' are "
        "producer_byte_rate=4096.0",
        f"Quota configs for user-principal '{user}', the default client-id are "
        "consumer_byte_rate=8192.0"]
    # the user alone (strict): no quota of its own and no credential -- nothing found
    alone = cli(broker, "configs", "--describe", "--entity-type", "users", "--entity-name",
                user, rc=1)
    assert alone.stdout == "" and "RESOURCE_NOT_FOUND" in alone.stderr
    cli(broker, "configs", "--alter", "--entity-type", "clients", "--entity-default",
        "--delete-config", "request_percentage")
    assert cli(broker, "configs", "--describe", "--entity-type", "clients",
               "--entity-default").stdout == ""


def test_what_the_broker_refuses_and_what_the_cli_refuses(broker: BrokerProcess) -> None:
    user = unique("carol")
    bad = cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--add-config", "producer_byte_rate=-1", rc=1)
    assert bad.stderr == (f"Error: INVALID_REQUEST: client quota entity 'user={user}': "
                          "Quota producer_byte_rate must be greater than 0\n")
    frac = cli(broker, "configs", "--alter", "--entity-type", "clients", "--entity-name",
               user, "--add-config", "consumer_byte_rate=1.5", rc=1)
    assert "consumer_byte_rate cannot be a fractional value." in frac.stderr
    mixed = cli(broker, "configs", "--alter", "--entity-type", "users", "--entity-name", user,
                "--add-config", "producer_byte_rate=1,SCRAM-SHA-256=[password=x]", rc=1)
    assert "SCRAM credentials and quotas cannot be altered in one command" in mixed.stderr
    cli(broker, "configs", "--alter", "--entity-type", "topics", "--entity-name", "t",
        "--entity-type", "clients", "--entity-name", "c", "--add-config", "x=1", rc=1)
    assert cli(broker, "configs", "--describe", "--entity-type", "clients", "--entity-name",
               user).stdout == ""


def test_millrace_admin_and_kafka_python_read_each_others_writes(
        broker: BrokerProcess) -> None:
    with warnings.catch_warnings():  # kafka-python's JSON loader is deprecated API
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient as KpAdmin
        from kafka.protocol.admin.client_quotas import (
            AlterClientQuotasRequest,
            DescribeClientQuotasRequest,
        )
    user, client = unique("dave"), unique("svc")
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        entity = ClientQuotaEntity({"user": user, "client-id": None})
        result = admin.alter_client_quotas([ClientQuotaAlteration(
            entity, [ClientQuotaOp("producer_byte_rate", 1000),
                     ClientQuotaOp("request_percentage", 25.5)])])
        assert result[entity].result() is None
        bad = ClientQuotaEntity({"user": user, "ip": "10.0.0.1"})
        failed = admin.alter_client_quotas([ClientQuotaAlteration(
            bad, [ClientQuotaOp("producer_byte_rate", 1)])])
        with pytest.raises(InvalidRequestError, match="IP entity should not be combined"):
            failed[bad].result()

        kp = KpAdmin(bootstrap_servers=broker.bootstrap)
        try:
            def send(request: Any) -> Any:
                return kp._manager.run(kp._manager.send, request)

            A = AlterClientQuotasRequest
            response = send(A(validate_only=False, entries=[A.EntryData(
                entity=[A.EntryData.EntityData(entity_type="client-id", entity_name=client)],
                ops=[A.EntryData.OpData(key="consumer_byte_rate", value=512.0,
                                        remove=False)])]))
            assert [(e.error_code, e.error_message) for e in response.entries] == [(0, None)]
            D = DescribeClientQuotasRequest
            response = send(D(strict=False, components=[D.ComponentData(
                entity_type="user", match_type=0, match=user)]))
            assert response.error_code == 0
            assert [([(e.entity_type, e.entity_name) for e in r.entity],
                     sorted((v.key, v.value) for v in r.values)) for r in response.entries] == [
                ([("user", user), ("client-id", None)],
                 [("producer_byte_rate", 1000.0), ("request_percentage", 25.5)])]
        finally:
            kp.close()

        got = admin.describe_client_quotas(ClientQuotaFilter.contains_only(
            [ClientQuotaFilterComponent.of_entity("client-id", client)]))
        assert got == {ClientQuotaEntity({"client-id": client}): {"consumer_byte_rate": 512.0}}


def test_ip_connection_rate_through_configs(broker: BrokerProcess) -> None:
    """``--entity-type ips`` (KIP-612) is routed to the quota calls: set, described in
    both forms, the default entity, a client key refused with one line."""
    ip = "10.11.12.13"
    out = cli(broker, "configs", "--alter", "--entity-type", "ips", "--entity-name", ip,
              "--add-config", "connection_creation_rate=50")
    assert out.stdout == f"Completed updating config for ip {ip}.\n"
    assert cli(broker, "configs", "--describe", "--entity-type", "ips", "--entity-name",
               ip).stdout == f"Quota configs for ip '{ip}' are connection_creation_rate=50.0\n"
    cli(broker, "configs", "--alter", "--entity-type", "ips", "--entity-default",
        "--add-config", "connection_creation_rate=100")
    listed = json.loads(cli(broker, "configs", "--describe", "--entity-type", "ips",
                            "--output", "json").stdout)
    assert {"entity": {"ip": ip}, "quotas": {"connection_creation_rate": 50.0}} in listed
    assert {"entity": {"ip": None}, "quotas": {"connection_creation_rate": 100.0}} in listed
    refused = cli(broker, "configs", "--alter", "--entity-type", "ips", "--entity-name", ip,
                  "--add-config", "producer_byte_rate=5", rc=1)
    assert "connection_creation_rate" in refused.stderr
    cli(broker, "configs", "--alter", "--entity-type", "ips", "--entity-default",
        "--delete-config", "connection_creation_rate")
    cli(broker, "configs", "--alter", "--entity-type", "ips", "--entity-name", ip,
        "--delete-config", "connection_creation_rate")
    assert json.loads(cli(broker, "configs", "--describe", "--entity-type", "ips",
                          "--output", "json").stdout) == []
