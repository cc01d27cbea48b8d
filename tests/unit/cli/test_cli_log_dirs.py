"""``millrace log-dirs --describe`` without a broker: the brokers asked (all, or
``--broker-list``, an unknown id refused), the ``--topic-list`` filter, and the output as
kafka-log-dirs.sh prints it (two progress lines, one line of JSON) or ``--output json``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from millrace.cli import log_dirs as cmd
from millrace.cli.main import main
from millrace.client.admin import (
    ClusterDescription,
    LogDirDescription,
    Node,
    ReplicaInfo,
    TopicPartition,
)
from millrace.common.errors import KafkaStorageError

TP = TopicPartition
DIRS = {
    1: {"/data/a": LogDirDescription(None, {TP("orders", 1): ReplicaInfo(2048, 0, False),
                                            TP("audit", 0): ReplicaInfo(0, 0, False),
                                            TP("orders", 0): ReplicaInfo(1024, 0, False)},
                                     100_000, 40_000)},
    2: {"/data/b": LogDirDescription(KafkaStorageError("log dir '/data/b'"), {})},
}


class FakeAdmin:
    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe_cluster(self) -> ClusterDescription:
        nodes = [Node(2, "h", 9093), Node(1, "h", 9092)]
        return ClusterDescription("c", nodes[1], nodes)

    def describe_log_dirs(self, brokers: Any) -> dict[int, dict[str, LogDirDescription]]:
        self.asked.append(list(brokers))
        return {b: DIRS[b] for b in self.asked[-1]}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(cmd, "admin_client", lambda args: fake)
    return fake


def test_every_broker_in_kafka_log_dirs_shape(admin: FakeAdmin,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log-dirs", "--describe"]) == 0
    assert admin.asked == [[1, 2]]
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1,2"]
    assert len(lines) == 3
    assert lines[2] == json.dumps(json.loads(lines[2]), separators=(",", ":"))  # one line
    assert json.loads(lines[2]) == {"version": 1, "brokers": [
        {"broker": 1, "logDirs": [{"logDir": "/data/a", "error": None, "partitions": [
            {"partition": "audit-0", "size": 0, "offsetLag": 0, "isFuture": False},
            {"partition": "orders-0", "size": 1024, "offsetLag": 0, "isFuture": False},
            {"partition": "orders-1", "size": 2048, "offsetLag": 0, "isFuture": False}]}]},
        {"broker": 2, "logDirs": [{"logDir": "/data/b", "partitions": [],
                                   "error": "KAFKA_STORAGE_ERROR: log dir '/data/b'"}]}]}


def test_broker_and_topic_lists(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log-dirs", "--describe", "--broker-list", "1", "--topic-list", "orders",
                 "--output", "json"]) == 0
    assert admin.asked == [[1]]
    doc = json.loads(capsys.readouterr().out)
    assert [p["partition"] for p in doc["brokers"][0]["logDirs"][0]["partitions"]] == [
        "orders-0", "orders-1"]


def test_a_broker_not_in_the_cluster_is_refused(admin: FakeAdmin,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log-dirs", "--describe", "--broker-list", "1,7"]) == 1
    assert admin.asked == []
    err = capsys.readouterr().err
    assert "--broker-list: 7" in err and "current brokers: 1,2" in err


def test_describe_is_required(admin: FakeAdmin) -> None:
    with pytest.raises(SystemExit) as info:
        main(["log-dirs"])
    assert info.value.code == 2


def test_a_bad_broker_list_is_refused(admin: FakeAdmin,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log-dirs", "--describe", "--broker-list", "1,x"]) == 1
    assert "expected comma-separated broker ids" in capsys.readouterr().err
    assert admin.asked == []
