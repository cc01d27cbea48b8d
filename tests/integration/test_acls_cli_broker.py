"""``millrace acls`` against real broker processes, run as a user runs it (``python -m
millrace.cli.main acls ...`` subprocesses), checked with the admin client.

The broker has Kafka's ZooKeeper-mode authorizer with ``super.users=User:ANONYMOUS`` -- the
PLAINTEXT principal of the CLI, so it may manage ACLs: ACLs are added, listed (kafka-acls'
text and JSON, literal and match), removed with ``--force`` and refused without it on a
piped stdin; the producer and consumer sets are added as Kafka 3.9 adds them; and the
README's example runs.  A broker without an authorizer answers SECURITY_DISABLED, and one
whose ACLs do not let ANONYMOUS alter the cluster CLUSTER_AUTHORIZATION_FAILED: one line,
exit status 1.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.client.admin import KafkaAdminClient
from millrace.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
Op = AclOperation
ALLOW = AclPermissionType.ALLOW


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("acls-cli-broker"),
                       overrides={"authorizer.class.name": AUTHORIZER,
                                  "super.users": "User:ANONYMOUS"}) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                          default_api_timeout_ms=15_000) as client:
        yield client


def acls(broker: BrokerProcess, *args: str, rc: int = 0, stdin: str | None = ""
         ) -> subprocess.CompletedProcess[str]:
    """``millrace acls ARGS`` against ``broker``; stdin is a pipe (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "MILLRACE_BOOTSTRAP"}
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", "acls",
                           "-b", broker.bootstrap, *args],
                          capture_output=True, text=True, env=env, timeout=60, input=stdin)
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    if rc:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return done


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def binding(rt: ResourceType, name: str, principal: str, op: AclOperation,
            pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern),
                      AccessControlEntry(principal, "*", op, ALLOW))


def of_principal(admin: KafkaAdminClient, principal: str) -> set[AclBinding]:
    return set(admin.describe_acls(AclBindingFilter(
        ResourcePatternFilter.ANY, AccessControlEntryFilter(
            principal, None, AclOperation.ANY, AclPermissionType.ANY))))


def test_add_list_and_remove(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic, who = unique("orders"), f"User:{unique('alice')}"
    out = acls(broker, "--add", "--allow-principal", who, "--operation", "Read",
               "--operation", "Describe", "--topic", topic).stdout
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert out == (f"Adding ACLs for resource `{pattern}`: \n"
                   f" \t(principal={who}, host=*, operation=READ, permissionType=ALLOW)\n"
                   f"\t(principal={who}, host=*, operation=DESCRIBE, permissionType=ALLOW) "
                   "\n\n")
    assert of_principal(admin, who) == {binding(ResourceType.TOPIC, topic, who, Op.READ),
                                        binding(ResourceType.TOPIC, topic, who, Op.DESCRIBE)}

    out = acls(broker, "--list", "--topic", topic).stdout
    assert out == (f"Current ACLs for resource `{pattern}`: \n"
                   f" \t(principal={who}, host=*, operation=READ, permissionType=ALLOW)\n"
                   f"\t(principal={who}, host=*, operation=DESCRIBE, permissionType=ALLOW) "
                   "\n\n")
    assert f"name={topic}," in acls(broker, "--list").stdout  # every ACL
    listed = json.loads(acls(broker, "--list", "--topic", topic, "--output", "json").stdout)
    assert listed == [{"resource_type": "TOPIC", "name": topic, "pattern_type": "LITERAL",
                       "principal": who, "host": "*", "operation": op,
                       "permission_type": "ALLOW"} for op in ("READ", "DESCRIBE")]
    # a literal filter takes the name as it is; match finds what applies to a name
    assert acls(broker, "--list", "--topic", f"{topic}-x").stdout == ""
    acls(broker, "--add", "--deny-principal", who, "--operation", "Read", "--topic",
         f"{topic}-", "--resource-pattern-type", "prefixed")
    matched = json.loads(acls(broker, "--list", "--topic", f"{topic}-x",
                              "--resource-pattern-type", "match", "-o", "json").stdout)
    assert [(b["name"], b["pattern_type"], b["permission_type"]) for b in matched] == [
        (f"{topic}-", "PREFIXED", "DENY")]

    # a piped stdin cannot answer "are you sure": refused, nothing removed
    err = acls(broker, "--remove", "--topic", topic, rc=1, stdin="y\n").stderr
    assert "--force" in err
    assert len(of_principal(admin, who)) == 3

    out = acls(broker, "--remove", "--force", "--topic", topic, "--allow-principal", who,
               "--operation", "Read").stdout
    assert out == (f"Removed ACLs for resource `{pattern}`: \n"
                   f" \t(principal={who}, host=*, operation=READ, permissionType=ALLOW) \n\n")
    assert binding(ResourceType.TOPIC, topic, who, Op.READ) not in of_principal(admin, who)
    removed = json.loads(acls(broker, "--remove", "--force", "--topic", topic, "--topic",
                              f"{topic}-", "--resource-pattern-type", "any", "-o",
                              "json").stdout)
    assert {(b["name"], b["operation"]) for b in removed} == {(topic, "DESCRIBE"),
                                                             (f"{topic}-", "READ")}
    assert of_principal(admin, who) == set()
    assert acls(broker, "--list", "--topic", topic).stdout == ""


def test_the_producer_and_consumer_sets(broker: BrokerProcess, admin: KafkaAdminClient
                                        ) -> None:
    topic, tx, group = unique("pay"), unique("tx"), unique("billing")
    app, reader = f"User:{unique('app')}", f"User:{unique('reader')}"
    acls(broker, "--add", "--producer", "--idempotent", "--allow-principal", app, "--topic",
         topic, "--transactional-id", tx)
    assert of_principal(admin, app) == {
        binding(ResourceType.TOPIC, topic, app, Op.WRITE),
        binding(ResourceType.TOPIC, topic, app, Op.DESCRIBE),
        binding(ResourceType.TOPIC, topic, app, Op.CREATE),
        binding(ResourceType.TRANSACTIONAL_ID, tx, app, Op.WRITE),
        binding(ResourceType.TRANSACTIONAL_ID, tx, app, Op.DESCRIBE),
        binding(ResourceType.CLUSTER, "kafka-cluster", app, Op.IDEMPOTENT_WRITE)}

    acls(broker, "--add", "--consumer", "--allow-principal", reader, "--topic", topic,
         "--group", group)
    assert of_principal(admin, reader) == {
        binding(ResourceType.TOPIC, topic, reader, Op.READ),
        binding(ResourceType.TOPIC, topic, reader, Op.DESCRIBE),
        binding(ResourceType.GROUP, group, reader, Op.READ)}
    out = acls(broker, "--list", "--principal", reader).stdout
    assert out.startswith(f"ACLs for principal `{reader}`\n")
    assert app not in out and out.count("Current ACLs for resource") == 2

    # the same sets name what --remove takes away
    acls(broker, "--remove", "--force", "--consumer", "--allow-principal", reader, "--topic",
         topic, "--group", group)
    acls(broker, "--remove", "--force", "--producer", "--idempotent", "--allow-principal",
         app, "--topic", topic, "--transactional-id", tx)
    assert of_principal(admin, reader) == set() and of_principal(admin, app) == set()


def test_the_readme_example(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Security\n"):]
    section = section[:section.index("\n## ", 1)]
    example = next(m for m in re.findall(r"`([^`]*)`", section)
                   if m.startswith(".venv/bin/millrace acls "))
    argv = shlex.split(example)
    # where things are: the test's broker, no client.properties (PLAINTEXT: a super user)
    for option in ("-b", "--command-config"):
        i = argv.index(option)
        del argv[i:i + 2]
    assert argv[:3] == [".venv/bin/millrace", "acls", "--add"], argv
    acls(broker, *argv[2:])
    assert of_principal(admin, "User:alice") >= {
        binding(ResourceType.TOPIC, "payments", "User:alice", Op.READ),
        binding(ResourceType.GROUP, "billing", "User:alice", Op.READ)}


def test_a_broker_without_an_authorizer(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "plain") as plain:
        err = acls(plain, "--list", rc=1).stderr
        assert err == "Error: SECURITY_DISABLED: No Authorizer is configured on the broker\n"
        err = acls(plain, "--add", "--allow-principal", "User:a", "--operation", "Read",
                   "--operation", "Write", "--topic", "t1", "--topic", "t2", rc=1).stderr
        assert err == "Error: SECURITY_DISABLED: No Authorizer is configured.\n"
        err = acls(plain, "--remove", "--force", "--topic", "t1", rc=1).stderr
        assert err == "Error: SECURITY_DISABLED: No Authorizer is configured.\n"


def test_a_principal_not_allowed_to_alter_the_cluster(broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    """No super user, no ACL, nobody allowed by default: ANONYMOUS may neither add nor
    list -- the broker's refusal, one line.  The same command lines work against the
    broker where ANONYMOUS is a super user (the control)."""
    add = ["--add", "--allow-principal", f"User:{unique('a')}", "--topic", unique("t")]
    with BrokerProcess(tmp_path / "locked", overrides={
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false"}) as locked:
        err = acls(locked, *add, rc=1).stderr
        assert err.startswith("Error: CLUSTER_AUTHORIZATION_FAILED"), err
        err = acls(locked, "--list", rc=1).stderr
        assert err.startswith("Error: CLUSTER_AUTHORIZATION_FAILED"), err
    acls(broker, *add)
    acls(broker, "--list")
    acls(broker, "--remove", "--force", *add[1:])
