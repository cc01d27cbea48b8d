"""``millrace leader-election`` without a broker: which partitions the arguments name, the
call made on the admin client (a fake), the three kinds of outcome as kafka-leader-election
prints them, and the exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from millrace.cli import leader_election as cmd
from millrace.cli.main import main
from millrace.client.admin import AdminResult, ElectionType, TopicPartition
from millrace.common.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    UnknownTopicOrPartitionError,
)

TP = TopicPartition


class FakeAdmin:
    def __init__(self, outcomes: dict[TopicPartition, BaseException | None]) -> None:
        self.outcomes = outcomes
        self.calls: list[tuple[ElectionType, list[TopicPartition] | None]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def elect_leaders(self, election_type: ElectionType, partitions: Any = None
                      ) -> AdminResult[TopicPartition, None]:
        self.calls.append((election_type, None if partitions is None else list(partitions)))
        result: AdminResult[TopicPartition, None] = AdminResult()
        for tp, error in self.outcomes.items():
            if error is None:
                result.set_value(tp, None)
            else:
                result.set_error(tp, error)
        return result


def fake(monkeypatch: pytest.MonkeyPatch,
         outcomes: dict[TopicPartition, BaseException | None]) -> FakeAdmin:
    admin = FakeAdmin(outcomes)
    monkeypatch.setattr(cmd, "admin_client", lambda args: admin)
    return admin


def test_one_partition_elected(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    admin = fake(monkeypatch, {TP("orders", 1): None})
    assert main(["leader-election", "--election-type", "PREFERRED", "--topic", "orders",
                 "--partition", "1"]) == 0
    assert admin.calls == [(ElectionType.PREFERRED, [TP("orders", 1)])]
    assert capsys.readouterr().out == (
        "Successfully completed leader election (PREFERRED) for partitions orders-1\n")


def test_all_partitions_with_every_kind_of_outcome(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    admin = fake(monkeypatch, {
        TP("a", 0): None, TP("a", 1): ElectionNotNeededError("partition 'a-1'"),
        TP("b", 0): None, TP("b", 1): ElectionNotNeededError("partition 'b-1'"),
        TP("c", 0): EligibleLeadersNotAvailableError("partition 'c-0'")})
    assert main(["leader-election", "--election-type", "unclean",
                 "--all-topic-partitions"]) == 1
    assert admin.calls == [(ElectionType.UNCLEAN, None)]
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "Successfully completed leader election (UNCLEAN) for partitions a-0, b-0",
        "Valid replica already elected for partitions a-1, b-1",
        "Error completing leader election (UNCLEAN) for partition: c-0: "
        "ELIGIBLE_LEADERS_NOT_AVAILABLE: partition 'c-0'"]
    assert err == "Error: 1 replica(s) could not be elected\n"


def test_json_output(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake(monkeypatch, {TP("a", 0): None, TP("a", 1): ElectionNotNeededError("x"),
                       TP("z", 0): UnknownTopicOrPartitionError("partition 'z-0'")})
    assert main(["leader-election", "--election-type", "preferred", "--all-topic-partitions",
                 "--output", "json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "election_type": "PREFERRED", "succeeded": ["a-0"], "not_needed": ["a-1"],
        "failed": {"z-0": "UNKNOWN_TOPIC_OR_PARTITION: partition 'z-0'"}}
    assert err == "Error: 1 replica(s) could not be elected\n"


def test_json_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"partitions": [{"topic": "b", "partition": 2},
                                               {"topic": "a", "partition": 0}]}))
    admin = fake(monkeypatch, {TP("b", 2): None, TP("a", 0): None})
    assert main(["leader-election", "--election-type", "preferred", "--path-to-json-file",
                 str(path)]) == 0
    assert admin.calls == [(ElectionType.PREFERRED, [TP("b", 2), TP("a", 0)])]
    assert capsys.readouterr().out == (
        "Successfully completed leader election (PREFERRED) for partitions b-2, a-0\n")


@pytest.mark.parametrize(("content", "message"), [
    ('{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}',
     "names partitions more than once: a-0"),
    ('{"partitions": []}', "names no partitions"),
    ('{"partitions": [{"topic": "a"}]}',
     'each partition needs a "topic" string and a "partition" number, got {"topic": "a"}'),
    ('[1]', 'expected {"partitions": [...]}'),
    ("{", "is not JSON: "),
])
def test_bad_json_files_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str], content: str,
                                     message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content)
    admin = fake(monkeypatch, {})
    assert main(["leader-election", "--election-type", "preferred", "--path-to-json-file",
                 str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: --path-to-json-file {path}") and message in err
    assert err.count("\n") == 1
    assert admin.calls == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--topic", "a"], "Error: --topic needs --partition\n"),
    (["--all-topic-partitions", "--partition", "1"], "Error: --partition goes with --topic\n"),
])
def test_topic_and_partition_go_together(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], argv: list[str],
                                         message: str) -> None:
    fake(monkeypatch, {})
    assert main(["leader-election", "--election-type", "preferred", *argv]) == 1
    assert capsys.readouterr().err == message


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--all-topic-partitions"],  # no election type
                 ["--election-type", "preferred"],  # no partitions
                 ["--election-type", "dirty", "--all-topic-partitions"],
                 ["--election-type", "preferred", "--all-topic-partitions", "--topic", "a"]):
        with pytest.raises(SystemExit) as e:
            main(["leader-election", *argv])
        assert e.value.code == 2
    capsys.readouterr()
