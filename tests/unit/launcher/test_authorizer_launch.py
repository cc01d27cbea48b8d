"""The launcher's authorizer option before anything starts: what every broker of a
``LocalCluster(authorizer=True)`` is configured with, the PLAINTEXT refusal (every
principal would be ANONYMOUS), and ``millrace cluster up --authorizer``'s argument check.
No process is started, no socket is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.cli import cluster as cluster_cmd
from millrace.cli.common import CommandError
from millrace.launcher import broker_process, zookeeper_process
from millrace.launcher.dev_security import ADMIN_USER, CLIENT_USER, DevSecurity
from millrace.launcher.local_cluster import LocalCluster


def security(tmp_path: Path) -> DevSecurity:
    return DevSecurity(tmp_path / "security", {ADMIN_USER: "a-pw", CLIENT_USER: "c-pw"})


def test_every_broker_gets_the_acl_authorizer_with_admin_as_super_user(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 3, security=security(tmp_path), authorizer=True)
    for broker_id in (1, 2, 3):
        overrides = cluster._broker(broker_id).overrides
        assert overrides["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
        assert overrides["super.users"] == "User:admin"
        # the brokers are admin to each other, so replication passes the authorizer
        assert 'username="admin"' in overrides[
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
        assert overrides["listeners"].startswith("SASL_SSL://")
    # no ACL is granted silently: nothing but the two settings above differs
    ports = {"base_port": 19092, "zookeeper_port": 12181, "http_base_port": 19644}
    plain = LocalCluster(tmp_path, 1, security=security(tmp_path), **ports)._broker(1).overrides
    with_acl = LocalCluster(tmp_path, 1, security=security(tmp_path), authorizer=True,
                            **ports)._broker(1).overrides
    assert {k: v for k, v in with_acl.items() if k not in plain} == {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin"}
    assert all(with_acl[k] == v for k, v in plain.items())


def test_without_the_option_no_authorizer_is_configured(tmp_path: Path) -> None:
    overrides = LocalCluster(tmp_path, 1, security=security(tmp_path))._broker(1).overrides
    assert "authorizer.class.name" not in overrides and "super.users" not in overrides


def test_a_plaintext_cluster_with_the_authorizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"needs a secured cluster .*User:ANONYMOUS"):
        LocalCluster(tmp_path, 3, authorizer=True)


def test_client_properties_of_another_user(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 1, security=security(tmp_path))
    assert cluster.client_properties()["sasl.username"] == CLIENT_USER
    admin = cluster.client_properties(ADMIN_USER)
    assert (admin["sasl.username"], admin["sasl.password"]) == (ADMIN_USER, "a-pw")


def test_admin_properties_file_is_private(tmp_path: Path) -> None:
    sec = security(tmp_path)
    sec.directory.mkdir(parents=True)
    path = sec.write_client_properties("127.0.0.1:9092", ADMIN_USER)
    assert path == sec.directory / "admin.properties"
    assert path.stat().st_mode & 0o777 == 0o600
    assert "sasl.username=admin" in path.read_text()
    assert sec.write_client_properties("127.0.0.1:9092") == sec.directory / "client.properties"


def test_cluster_up_refuses_the_authorizer_without_security(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_process, "port_in_use", lambda port, host="127.0.0.1": False)
    monkeypatch.setattr(zookeeper_process, "zookeeper_missing", lambda: None)
    with pytest.raises(CommandError) as e:
        cluster_cmd.check_up_arguments(3, 9092, None, security="none", authorizer=True)
    assert str(e.value) == ("--authorizer needs --security sasl_ssl: on a PLAINTEXT cluster "
                            "every client is User:ANONYMOUS, so no ACL can tell them apart")
    cluster_cmd.check_up_arguments(3, 9092, None, security="sasl_ssl", authorizer=True)
