"""``millrace reassign-partitions`` without a broker: the JSON file, the calls made on the
admin client (a fake), the output as kafka-reassign-partitions prints it, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from millrace.cli import reassign_partitions as cmd
from millrace.cli.main import main
from millrace.client.admin import (
    AdminResult,
    Node,
    PartitionReassignment,
    TopicDescription,
    TopicPartition,
    TopicPartitionInfo,
)
from millrace.common.errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError

TP = TopicPartition


class FakeAdmin:
    def __init__(self, replicas: dict[TopicPartition, list[int]],
                 ongoing: dict[TopicPartition, PartitionReassignment] | None = None,
                 errors: dict[TopicPartition, BaseException] | None = None) -> None:
        self.replicas = replicas
        self.ongoing = ongoing or {}
        self.errors = errors or {}
        self.altered: list[dict[TopicPartition, Any]] = []
        self.listed: list[list[TopicPartition] | None] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe_topics(self, topics: list[str]) -> AdminResult[str, TopicDescription]:
        result: AdminResult[str, TopicDescription] = AdminResult()
        for t in topics:
            parts = [TopicPartitionInfo(tp.partition, None, [Node(b, "h", 1) for b in r], [])
                     for tp, r in sorted(self.replicas.items()) if tp.topic == t]
            result.set_value(t, TopicDescription(t, None, False, parts))
        return result

    def alter_partition_reassignments(self, reassignments: dict[TopicPartition, Any]
                                      ) -> AdminResult[TopicPartition, None]:
        self.altered.append(dict(reassignments))
        result: AdminResult[TopicPartition, None] = AdminResult()
        for tp in reassignments:
            if tp in self.errors:
                result.set_error(tp, self.errors[tp])
            else:
                result.set_value(tp, None)
        return result

    def list_partition_reassignments(self, partitions: Any = None
                                     ) -> dict[TopicPartition, PartitionReassignment]:
        self.listed.append(None if partitions is None else list(partitions))
        return {tp: r for tp, r in self.ongoing.items()
                if partitions is None or tp in partitions}


def fake(monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin) -> FakeAdmin:
    monkeypatch.setattr(cmd, "admin_client", lambda args: admin)
    return admin


def plan(tmp_path: Path, partitions: list[dict[str, Any]]) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


def test_execute_prints_the_rollback_plan_and_submits(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    admin = fake(monkeypatch, FakeAdmin({TP("t", 0): [1, 2], TP("t", 1): [2, 3]}))
    f = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2, 3]},
                        {"topic": "t", "partition": 1, "replicas": [3, 1],
                         "log_dirs": ["any", "any"]}])
    assert main(["reassign-partitions", "--execute", "--reassignment-json-file", f]) == 0
    assert admin.altered == [{TP("t", 0): [2, 3], TP("t", 1): [3, 1]}]
    assert capsys.readouterr().out == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[2,3],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignment(s) for t-0,t-1\n")


def test_execute_refused_partition_exits_1(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    fake(monkeypatch, FakeAdmin({TP("t", 0): [1]}, errors={
        TP("t", 0): InvalidReplicaAssignmentError("partition 't-0'")}))
    f = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [9]}])
    assert main(["reassign-partitions", "--execute", "--reassignment-json-file", f]) == 1
    captured = capsys.readouterr()
    assert "Error reassigning partition t-0: " in captured.out
    assert "1 partition reassignment(s) could not be started" in captured.err


def test_verify_tells_complete_in_progress_and_absent(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    fake(monkeypatch, FakeAdmin(
        {TP("t", 0): [2, 3], TP("t", 1): [3, 1, 2], TP("t", 2): [1]},
        ongoing={TP("t", 1): PartitionReassignment((3, 1, 2), (3,), (2,))}))
    f = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2, 3]},
                        {"topic": "t", "partition": 1, "replicas": [3, 1]},
                        {"topic": "t", "partition": 2, "replicas": [2]}])
    assert main(["reassign-partitions", "--verify", "--reassignment-json-file", f]) == 0
    assert capsys.readouterr().out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is completed.\n"
        "Reassignment of partition t-1 is still in progress.\n"
        "There is no active reassignment of partition t-2, but replica set is 1 rather "
        "than 2.\n")
    assert main(["reassign-partitions", "--verify", "--reassignment-json-file", f,
                 "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"partitions": {
        "t-0": "complete", "t-1": "in_progress", "t-2": "absent"}}


def test_cancel_sends_null_targets(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    admin = fake(monkeypatch, FakeAdmin({}, errors={
        TP("t", 1): NoReassignmentInProgressError("partition 't-1'")}))
    f = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2, 3]},
                        {"topic": "t", "partition": 1, "replicas": [1]}])
    assert main(["reassign-partitions", "--cancel", "--reassignment-json-file", f]) == 1
    assert admin.altered == [{TP("t", 0): None, TP("t", 1): None}]
    out = capsys.readouterr().out
    assert out.startswith("Successfully cancelled partition reassignment(s) for: t-0\n")
    assert "Error cancelling reassignment of partition t-1: " in out


def test_list(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    admin = fake(monkeypatch, FakeAdmin({}, ongoing={
        TP("t", 0): PartitionReassignment((2, 3, 1), (3,), (1,))}))
    assert main(["reassign-partitions", "--list"]) == 0
    assert admin.listed == [None]
    assert capsys.readouterr().out == (
        "Current partition reassignments:\nt-0: replicas: 2,3,1. adding: 3. removing: 1.\n")
    admin.ongoing = {}
    assert main(["reassign-partitions", "--list"]) == 0
    assert capsys.readouterr().out == "No partition reassignments found.\n"


@pytest.mark.parametrize("partitions, message", [
    ([], "names no partitions"),
    ([{"topic": "t", "partition": 0}], 'a "replicas" list'),
    ([{"topic": "t", "partition": 0, "replicas": [1, 1]}], "duplicate replicas [1, 1]"),
    ([{"topic": "t", "partition": 0, "replicas": [1]},
      {"topic": "t", "partition": 0, "replicas": [2]}], "names t-0 more than once"),
])
def test_bad_files_are_refused_before_any_call(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        partitions: list[dict[str, Any]], message: str) -> None:
    admin = fake(monkeypatch, FakeAdmin({}))
    f = plan(tmp_path, partitions)
    assert main(["reassign-partitions", "--execute", "--reassignment-json-file", f]) == 1
    assert message in capsys.readouterr().err
    assert admin.altered == []


def test_execute_needs_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reassign-partitions", "--execute"]) == 1
    assert "need --reassignment-json-file" in capsys.readouterr().err
