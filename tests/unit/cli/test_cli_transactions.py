"""``millrace transactions`` without a broker: the admin calls it makes (a fake), the
kafka-transactions.sh columns it prints, abort's two ways to name the transaction and
find-hanging's rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from millrace.cli import transactions as txn_cmd
from millrace.cli.main import main
from millrace.client.admin import (
    AbortTransactionSpec,
    AdminResult,
    Node,
    PartitionProducerState,
    ProducerState,
    TopicDescription,
    TopicListing,
    TopicPartition,
    TopicPartitionInfo,
    TransactionDescription,
    TransactionListing,
    TransactionState,
)
from millrace.common.errors import TransactionalIdNotFoundError
from millrace.common.time import MockTime

TP = TopicPartition
NOW = 10_000_000
MIN = 60_000
OPEN = TransactionDescription(1, TransactionState.ONGOING, 5, 2, 60_000, NOW - 1_500,
                              frozenset({TP("orders", 1), TP("orders", 0)}))
DONE = TransactionDescription(0, TransactionState.COMPLETE_COMMIT, 6, 0, 60_000, None,
                              frozenset())
PRODUCERS = {
    # producer 5's transaction is known to its coordinator on orders-0
    TP("orders", 0): [ProducerState(5, 2, 3, NOW - 20 * MIN, 4, 40),
                      ProducerState(6, 0, 0, NOW - 30 * MIN, 3, None)],
    # producer 7 has no transactional id any more; producer 5 left orders-1 open after
    # its coordinator finished with it; producer 8 is open but young
    TP("orders", 1): [ProducerState(7, 1, 9, NOW - 16 * MIN, None, 12),
                      ProducerState(8, 0, 1, NOW - MIN, 2, 13)],
}


class FakeAdmin:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def list_transactions(self, **kw: Any) -> list[TransactionListing]:
        self.calls.append(("list_transactions", kw))
        return [TransactionListing("done-1", 6, TransactionState.COMPLETE_COMMIT, 0),
                TransactionListing("open-1", 5, TransactionState.ONGOING, 1)]

    def describe_transactions(self, ids: Any) -> AdminResult[str, TransactionDescription]:
        ids = list(ids)
        self.calls.append(("describe_transactions", ids))
        result: AdminResult[str, TransactionDescription] = AdminResult()
        for tid in ids:
            if tid == "open-1":
                result.set_value(tid, TransactionDescription(
                    1, TransactionState.ONGOING, 5, 2, 60_000, NOW - 1_500,
                    frozenset({TP("orders", 0)})))
            elif tid == "done-1":
                result.set_value(tid, DONE)
            else:
                result.set_error(tid, TransactionalIdNotFoundError(f"transactional id '{tid}'"))
        return result

    def describe_producers(self, partitions: Any, *, broker_id: int | None = None
                           ) -> AdminResult[TopicPartition, PartitionProducerState]:
        partitions = list(partitions)
        self.calls.append(("describe_producers", (partitions, broker_id)))
        result: AdminResult[TopicPartition, PartitionProducerState] = AdminResult()
        for tp in partitions:
            result.set_value(tp, PartitionProducerState(PRODUCERS.get(tp, [])))
        return result

    def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        self.calls.append(("abort_transaction", spec))

    def list_topics(self, *, list_internal: bool = False) -> list[TopicListing]:
        return [TopicListing("orders", None, False), TopicListing("other", None, False)]

    def describe_topics(self, names: Any) -> AdminResult[str, TopicDescription]:
        n0, n1 = Node(0, "h", 1), Node(1, "h", 2)
        result: AdminResult[str, TopicDescription] = AdminResult()
        for name in names:
            replicas = [n0, n1] if name == "orders" else [n0]
            result.set_value(name, TopicDescription(name, None, False, [
                TopicPartitionInfo(i, n0, replicas, replicas) for i in range(2)]))
        return result


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(txn_cmd, "admin_client", lambda args: fake)
    monkeypatch.setattr(txn_cmd, "clock", MockTime(NOW))
    return fake


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["transactions", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["list", "--state", "Ongoing,CompleteCommit", "--producer-id", "5",
                        "--duration-ms", "1000", "--pattern", ".*-1"], capsys)
    assert (code, out.splitlines()) == (0, [
        "TransactionalId Coordinator ProducerId TransactionState",
        "done-1          0           6          CompleteCommit",
        "open-1          1           5          Ongoing"])
    assert admin.calls == [("list_transactions", {
        "states": ["Ongoing", "CompleteCommit"], "producer_ids": [5], "duration_ms": 1000,
        "transactional_id_pattern": ".*-1"})]
    code, out, _ = run(["list", "--output", "json"], capsys)
    assert json.loads(out)[1] == {"transactional_id": "open-1", "producer_id": 5,
                                  "state": "Ongoing", "coordinator_id": 1}
    assert admin.calls[-1][1]["states"] is None


def test_describe(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert txn_cmd.describe_row("open-1", OPEN, NOW) == (
        1, "open-1", 5, 2, TransactionState.ONGOING, 60_000, NOW - 1_500, 1_500,
        "orders-0,orders-1")
    code, out, _ = run(["describe", "--transactional-id", "done-1"], capsys)
    assert (code, out.splitlines()) == (0, [
        "CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState "
        "TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs "
        "TopicPartitions",
        "0             done-1          6          0             CompleteCommit   "
        "60000                None                          None                  -"])
    code, out, _ = run(["describe", "--transactional-id", "open-1", "-o", "json"], capsys)
    assert json.loads(out)["transaction_duration_ms"] == 1_500
    code, out, err = run(["describe", "--transactional-id", "nobody"], capsys)
    assert (code, out, err) == (1, "", "Error: TRANSACTIONAL_ID_NOT_FOUND: transactional "
                                       "id 'nobody'\n")


def test_describe_producers(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["describe-producers", "--topic", "orders", "--partition", "1"], capsys)
    assert (code, out.splitlines()) == (0, [
        "ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp "
        "CurrentTransactionStartOffset",
        f"7          1             -1                     9            {NOW - 16 * MIN}"
        "       12",
        f"8          0             2                      1            {NOW - MIN}       13"])
    assert admin.calls == [("describe_producers", ([TP("orders", 1)], None))]


def test_abort_by_start_offset_or_by_hand(admin: FakeAdmin,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["abort", "--topic", "orders", "--partition", "1",
                        "--start-offset", "12"], capsys)
    assert (code, out) == (0, "Aborted the transaction of producer 7 (epoch 1) on orders-1.\n")
    # producer 7 never had a coordinator epoch: 0, as Kafka's tool sends
    assert admin.calls[-1] == ("abort_transaction",
                               AbortTransactionSpec(TP("orders", 1), 7, 1, 0))
    assert run(["abort", "--topic", "orders", "--partition", "0", "--producer-id", "5",
                "--producer-epoch", "2", "--coordinator-epoch", "-1"], capsys)[0] == 0
    assert admin.calls[-1] == ("abort_transaction",
                               AbortTransactionSpec(TP("orders", 0), 5, 2, 0))
    assert run(["abort", "--topic", "orders", "--partition", "0", "--start-offset", "41"],
               capsys)[2] == ("Error: Could not find any open transactions starting at "
                              "offset 41 on partition orders-0\n")
    assert run(["abort", "--topic", "orders", "--partition", "0", "--producer-id", "5",
                "--producer-epoch", "2"], capsys)[2] == \
        "Error: Missing required argument --coordinator-epoch\n"
    assert run(["abort", "--topic", "orders", "--partition", "0"], capsys)[0] == 1
    assert [c for c, _ in admin.calls].count("abort_transaction") == 2


def test_find_hanging(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["find-hanging", "--broker-id", "1"], capsys)
    assert (code, out.splitlines()) == (0, [
        "Topic  Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp "
        "Duration(min)",
        f"orders 1         7          1             -1               12          "
        f"{NOW - 16 * MIN}       16"])
    # only "orders" has a replica on broker 1; producers 5 and 7 are old enough to ask about
    assert admin.calls == [
        ("describe_producers", ([TP("orders", 0), TP("orders", 1)], None)),
        ("list_transactions", {"producer_ids": [5, 7]}),
        ("describe_transactions", ["open-1"])]
    # with a shorter timeout producer 8 (open, unknown to any coordinator) shows as well
    code, out, _ = run(["find-hanging", "--topic", "orders", "--partition", "1",
                        "--max-transaction-timeout", "0", "-o", "json"], capsys)
    assert [(r["ProducerId"], r["Duration(min)"]) for r in json.loads(out)] == [(7, 16), (8, 1)]
    assert run(["find-hanging"], capsys)[2].startswith("Error: The `find-hanging` command")


def test_hanging_rule() -> None:
    young_open = (TP("orders", 1), PRODUCERS[TP("orders", 1)][0])
    known = (TP("orders", 0), PRODUCERS[TP("orders", 0)][0])
    forgotten_partition = (TP("orders", 1), PRODUCERS[TP("orders", 0)][0])
    assert txn_cmd.hanging([young_open, known, forgotten_partition], {5: "open-1"},
                           {"open-1": TransactionDescription(
                               1, TransactionState.ONGOING, 5, 2, 1, 1,
                               frozenset({TP("orders", 0)}))}) == [young_open,
                                                                    forgotten_partition]
    assert txn_cmd.hanging([known], {5: "open-1"}, {"open-1": None}) == [known]
