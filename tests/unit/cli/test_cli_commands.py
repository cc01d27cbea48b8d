"""The ``millrace`` commands end to end without a broker: argument parsing, the calls
made on the admin client (a fake), what is printed, and the exit code."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

from millrace.cli import configs as configs_cmd
from millrace.cli import groups as groups_cmd
from millrace.cli import topics as topics_cmd
from millrace.cli.common import CommandError
from millrace.cli.main import build_parser, main
from millrace.client.admin import (
    AdminResult,
    Config,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupOffsets,
    ConsumerGroupState,
    MemberAssignment,
    MemberDescription,
    Node,
    OffsetResetSpec,
    PartitionAssignmentState,
    ResetKind,
    TopicDescription,
    TopicListing,
    TopicPartition,
    TopicPartitionInfo,
)
from millrace.common.errors import GroupNotEmptyError, TopicExistsError

NODE = Node(0, "127.0.0.1", 9092)
TP = TopicPartition


class FakeAdmin:
    """Records calls; answers from canned data."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.topics = {"orders": 2, "__consumer_offsets": 1}

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def list_topics(self, *, list_internal: bool = False) -> list[TopicListing]:
        return [TopicListing(n, uuid.UUID(int=1), n.startswith("__")) for n in sorted(self.topics)
                if list_internal or not n.startswith("__")]

    def create_topics(self, new_topics: Any, *, validate_only: bool = False) -> AdminResult:
        result: AdminResult[str, None] = AdminResult()
        for t in new_topics:
            self.calls.append(("create", t))
            if t.name in self.topics:
                result.set_error(t.name, TopicExistsError(f"Topic '{t.name}' already exists."))
            else:
                result.set_value(t.name, None)
        return result

    def describe_topics(self, names: Any) -> AdminResult:
        result: AdminResult[str, TopicDescription] = AdminResult()
        for n in names:
            result.set_value(n, TopicDescription(n, uuid.UUID(int=1), False, [
                TopicPartitionInfo(i, NODE, [NODE], [NODE]) for i in range(self.topics[n])]))
        return result

    def describe_configs(self, resources: Any, **kw: Any) -> AdminResult:
        result: AdminResult[ConfigResource, Config] = AdminResult()
        for r in resources:
            self.calls.append(("describe_configs", r))
            result.set_value(r, Config([
                ConfigEntry("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                ConfigEntry("segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)]))
        return result

    def delete_topics(self, names: Any) -> AdminResult:
        result: AdminResult[str, None] = AdminResult()
        for n in names:
            self.calls.append(("delete", n))
            result.set_value(n, None)
        return result

    def create_partitions(self, new: Any) -> AdminResult:
        self.calls.append(("create_partitions", new))
        result: AdminResult[str, None] = AdminResult()
        for n in new:
            result.set_value(n, None)
        return result

    def incremental_alter_configs(self, changes: Any, **kw: Any) -> AdminResult:
        self.calls.append(("alter_configs", changes))
        result: AdminResult[ConfigResource, None] = AdminResult()
        for r in changes:
            result.set_value(r, None)
        return result

    def list_groups(self, *, states: Any = None) -> list[ConsumerGroupListing]:
        self.calls.append(("list_groups", states))
        return [ConsumerGroupListing("g1", False, ConsumerGroupState.STABLE, "consumer")]

    def _group(self, group_id: str) -> ConsumerGroupDescription:
        if group_id == "missing":
            return ConsumerGroupDescription(group_id, True, [], "", ConsumerGroupState.DEAD,
                                            NODE)
        member = MemberDescription("consumer-1-abc", None, "consumer-1", "/127.0.0.1",
                                   MemberAssignment(frozenset({TP("orders", 0)})))
        return ConsumerGroupDescription(group_id, False, [member], "range",
                                        ConsumerGroupState.STABLE, NODE, "consumer")

    def describe_groups(self, ids: Any) -> AdminResult:
        result: AdminResult[str, ConsumerGroupDescription] = AdminResult()
        for g in ids:
            result.set_value(g, self._group(g))
        return result

    def describe_group_offsets(self, group_id: str) -> ConsumerGroupOffsets:
        return ConsumerGroupOffsets(self._group(group_id), [
            PartitionAssignmentState(group_id, "orders", 0, 5, 12, "consumer-1-abc",
                                     "/127.0.0.1", "consumer-1"),
            PartitionAssignmentState(group_id, "orders", 1, None, 3)])

    def reset_group_offsets(self, group_id: str, spec: OffsetResetSpec, **kw: Any) -> Any:
        self.calls.append(("reset", (group_id, spec, kw)))
        if group_id == "busy":
            raise GroupNotEmptyError("Assignments can only be reset if the group 'busy' is "
                                     "inactive, but the current state is Stable.")
        return {TP("orders", 0): 0, TP("orders", 1): 0}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    for module in (topics_cmd, groups_cmd, configs_cmd):
        monkeypatch.setattr(module, "admin_client", lambda args: fake)
    return fake


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------- parsing
def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["topics", "--help"], ["topics", "create", "--help"],
                 ["groups", "reset-offsets", "--help"], ["configs", "alter", "--help"],
                 ["cluster", "describe", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    assert "--bootstrap-server" in capsys.readouterr().out


def test_bootstrap_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MILLRACE_BOOTSTRAP", raising=False)
    assert build_parser().parse_args(["topics", "list"]).bootstrap_server == "localhost:9092"
    monkeypatch.setenv("MILLRACE_BOOTSTRAP", "kafka:19092")
    assert build_parser().parse_args(["topics", "list"]).bootstrap_server == "kafka:19092"
    args = build_parser().parse_args(["topics", "list", "--bootstrap-server", "a:1"])
    assert args.bootstrap_server == "a:1"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["topics", "create"], ["groups", "reset-offsets", "--group", "g", "--all-topics"],
                 ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest",
                  "--to-latest"],
                 ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest",
                  "--execute", "--dry-run"],
                 ["configs", "describe", "--entity-type", "groups"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    capsys.readouterr()


@pytest.mark.parametrize(("flags", "kind", "value"), [
    (["--to-earliest"], ResetKind.EARLIEST, 0),
    (["--to-latest"], ResetKind.LATEST, 0),
    (["--to-current"], ResetKind.CURRENT, 0),
    (["--to-offset", "42"], ResetKind.OFFSET, 42),
    (["--shift-by", "-3"], ResetKind.SHIFT_BY, -3),
    (["--to-datetime", "2024-05-01T12:00:00.000+00:00"], ResetKind.DATETIME, 1_714_564_800_000),
])
def test_reset_spec(flags: list[str], kind: ResetKind, value: int) -> None:
    args = build_parser().parse_args(["groups", "reset-offsets", "-g", "g", "--all-topics",
                                      *flags])
    spec = groups_cmd.reset_spec(args)
    assert (spec.kind, spec.value) == (kind, value)
    assert not args.execute


def test_datetime_without_zone_is_local_time() -> None:
    naive = groups_cmd.parse_datetime("2024-05-01T12:00:00")
    assert OffsetResetSpec.to_datetime(naive).value == int(
        dt.datetime(2024, 5, 1, 12).timestamp() * 1000)
    with pytest.raises(CommandError, match="--to-datetime"):
        groups_cmd.parse_datetime("yesterday")


def test_topic_partition_arguments() -> None:
    assert groups_cmd.parse_topic_partitions(["a", "b:0,2"]) == (["a"], [TP("b", 0), TP("b", 2)])
    with pytest.raises(CommandError, match="bad partition list"):
        groups_cmd.parse_topic_partitions(["b:x"])
    with pytest.raises(CommandError):
        groups_cmd.parse_topic_partitions([":1"])


def test_topic_selection() -> None:
    names = ["a.b", "axb", "orders"]
    assert topics_cmd.select_topics(names, "a.b") == ["a.b"]      # exact name wins
    assert topics_cmd.select_topics(names, "a.*") == ["a.b", "axb"]
    assert topics_cmd.select_topics(names, "ord") == []           # full match only
    assert topics_cmd.select_topics(names, None) == names
    with pytest.raises(CommandError, match="regular expression"):
        topics_cmd.select_topics(names, "(")


# ---------------------------------------------------------------------- topics
def test_topics_create(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["topics", "create", "-t", "new", "--partitions", "3",
                        "--replication-factor", "1", "--config", "retention.ms=5",
                        "--config", "cleanup.policy=compact,delete"], capsys)
    assert (code, out) == (0, "Created topic new.\n")
    (_, topic), = admin.calls
    assert (topic.name, topic.num_partitions, topic.replication_factor, dict(topic.configs)) == (
        "new", 3, 1, {"retention.ms": "5", "cleanup.policy": "compact,delete"})


def test_topics_create_existing(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["topics", "create", "-t", "orders"], capsys)
    assert (code, out) == (1, "")
    assert err == "Error: TOPIC_ALREADY_EXISTS: Topic 'orders' already exists.\n"
    assert run(["topics", "create", "-t", "orders", "--if-not-exists"], capsys) == (0, "", "")


def test_topics_list(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["topics", "list"], capsys)[1] == "__consumer_offsets\norders\n"
    assert run(["topics", "list", "--exclude-internal"], capsys)[1] == "orders\n"
    _code, out, _ = run(["topics", "list", "-o", "json", "--topic", "ord.*"], capsys)
    assert '"name": "orders"' in out and "__consumer" not in out


def test_topics_describe(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["topics", "describe", "--topic", "orders"], capsys)
    assert code == 0
    assert out.splitlines() == [
        "Topic: orders\tTopicId: 00000000-0000-0000-0000-000000000001\tPartitionCount: 2\t"
        "ReplicationFactor: 1\tConfigs: retention.ms=1000",
        "\tTopic: orders\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
        "\tTopic: orders\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0"]
    code, _, err = run(["topics", "describe", "--topic", "nope"], capsys)
    assert (code, err) == (1, "Error: Topic 'nope' does not exist as expected\n")


def test_topics_alter_and_delete(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["topics", "alter", "-t", "orders", "--partitions", "4", "--config",
                        "retention.ms=9", "--delete-config", "segment.ms"], capsys)
    assert code == 0
    assert out.splitlines() == ["Increased the partition count of topic orders to 4.",
                                "Updated the configs of topic orders."]
    ops = next(c for name, c in admin.calls if name == "alter_configs")
    ((resource, changes),) = ops.items()
    assert resource.name == "orders"
    assert [(o.name, o.value, int(o.op_type)) for o in changes] == [
        ("retention.ms", "9", 0), ("segment.ms", None, 1)]
    assert run(["topics", "delete", "-t", "orders"], capsys)[:2] == (0, "Deleted topic orders.\n")
    code, _, err = run(["topics", "alter", "-t", "orders"], capsys)
    assert (code, err) == (1, "Error: nothing to alter: give --partitions, --config or "
                              "--delete-config\n")


# ---------------------------------------------------------------------- groups
def test_groups_list(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["groups", "list"], capsys)[1] == "g1\n"
    assert run(["groups", "list", "--state"], capsys)[1] == "GROUP STATE\ng1    Stable\n"
    run(["groups", "list", "--state", "Empty,Stable"], capsys)
    assert admin.calls[-1] == ("list_groups", ["Empty", "Stable"])


def test_groups_describe_offsets(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["groups", "describe", "--group", "g1"], capsys)
    assert code == 0
    assert out.splitlines()[1:] == [
        "GROUP TOPIC  PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID    HOST       "
        "CLIENT-ID  STATUS",
        "g1    orders 0         5              12             7   consumer-1-abc /127.0.0.1 "
        "consumer-1 -",
        "g1    orders 1         -              3              -   -              -          "
        "-          -"]
    # (the fake broker has no http.listeners: no lag status, said once, no failure)
    assert err == ("No lag status (STATUS -): broker 0 has no http.listeners config (an "
                   "older broker?)\n")


def test_groups_describe_members_and_state(admin: FakeAdmin,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = run(["groups", "describe", "-g", "g1", "--members", "--verbose"], capsys)[1]
    assert out.splitlines()[1:] == [
        "GROUP CONSUMER-ID    HOST       CLIENT-ID  #PARTITIONS ASSIGNMENT",
        "g1    consumer-1-abc /127.0.0.1 consumer-1 1           orders(0)"]
    out = run(["groups", "describe", "-g", "g1", "--state"], capsys)[1]
    assert out.splitlines()[1:] == [
        "GROUP COORDINATOR (ID)   ASSIGNMENT-STRATEGY STATE  #MEMBERS",
        "g1    127.0.0.1:9092 (0) range               Stable 1"]


def test_groups_describe_missing(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["groups", "describe", "-g", "missing"], capsys)
    assert (code, out, err) == (1, "", "Error: Consumer group 'missing' does not exist.\n")


def test_groups_describe_json(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    _code, out, _ = run(["groups", "describe", "-g", "g1", "-o", "json"], capsys)
    (group,) = json.loads(out)
    assert group["state"] == "Stable"
    assert [(o["partition"], o["lag"], o["status"]) for o in group["offsets"]] == [
        (0, 7, None), (1, None, None)]
    assert group["lag_status"]["status"] is None
    assert "no http.listeners" in group["lag_status"]["reason"]


def test_groups_reset_offsets(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["groups", "reset-offsets", "-g", "g1", "--topic", "orders",
                          "--to-earliest"], capsys)
    assert code == 0
    assert out.splitlines()[1:] == ["GROUP TOPIC  PARTITION NEW-OFFSET",
                                    "g1    orders 0         0",
                                    "g1    orders 1         0"]
    assert "Dry run" in err
    _, (group, spec, kw) = admin.calls[-1]
    assert (group, spec.kind, kw) == ("g1", ResetKind.EARLIEST, {
        "topics": ["orders"], "partitions": [], "execute": False})
    code, _, err = run(["groups", "reset-offsets", "-g", "g1", "--all-topics", "--to-latest",
                        "--execute"], capsys)
    assert code == 0 and err == ""
    assert admin.calls[-1][1][2] == {"topics": None, "partitions": None, "execute": True}


def test_groups_reset_an_active_group(admin: FakeAdmin,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["groups", "reset-offsets", "-g", "busy", "--all-topics",
                          "--to-earliest", "--execute"], capsys)
    assert (code, out) == (1, "")
    assert err == ("Error: NON_EMPTY_GROUP: Assignments can only be reset if the group 'busy' "
                   "is inactive, but the current state is Stable.\n")


# ---------------------------------------------------------------------- configs
def test_configs_describe(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["configs", "describe", "--entity-type", "topics", "--entity-name",
                        "orders"], capsys)
    assert code == 0
    assert out.splitlines() == ["Dynamic configs for topic orders are:",
                                "  retention.ms=1000 sensitive=false synonyms={}"]
    out = run(["configs", "describe", "--entity-type", "topics", "--all"], capsys)[1]
    assert "All configs for topic __consumer_offsets are:" in out
    assert "  segment.bytes=1073741824 sensitive=false synonyms={}" in out


def test_configs_alter(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["configs", "alter", "--entity-type", "topics", "--entity-name", "orders",
                        "--add-config", "retention.ms=1,cleanup.policy=[compact,delete]",
                        "--delete-config", "segment.ms"], capsys)
    assert (code, out) == (0, "Completed updating config for topic orders.\n")
    ((_resource, ops),) = admin.calls[-1][1].items()
    assert [(o.name, o.value, int(o.op_type)) for o in ops] == [
        ("retention.ms", "1", 0), ("cleanup.policy", "compact,delete", 0),
        ("segment.ms", None, 1)]
    code, _, err = run(["configs", "alter", "--entity-type", "brokers", "--entity-name", "x",
                        "--add-config", "a=1"], capsys)
    assert (code, err) == (1, "Error: --entity-name: a broker is named by its id, got 'x'\n")


# ---------------------------------------------------------------------- errors
def test_a_bad_bootstrap_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["topics", "list", "--bootstrap-server", "no-port"], capsys)
    assert (code, out) == (1, "")
    assert err == "Error: Invalid url in bootstrap.servers: no-port\n"


def test_unknown_client_config_is_one_line(tmp_path: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.properties"
    path.write_text("fetch.max.bytes=1\n")
    code, _, err = run(["groups", "list", "--command-config", str(path)], capsys)
    assert (code, err) == (1, "Error: Unknown configuration key(s): fetch.max.bytes\n")


def test_produce_timeout_default_is_what_the_help_says() -> None:
    from millrace.cli.common import DEFAULT_TIMEOUT_MS
    from millrace.cli.console import _producer_configs

    configs = _producer_configs(build_parser().parse_args(["produce", "-t", "orders"]))
    assert configs["max.block.ms"] == DEFAULT_TIMEOUT_MS == 30_000
    configs = _producer_configs(build_parser().parse_args(
        ["produce", "-t", "orders", "--timeout", "3000"]))
    assert (configs["max.block.ms"], configs["delivery.timeout.ms"]) == (3000, 3100)
