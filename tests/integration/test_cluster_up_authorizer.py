"""``millrace cluster up --security sasl_ssl --authorizer`` as a user runs it: the brokers
come up with the ACL authorizer and ``admin`` as super user, it says so, the ``client``
user may do nothing until admin grants it ACLs (no ACL is granted silently), and
``admin.properties`` is what admin grants them with.  ``--authorizer`` on a PLAINTEXT
cluster is refused before anything starts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millrace.launcher.broker_process import free_port
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR
from millrace.testing.confluent_admin import create_topic

pytestmark = [pytest.mark.integration]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

TIMEOUT = 30.0


def cluster_up(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "millrace.cli.main", "cluster", "up",
                             "--no-schema-registry", "--no-console", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


def test_authorizer_on_plaintext_is_refused_before_anything_starts(tmp_path: Path) -> None:
    proc = cluster_up("--dir", str(tmp_path / "c"), "--base-port", str(free_port()),
                      "--authorizer")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "--authorizer needs --security sasl_ssl" in err, err
    assert "User:ANONYMOUS" in err
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_cluster_up_with_the_authorizer_grants_nothing_but_to_admin(tmp_path: Path) -> None:
    directory = tmp_path / "acl"
    proc = cluster_up("--brokers", "1", "--dir", str(directory), "--base-port",
                      str(free_port()), "--http-base-port", str(free_port()),
                      "--security", "sasl_ssl", "--authorizer", "--output", "json")
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)
        info = json.loads(line)
        pids = [info["zookeeper"]["pid"]] + [b["pid"] for b in info["brokers"]]
        assert info["authorizer"] == "kafka.security.authorizer.AclAuthorizer"
        assert info["super_users"] == ["User:admin"]

        client = read_properties(Path(info["client_properties"]))
        admin_props = read_properties(Path(info["admin_properties"]))
        assert Path(info["admin_properties"]).stat().st_mode & 0o777 == 0o600
        assert admin_props["sasl.username"] == "admin"
        admin = AdminClient(admin_props)
        create_topic(admin, NewTopic("orders", 1, 1))  # librdkafka's controller quirk

        # the client user has no ACL: it may not grant itself one (Alter on Cluster) ...
        as_client = AdminClient(client)
        grant_write = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                 "User:client", "*", AclOperation.WRITE,
                                 AclPermissionType.ALLOW)
        with pytest.raises(confluent_kafka.KafkaException) as e:
            for future in as_client.create_acls([grant_write]).values():
                future.result(TIMEOUT)
        assert e.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # ... nor write to the topic (Write on Topic)
        producer = confluent_kafka.Producer({**client, "acks": "all",
                                             "enable.idempotence": False,
                                             "message.timeout.ms": 20_000})
        errors: list[int] = []
        producer.produce("orders", b"before", on_delivery=lambda err, _m:
                         errors.append(err.code() if err else 0))
        producer.flush(TIMEOUT)
        assert errors == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]

        # admin grants Write on the topic: now the client's produce is accepted
        for future in admin.create_acls([grant_write]).values():
            future.result(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while True:  # the ACL reaches the broker through ZooKeeper's change notification
            errors.clear()
            # a new producer: librdkafka keeps a topic it was refused as failed
            producer = confluent_kafka.Producer({**client, "acks": "all",
                                                 "message.timeout.ms": 20_000})
            with contextlib.suppress(confluent_kafka.KafkaException):
                producer.produce("orders", b"after", on_delivery=lambda err, _m:
                                 errors.append(err.code() if err else 0))
            producer.flush(TIMEOUT)
            if errors == [0] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert errors == [0]

        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)  # reaps it and closes its pipes
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
