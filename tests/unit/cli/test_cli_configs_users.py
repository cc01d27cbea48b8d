"""``millrace configs`` for users (SCRAM credentials) without a broker: both command
forms parse, the admin client (a fake) gets the alterations kafka-configs would send,
``--zookeeper`` goes through the ZooKeeper store (a fake), what is printed, the exit
code -- and the password never appears in any output."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from millrace.cli import configs as configs_cmd
from millrace.cli import scram_users
from millrace.cli.common import CommandError
from millrace.cli.main import build_parser, main
from millrace.client.admin import (
    AdminResult,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from millrace.common.errors import ResourceNotFoundError, UnacceptableCredentialError
from millrace.security.sasl.scram import ScramCredential, ScramFormatter
from millrace.security.sasl.scram import ScramMechanism as SaslMechanism

SECRET = "alice-s3cret=x"
ADD = f"SCRAM-SHA-256=[iterations=8192,password={SECRET}],SCRAM-SHA-512=[password={SECRET}]"


class FakeAdmin:
    def __init__(self) -> None:
        self.alterations: list[Any] = []
        self.described: list[Any] = []
        self.credentials: dict[str, list[ScramCredentialInfo]] = {
            "alice": [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                      ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)],
            "bob": [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 5000)]}

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def alter_user_scram_credentials(self, alterations: Any) -> AdminResult[str, None]:
        self.alterations += list(alterations)
        result: AdminResult[str, None] = AdminResult()
        for a in self.alterations:
            if isinstance(a, UserScramCredentialUpsertion) and a.credential_info.iterations > 16384:
                result.set_error(a.user, UnacceptableCredentialError("Too many iterations"))
            elif a.user not in result:
                result.set_value(a.user, None)
        return result

    def describe_client_quotas(self, flt: Any = None) -> dict[Any, dict[str, float]]:
        return {}  # describing users shows their quotas first: these users have none

    def describe_user_scram_credentials(self, users: Any = None
                                        ) -> AdminResult[str, UserScramCredentialsDescription]:
        self.described.append(users)
        result: AdminResult[str, UserScramCredentialsDescription] = AdminResult()
        for user in users or sorted(self.credentials):
            if user in self.credentials:
                result.set_value(user, UserScramCredentialsDescription(
                    user, self.credentials[user]))
            else:
                result.set_error(user, ResourceNotFoundError(
                    f"Attempt to describe a user credential that does not exist: {user}"))
        return result


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(configs_cmd, "admin_client", lambda args: fake)
    return fake


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


FLAG_ALTER = ["configs", "--alter", "--entity-type", "users", "--entity-name", "alice"]
SUB_ALTER = ["configs", "alter", "--entity-type", "users", "--entity-name", "alice"]


# ---------------------------------------------------------------------- parsing
@pytest.mark.parametrize("form", [FLAG_ALTER, SUB_ALTER])
def test_alter_sends_upsertions_with_default_iterations(
        form: list[str], admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*form, "--add-config", ADD], capsys)
    assert (code, out, err) == (0, "Completed updating config for user alice.\n", "")
    assert [(a.user, a.credential_info, a.password, a.salt) for a in admin.alterations] == [
        ("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), SECRET, None),
        ("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), SECRET, None)]


def test_alter_deletes(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run([*FLAG_ALTER, "--delete-config", "SCRAM-SHA-512"], capsys)
    assert code == 0
    assert admin.alterations == [
        UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)]


@pytest.mark.parametrize(("add", "message"), [
    ("producer_byte_rate=1024", "'producer_byte_rate' cannot be set on users"),
    ("SCRAM-SHA-1=[password=x]", "'SCRAM-SHA-1' cannot be set on users"),
    ("SCRAM-SHA-256", "SCRAM-SHA-256 expects SCRAM-SHA-256=[iterations=N,password=SECRET]"),
    ("SCRAM-SHA-256=[iterations=8192]", "SCRAM-SHA-256 needs a non-empty password"),
    ("SCRAM-SHA-256=[iterations=lots,password=x]", "iterations must be a number"),
    (f"SCRAM-SHA-256=[password={SECRET},salt=abc]", "takes iterations=N and password"),
    (f"SCRAM-SHA-256=[password={SECRET},oops]", "a password cannot contain ','"),
    ("SCRAM-SHA-256=[password=a,password=b]", "password given twice"),
])
def test_bad_add_config_is_refused_without_echoing_the_password(
        add: str, message: str) -> None:
    with pytest.raises(CommandError) as e:
        scram_users.parse_scram_configs([add])
    assert message in str(e.value)
    assert SECRET not in str(e.value) and "abc" not in str(e.value)


def test_parse_scram_configs() -> None:
    assert scram_users.parse_scram_configs([ADD, "scram-sha-512=[password=p=q]"]) == {
        "SCRAM-SHA-256": (8192, SECRET), "SCRAM-SHA-512": (4096, "p=q")}
    assert scram_users.parse_scram_deletions(["SCRAM-SHA-256,scram-sha-512"]) == [
        "SCRAM-SHA-256", "SCRAM-SHA-512"]
    with pytest.raises(CommandError, match="cannot be deleted from users"):
        scram_users.parse_scram_deletions(["consumer_byte_rate"])


@pytest.mark.parametrize(("argv", "message"), [
    (["configs", "--entity-type", "users"], "give --describe or --alter"),
    (["configs", "--alter", "--entity-name", "alice"], "--entity-type is required"),
    (["configs", "--alter", "--entity-type", "users", "--add-config", "x=1"],
     "--entity-name is required with --alter"),
    (["configs", "--describe", "--entity-type", "users", "--add-config", "x=1"],
     "go with --alter"),
    ([*FLAG_ALTER], "nothing to alter"),
    ([*FLAG_ALTER, "--add-config", "SCRAM-SHA-256=[password=x]", "--delete-config",
      "SCRAM-SHA-256"], "SCRAM-SHA-256: both added and deleted"),
    (["configs", "--describe", "--entity-type", "topics", "--zookeeper", "zk:2181"],
     "--zookeeper is supported for --entity-type users only"),
])
def test_command_errors(argv: list[str], message: str, admin: FakeAdmin,
                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(argv, capsys)
    assert code == 1 and out == ""
    assert message in err
    assert admin.alterations == []


def test_describe_and_alter_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["configs", "--describe", "--alter", "--entity-type", "users"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_flag_form_parses_connection_options() -> None:
    args = build_parser().parse_args(
        ["configs", "--bootstrap-server", "b:1", "--describe", "--entity-type", "users",
         "-o", "json", "--timeout", "500"])
    assert (args.func, args.bootstrap_server, args.output, args.timeout) == (
        configs_cmd.by_flag, "b:1", "json", 500)
    args = build_parser().parse_args(["configs", "describe", "--entity-type", "topics"])
    assert args.func is configs_cmd.describe


def test_options_before_the_subcommand_are_kept() -> None:
    # argparse alone would let the subcommand's defaults overwrite them (a silent switch
    # from ZooKeeper, or from the named broker, to the default broker)
    args = build_parser().parse_args(
        ["configs", "--zookeeper", "zk:2181", "-b", "b:1", "-o", "json", "alter",
         "--entity-type", "users", "--entity-name", "alice"])
    assert (args.func, args.zookeeper, args.bootstrap_server, args.output) == (
        configs_cmd.alter, "zk:2181", "b:1", "json")
    args = build_parser().parse_args(
        ["configs", "-b", "b:1", "describe", "--entity-type", "users", "-b", "c:2"])
    assert (args.bootstrap_server, args.zookeeper, args.output) == ("c:2", None, "table")


# ---------------------------------------------------------------------- output
def test_describe_users(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["configs", "--describe", "--entity-type", "users"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=5000"]
    code, out, _ = run(["configs", "describe", "--entity-type", "users", "--entity-name",
                        "bob", "-o", "json"], capsys)
    assert json.loads(out) == [{"entity_type": "users", "entity_name": "bob", "credentials": [
        {"mechanism": "SCRAM-SHA-512", "iterations": 5000}]}]
    assert admin.described == [None, ["bob"]]


def test_describe_a_user_without_credentials(admin: FakeAdmin,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["configs", "--describe", "--entity-type", "users",
                          "--entity-name", "zed"], capsys)
    assert (code, out) == (1, "")
    assert err == ("Error: SCRAM credential configs of user-principal 'zed': "
                   "RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not "
                   "exist: zed\n")


def test_alter_failure_and_json(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*FLAG_ALTER, "-o", "json", "--add-config",
                          f"SCRAM-SHA-256=[iterations=99999,password={SECRET}]"], capsys)
    assert code == 1
    assert json.loads(out) == {"entity_type": "users", "entity_name": "alice",
                               "updated": False,
                               "error": "UNACCEPTABLE_CREDENTIAL: Too many iterations"}
    assert SECRET not in out + err


# ---------------------------------------------------------------------- --zookeeper
class DictStore:
    blocking = True

    def __init__(self) -> None:
        self.users: dict[str, dict[str, str]] = {"bob": {"producer_byte_rate": "10"}}

    def user_configs(self, user: str) -> dict[str, str]:
        return dict(self.users.get(user, {}))

    def users_with_configs(self) -> list[str]:
        return sorted(self.users)

    def set_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        self.users[user] = dict(configs)


@pytest.fixture
def zk(monkeypatch: pytest.MonkeyPatch) -> DictStore:
    store = DictStore()

    def fake_zk_store(args: Any) -> Any:
        assert args.zookeeper == "127.0.0.1:2181/kafka"
        import contextlib

        @contextlib.contextmanager
        def opened() -> Iterator[DictStore]:
            yield store
        return opened()

    monkeypatch.setattr(scram_users, "zk_store", fake_zk_store)
    monkeypatch.setattr(configs_cmd, "admin_client", lambda args: pytest.fail("no broker"))
    return store


def test_zookeeper_alter_writes_the_salted_credential(
        zk: DictStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["configs", "--zookeeper", "127.0.0.1:2181/kafka", *FLAG_ALTER[1:],
                          "--add-config", ADD], capsys)
    assert (code, out, err) == (0, "Completed updating config for user alice.\n", "")
    stored = {m: ScramCredential.from_kafka_string(v) for m, v in zk.users["alice"].items()}
    assert sorted(stored) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    for name, iterations in (("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)):
        c = stored[name]
        mechanism = SaslMechanism.from_name(name)
        assert mechanism is not None
        assert c.iterations == iterations
        assert c == ScramFormatter(mechanism).generate_credential(SECRET, iterations, c.salt)
    code, out, _ = run(["configs", "--zookeeper", "127.0.0.1:2181/kafka", "--describe",
                        "--entity-type", "users"], capsys)
    assert out == ("SCRAM credential configs for user-principal 'alice' are "
                   "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert SECRET not in out


def test_zookeeper_alter_errors_and_delete(zk: DictStore,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["configs", "alter", "--zookeeper", "127.0.0.1:2181/kafka",
                        "--entity-type", "users", "--entity-name", "bob", "--delete-config",
                        "SCRAM-SHA-256"], capsys)
    assert code == 1
    assert "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist" in err
    run(["configs", "alter", "--zookeeper", "127.0.0.1:2181/kafka", "--entity-type", "users",
         "--entity-name", "bob", "--add-config", "SCRAM-SHA-256=[password=p]"], capsys)
    code, _, _ = run(["configs", "alter", "--zookeeper", "127.0.0.1:2181/kafka",
                      "--entity-type", "users", "--entity-name", "bob", "--delete-config",
                      "SCRAM-SHA-256"], capsys)
    assert code == 0 and zk.users["bob"] == {"producer_byte_rate": "10"}
    code, _, err = run(["configs", "alter", "--zookeeper", "127.0.0.1:2181/kafka",
                        "--entity-type", "users", "--entity-name", "bob", "--add-config",
                        "SCRAM-SHA-256=[iterations=100,password=p]"], capsys)
    assert code == 1 and "UNACCEPTABLE_CREDENTIAL: Too few iterations" in err

