"""``millrace acls`` without a broker: the command line as bindings and filters (kafka-acls'
rules: default host ``*`` and operation All, the producer and consumer sets, pattern
types), the lines and exit status 2 of refused command lines, and -- over an in-memory
admin client that matches filters with the ACL model -- kafka-acls' text, the JSON, the
remove confirmation and the broker's errors as one line, exit status 1."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterable

import pytest

from millrace.cli import acls as acls_cmd
from millrace.cli.main import build_parser, main
from millrace.client.admin import AdminResult
from millrace.client.admin.types import FilterResult
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
)
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

Op = AclOperation
Allow, Deny = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                              ResourceType.TRANSACTIONAL_ID)


def parse(*argv: str) -> acls_cmd.AclPlan:
    args = build_parser().parse_args(["acls", *argv])
    return acls_cmd.build_plan(args)


def bindings(*argv: str
             ) -> set[tuple[ResourceType, str, PatternType, str, str, AclOperation, object]]:
    return {(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type,
             b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission_type)
            for b in parse("--add", *argv).bindings()}


def acl(rt: ResourceType, name: str, principal: str, op: AclOperation, *,
        pattern: PatternType = LITERAL, permission: AclPermissionType = Allow,
        host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern),
                      AccessControlEntry(principal, host, op, permission))


# ---------------------------------------------------------------------- to bindings
def test_principals_operations_and_hosts_multiply_with_kafkas_defaults() -> None:
    assert bindings("--allow-principal", "User:alice", "--topic", "orders") == {
        (TOPIC, "orders", LITERAL, "User:alice", "*", Op.ALL, Allow)}
    got = bindings("--allow-principal", "User:alice", "--allow-principal", "User:bob",
                   "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
                   "--operation", "read", "--operation", "DESCRIBE",
                   "--deny-principal", "User:mallory", "--topic", "orders", "--group", "g")
    allowed = {(rt, name, LITERAL, p, h, op, Allow) for rt, name in ((TOPIC, "orders"),
                                                                     (GROUP, "g"))
               for p in ("User:alice", "User:bob") for h in ("10.0.0.1", "10.0.0.2")
               for op in (Op.READ, Op.DESCRIBE)}
    denied = {(rt, name, LITERAL, "User:mallory", "*", op, Deny)
              for rt, name in ((TOPIC, "orders"), (GROUP, "g"))
              for op in (Op.READ, Op.DESCRIBE)}
    assert got == allowed | denied


@pytest.mark.parametrize("name", ["Read", "read", "READ", " read "])
def test_operation_names_are_case_insensitive(name: str) -> None:
    assert {b[5] for b in bindings("--allow-principal", "User:a", "--topic", "t",
                                   "--operation", name)} == {Op.READ}


@pytest.mark.parametrize(("name", "op"), [("ClusterAction", Op.CLUSTER_ACTION),
                                          ("clusteraction", Op.CLUSTER_ACTION),
                                          ("CLUSTER_ACTION", Op.CLUSTER_ACTION),
                                          ("idempotentWrite", Op.IDEMPOTENT_WRITE),
                                          ("AlterConfigs", Op.ALTER_CONFIGS),
                                          ("all", Op.ALL)])
def test_every_spelling_kafka_accepts_for_cluster_operations(name: str,
                                                             op: AclOperation) -> None:
    assert bindings("--allow-principal", "User:a", "--cluster", "--operation", name) == {
        (CLUSTER, "kafka-cluster", LITERAL, "User:a", "*", op, Allow)}


def test_prefixed_patterns_and_the_wildcard_name() -> None:
    assert bindings("--allow-principal", "User:a", "--operation", "Write", "--topic", "pay-",
                    "--transactional-id", "*", "--resource-pattern-type", "PREFIXED") == {
        (TOPIC, "pay-", PREFIXED, "User:a", "*", Op.WRITE, Allow),
        (TXN, "*", PREFIXED, "User:a", "*", Op.WRITE, Allow)}


def test_the_producer_set_as_kafka_3_9() -> None:
    assert bindings("--producer", "--allow-principal", "User:app", "--topic", "orders") == {
        (TOPIC, "orders", LITERAL, "User:app", "*", op, Allow)
        for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)}
    got = bindings("--producer", "--idempotent", "--allow-principal", "User:app",
                   "--allow-host", "10.1.1.1", "--topic", "pay-", "--transactional-id", "tx-",
                   "--resource-pattern-type", "prefixed")
    assert got == {
        *((TOPIC, "pay-", PREFIXED, "User:app", "10.1.1.1", op, Allow)
          for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)),
        *((TXN, "tx-", PREFIXED, "User:app", "10.1.1.1", op, Allow)
          for op in (Op.WRITE, Op.DESCRIBE)),
        # the cluster's pattern stays literal whatever the topics'
        (CLUSTER, "kafka-cluster", LITERAL, "User:app", "10.1.1.1", Op.IDEMPOTENT_WRITE, Allow)}


def test_the_consumer_set_and_both_sets_together() -> None:
    consumer = bindings("--consumer", "--allow-principal", "User:c", "--topic", "orders",
                        "--group", "billing")
    assert consumer == {(TOPIC, "orders", LITERAL, "User:c", "*", Op.READ, Allow),
                        (TOPIC, "orders", LITERAL, "User:c", "*", Op.DESCRIBE, Allow),
                        (GROUP, "billing", LITERAL, "User:c", "*", Op.READ, Allow)}
    both = bindings("--producer", "--consumer", "--allow-principal", "User:c", "--topic",
                    "orders", "--group", "billing")
    assert {b[5] for b in both if b[0] is TOPIC} == {Op.READ, Op.WRITE, Op.DESCRIBE, Op.CREATE}
    assert {b[5] for b in both if b[0] is GROUP} == {Op.READ}


# ---------------------------------------------------------------------- to filters
def test_remove_without_principals_removes_every_acl_of_each_resource() -> None:
    plan = parse("--remove", "--topic", "orders", "--cluster")
    assert plan.delete_filters() == [
        AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", LITERAL),
                         AccessControlEntryFilter.ANY),
        AclBindingFilter(ResourcePatternFilter(CLUSTER, "kafka-cluster", LITERAL),
                         AccessControlEntryFilter.ANY)]


def test_remove_with_principals_removes_exactly_those_acls() -> None:
    plan = parse("--remove", "--topic", "o-", "--resource-pattern-type", "match",
                 "--allow-principal", "User:a", "--operation", "Read")
    assert plan.delete_filters() == [AclBindingFilter(
        ResourcePatternFilter(TOPIC, "o-", PatternType.MATCH),
        AccessControlEntryFilter("User:a", "*", Op.READ, Allow))]


def test_list_filters() -> None:
    assert parse("--list").describe_filters() == [AclBindingFilter.ANY]
    assert parse("--list", "--principal", "User:a").describe_filters() == [AclBindingFilter.ANY]
    plan = parse("--list", "--topic", "orders", "--topic", "orders", "--cluster",
                 "--resource-pattern-type", "any", "--principal", "User:a")
    assert plan.describe_filters() == [
        AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.ANY),
                         AccessControlEntryFilter.ANY),
        AclBindingFilter(ResourcePatternFilter(CLUSTER, "kafka-cluster", PatternType.ANY),
                         AccessControlEntryFilter.ANY)]
    assert plan.principals == ["User:a"]


# ---------------------------------------------------------------------- refusals
def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main(["acls", *argv])
    assert e.value.code == 2, argv
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("millrace acls: error: "), lines[0]
    assert lines[0].endswith(" (see millrace acls --help)"), lines[0]
    return lines[0].removeprefix("millrace acls: error: ").removesuffix(
        " (see millrace acls --help)")


P = ["--allow-principal", "User:a"]


@pytest.mark.parametrize(("argv", "message"), [
    ([], "one of the arguments --add --remove --list is required"),
    (["--add", "--list"], "argument --list: not allowed with argument --add"),
    (["--add", *P], "give at least one resource: --topic, --group, --cluster or "
                    "--transactional-id"),
    (["--add", "--topic", "t"], "give --allow-principal or --deny-principal to add ACLs"),
    (["--add", *P, "--topic", "t", "--operation", "ClusterAction", "--operation", "Read",
      "--operation", "IdempotentWrite"],
     "--operation ClusterAction, IdempotentWrite: not an operation of TOPIC resources (All, "
     "Alter, AlterConfigs, Create, Delete, Describe, DescribeConfigs, Read, Write)"),
    (["--remove", *P, "--group", "g", "--operation", "Write"],
     "--operation Write: not an operation of GROUP resources (All, Delete, Describe, Read)"),
    (["--add", *P, "--topic", "t", "--operation", "Frob"],
     "--operation: unknown operation 'Frob' (one of All, Read, Write, Create, Delete, Alter, "
     "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite)"),
    (["--add", *P, "--topic", "t", "--operation", "Any"],
     "--operation: unknown operation 'Any' (one of All, Read, Write, Create, Delete, Alter, "
     "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite)"),
    (["--add", *P, "--topic", "t", "--resource-pattern-type", "match"],
     "--resource-pattern-type match is not valid when adding ACLs (literal or prefixed)"),
    (["--add", *P, "--topic", "t", "--resource-pattern-type", "any"],
     "--resource-pattern-type any is not valid when adding ACLs (literal or prefixed)"),
    (["--list", "--resource-pattern-type", "glob"],
     "argument --resource-pattern-type: invalid choice: 'glob' (choose from 'literal', "
     "'prefixed', 'match', 'any')"),
    (["--add", "--allow-principal", "alice", "--topic", "t"],
     "--allow-principal: expected principalType:name (User:alice; User:* for everyone), got "
     "'alice'"),
    (["--add", "--allow-principal", "Group:ops", "--topic", "t"],
     "Invalid principal `Group:ops`: expected User:<name> (User:* for every principal)"),
    (["--add", *P, "--allow-host", "broker.example.com", "--topic", "t"],
     "Invalid host `broker.example.com`: expected * or an IP address (not a host name)"),
    (["--add", *P, "--topic", " "], "--topic needs a name, got ' '"),
    (["--add", *P, "--cluster", "--resource-pattern-type", "prefixed"],
     "--cluster has no prefixed pattern: give --resource-pattern-type literal (the default)"),
    (["--list", *P], "--list cannot be used with --allow-principal"),
    (["--list", "--consumer"], "--list cannot be used with --consumer"),
    (["--list", "--operation", "Read"], "--list cannot be used with --operation"),
    (["--add", "--principal", "User:a", "--topic", "t"],
     "--principal goes with --list only (to add or remove: --allow-principal, "
     "--deny-principal)"),
    (["--add", "--producer", *P, "--topic", "t", "--operation", "Write"],
     "--producer cannot be used with --operation"),
    (["--add", "--consumer", *P, "--topic", "t", "--group", "g", "--deny-principal",
      "User:b"], "--consumer cannot be used with --deny-principal"),
    (["--add", "--producer", *P, "--topic", "t", "--cluster"],
     "--producer cannot be used with --cluster (--idempotent adds IdempotentWrite on it)"),
    (["--add", "--producer", *P, "--transactional-id", "tx"], "--producer needs --topic"),
    (["--add", "--consumer", *P, "--topic", "t"], "--consumer needs --topic and --group"),
    (["--add", "--consumer", *P, "--topic", "t", "--group", "g", "--transactional-id", "x"],
     "--consumer cannot be used with --transactional-id (with --producer it can)"),
    (["--add", "--producer", *P, "--topic", "t", "--group", "g"],
     "--producer cannot be used with --group (with --consumer it can)"),
    (["--add", "--idempotent", *P, "--topic", "t"], "--idempotent goes with --producer only"),
    (["--remove", "--force", "--topic", "t", "--allow-host", "10.0.0.1"],
     "--allow-host needs --allow-principal"),
    (["--remove", "--force", "--producer", "--idempotent", "--topic", "t"],
     "--producer needs --allow-principal"),
    (["--add", "--consumer", "--topic", "t", "--group", "g"],
     "--consumer needs --allow-principal"),
])
def test_refused_command_lines_are_one_line_exit_2(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acls_cmd, "admin_client", lambda args: pytest.fail("no broker"))
    assert refused(argv, capsys) == message


def test_a_good_command_line_is_not_refused(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control of the refusals above: the same admin client stand-in, a
    command line kafka-acls accepts, and the broker is reached."""
    admin = FakeAdmin()
    monkeypatch.setattr(acls_cmd, "admin_client", lambda args: admin)
    assert main(["acls", "--add", *P, "--topic", "t", "--operation", "Read"]) == 0
    assert admin.acls == {acl(TOPIC, "t", "User:a", Op.READ)}


# ---------------------------------------------------------------------- against a fake
class FakeAdmin:
    """An in-memory broker side of the ACL calls, matching with the model's filters;
    ``error`` fails every call as a broker without an authorizer does."""

    def __init__(self, acls: Iterable[AclBinding] = (), error: Exception | None = None) -> None:
        self.acls = set(acls)
        self.error = error
        self.calls: list[str] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def create_acls(self, bindings: Iterable[AclBinding]) -> AdminResult[AclBinding, None]:
        self.calls.append("create")
        result: AdminResult[AclBinding, None] = AdminResult()
        for b in bindings:
            if self.error is not None:
                result.set_error(b, self.error)
            elif b.pattern.name == "bad":
                result.set_error(b, InvalidRequestError("no bad names"))
            else:
                self.acls.add(b)
                result.set_value(b, None)
        return result

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        self.calls.append("describe")
        if self.error is not None:
            raise self.error
        return [b for b in self.acls if flt.matches(b)]

    def delete_acls(self, filters: Iterable[AclBindingFilter]
                    ) -> AdminResult[AclBindingFilter, list[FilterResult]]:
        self.calls.append("delete")
        result: AdminResult[AclBindingFilter, list[FilterResult]] = AdminResult()
        for f in filters:
            if self.error is not None:
                result.set_error(f, self.error)
                continue
            matched = [b for b in self.acls if f.matches(b)]
            self.acls -= set(matched)
            result.set_value(f, [FilterResult(b) for b in matched])
        return result


ORDERS_READ = acl(TOPIC, "orders", "User:alice", Op.READ)
ORDERS_DESCRIBE = acl(TOPIC, "orders", "User:alice", Op.DESCRIBE)
ORDERS_BOB = acl(TOPIC, "orders", "User:bob", Op.WRITE, permission=Deny, host="10.0.0.9")
PAY_PREFIX = acl(TOPIC, "pay-", "User:bob", Op.WRITE, pattern=PREFIXED)
GROUP_READ = acl(GROUP, "billing", "User:alice", Op.READ)


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin([ORDERS_READ, ORDERS_DESCRIBE, ORDERS_BOB, PAY_PREFIX, GROUP_READ])
    monkeypatch.setattr(acls_cmd, "admin_client", lambda args: fake)
    return fake


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["acls", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_prints_kafka_acls_blocks_sorted(admin: FakeAdmin,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--list")
    assert (code, err) == (0, "")
    assert out == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=10.0.0.9, operation=WRITE, permissionType=DENY) \n"
        "\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay-, "
        "patternType=PREFIXED)`: \n"
        " \t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) \n"
        "\n"
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=billing, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n"
        "\n")


def test_list_with_match_finds_what_applies_to_a_name(
        admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--list", "--topic", "pay-eu", "--resource-pattern-type",
                       "match", "-o", "json")
    assert code == 0
    assert json.loads(out) == [{"resource_type": "TOPIC", "name": "pay-", "pattern_type":
                                "PREFIXED", "principal": "User:bob", "host": "*",
                                "operation": "WRITE", "permission_type": "ALLOW"}]
    # literal (the default) takes the name as it is: no ACL is on "pay-eu" itself
    assert run(capsys, "--list", "--topic", "pay-eu", "-o", "json")[1].strip() == "[]"


def test_list_of_principals(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--list", "--principal", "User:bob", "--principal",
                       "User:nobody")
    assert code == 0
    assert out == (
        "ACLs for principal `User:bob`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:bob, host=10.0.0.9, operation=WRITE, permissionType=DENY) \n\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay-, "
        "patternType=PREFIXED)`: \n"
        " \t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) \n\n"
        "ACLs for principal `User:nobody`\n")
    out = run(capsys, "--list", "--topic", "orders", "--principal", "User:alice", "-o",
              "json")[1]
    assert [(b["name"], b["principal"], b["operation"]) for b in json.loads(out)] == [
        ("orders", "User:alice", "READ"), ("orders", "User:alice", "DESCRIBE")]


def test_add_prints_what_was_added(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]
                                   ) -> None:
    code, out, err = run(capsys, "--add", "--allow-principal", "User:carol", "--operation",
                         "Read", "--operation", "Describe", "--topic", "logs")
    assert (code, err) == (0, "")
    assert out == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=logs, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    assert acl(TOPIC, "logs", "User:carol", Op.DESCRIBE) in admin.acls
    code, out, _ = run(capsys, "--add", "--deny-principal", "User:carol", "--group", "g",
                       "-o", "json")
    assert code == 0
    assert json.loads(out) == [{"resource_type": "GROUP", "name": "g", "pattern_type":
                                "LITERAL", "principal": "User:carol", "host": "*",
                                "operation": "ALL", "permission_type": "DENY"}]


def test_a_binding_the_broker_refuses_is_named_the_others_are_added(
        admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--add", "--allow-principal", "User:c", "--operation",
                         "Read", "--topic", "bad", "--topic", "good")
    assert code == 1
    assert "name=good" in out and "name=bad" not in out
    assert err == ("Error: adding (principal=User:c, host=*, operation=READ, "
                   "permissionType=ALLOW) on `ResourcePattern(resourceType=TOPIC, name=bad, "
                   "patternType=LITERAL)`: INVALID_REQUEST: no bad names\n")


@pytest.mark.parametrize("error", [SecurityDisabledError("No Authorizer is configured."),
                                   ClusterAuthorizationFailedError(
                                       "Cluster authorization failed.")])
@pytest.mark.parametrize("argv", [
    ["--add", "--allow-principal", "User:a", "--operation", "Read", "--operation", "Write",
     "--topic", "t1", "--topic", "t2"],
    ["--remove", "--force", "--topic", "t1", "--topic", "t2"],
    ["--list"],
])
def test_a_broker_error_is_one_line_exit_1(argv: list[str], error: Exception,
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acls_cmd, "admin_client", lambda args: FakeAdmin(error=error))
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert out == ""
    name = type(error).__name__
    expected = {"SecurityDisabledError": "Error: SECURITY_DISABLED: No Authorizer is "
                                         "configured.\n",
                "ClusterAuthorizationFailedError": "Error: CLUSTER_AUTHORIZATION_FAILED: "
                                                   "Cluster authorization failed.\n"}
    assert err == expected[name]


# ---------------------------------------------------------------------- remove
class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_remove_refuses_without_force_when_stdin_is_not_a_terminal(
        admin: FakeAdmin, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: not a terminal
    code, out, err = run(capsys, "--remove", "--topic", "orders")
    assert (code, out) == (1, "")
    assert err == ("Error: --remove asks before deleting ACLs and stdin is not a terminal: "
                   "give --force to remove without asking\n")
    assert admin.calls == []
    assert ORDERS_READ in admin.acls


def test_remove_with_force_removes_every_acl_of_the_resource(
        admin: FakeAdmin, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, out, err = run(capsys, "--remove", "--force", "--topic", "orders", "-o", "json")
    assert (code, err) == (0, "")
    assert {(b["principal"], b["operation"]) for b in json.loads(out)} == {
        ("User:alice", "READ"), ("User:alice", "DESCRIBE"), ("User:bob", "WRITE")}
    assert admin.acls == {PAY_PREFIX, GROUP_READ}
    code, out, _ = run(capsys, "--remove", "--force", "--topic", "orders")
    assert (code, out) == (0, "No ACLs matched.\n")


def test_remove_asks_on_a_terminal_per_resource(
        admin: FakeAdmin, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", FakeTerminal("n\ny\n"))
    code, out, err = run(capsys, "--remove", "--allow-principal", "User:alice", "--operation",
                         "Read", "--topic", "orders", "--group", "billing")
    assert code == 0
    assert err == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n"
        " from resource filter `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`? (y/n)\n"
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n"
        " from resource filter `ResourcePattern(resourceType=GROUP, name=billing, "
        "patternType=LITERAL)`? (y/n)\n")
    assert out == ("Removed ACLs for resource `ResourcePattern(resourceType=GROUP, "
                   "name=billing, patternType=LITERAL)`: \n"
                   " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) "
                   "\n\n")
    assert ORDERS_READ in admin.acls and GROUP_READ not in admin.acls


def test_remove_on_a_terminal_answered_no_or_nothing_removes_nothing(
        admin: FakeAdmin, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for answer in ("n\n", ""):  # "" is end of input (Ctrl-D)
        monkeypatch.setattr("sys.stdin", FakeTerminal(answer))
        code, out, err = run(capsys, "--remove", "--topic", "orders")
        assert (code, out) == (0, "")
        assert err == ("Are you sure you want to delete all ACLs for resource filter "
                       "`ResourcePattern(resourceType=TOPIC, name=orders, "
                       "patternType=LITERAL)`? (y/n)\n")
    assert "delete" not in admin.calls and ORDERS_READ in admin.acls


def test_the_parsed_arguments_of_acls_need_no_broker() -> None:
    args = build_parser().parse_args(["acls", "--list"])
    assert isinstance(args, argparse.Namespace) and args.func is not None
    assert not any(name.startswith("_") for name in vars(args))
