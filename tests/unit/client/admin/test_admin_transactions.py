"""Transaction admin calls against scripted brokers (no sockets): ListTransactions fanned
out to every broker and merged, DescribeTransactions via batched (or per-id)
FindCoordinator, DescribeProducers and the abort marker sent to partition leaders."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client.admin import (
    AbortTransactionSpec,
    PartitionProducerState,
    ProducerState,
    TopicPartition,
    TransactionDescription,
    TransactionListing,
    TransactionState,
    _transactions,
)
from millrace.client.cluster import Node
from millrace.common.errors import (
    Errors,
    InvalidProducerEpochError,
    TransactionalIdNotFoundError,
    UnsupportedVersionError,
)
from millrace.protocol import (
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    FindCoordinatorResponse,
    ListTransactionsResponse,
    WriteTxnMarkersResponse,
)
from tests.unit.client.admin.scripted_network import NODE, ScriptedNetwork
from tests.unit.client.admin.test_admin_operations import DEADLINE, metadata

TP = TopicPartition
NODE1 = Node(1, "broker1", 9093)
L_CLS = ListTransactionsResponse.TransactionState
D_CLS = DescribeTransactionsResponse.TransactionState


# ---------------------------------------------------------------------- list
def test_list_transactions_merges_every_broker_and_retries_a_loading_one() -> None:
    answers = {0: [L_CLS(transactional_id="t-b", producer_id=7, transaction_state="Ongoing")],
               1: [L_CLS(transactional_id="t-a", producer_id=9,
                         transaction_state="CompleteCommit")]}
    asked: list[Any] = []

    def list_txns(request: Any, version: int, node: Node | None) -> Any:
        assert node is not None
        asked.append((node.id, request))
        if node.id == 1 and len(asked) == 2:  # node 1 is still loading the first time
            return ListTransactionsResponse(error_code=Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return ListTransactionsResponse(transaction_states=answers[node.id])

    net = ScriptedNetwork({"ListTransactions": list_txns}, nodes=[NODE, NODE1])
    listed = _transactions.list_transactions(net, ["Ongoing", TransactionState.COMPLETE_COMMIT],
                                             [7, 9], 1_000, "t-.*", DEADLINE)
    assert listed == [TransactionListing("t-a", 9, TransactionState.COMPLETE_COMMIT, 1),
                      TransactionListing("t-b", 7, TransactionState.ONGOING, 0)]
    assert [node_id for node_id, _ in asked] == [0, 1, 1]
    request = asked[0][1]
    assert (request.state_filters, request.producer_id_filters, request.duration_filter,
            request.transactional_id_pattern) == (["Ongoing", "CompleteCommit"], [7, 9],
                                                  1_000, "t-.*")


def test_list_transactions_without_filters_at_v0_and_a_filter_v0_cannot_carry() -> None:
    def list_txns(request: Any, version: int, node: Node | None) -> Any:
        assert (request.state_filters, request.producer_id_filters) == ([], [])
        return ListTransactionsResponse(transaction_states=[
            L_CLS(transactional_id="x", producer_id=1, transaction_state="PrepareEpochFence"),
            L_CLS(transactional_id="y", producer_id=2, transaction_state="SomethingNew")])

    net = ScriptedNetwork({"ListTransactions": list_txns}, {"ListTransactions": 0})
    assert [(t.transactional_id, t.state) for t in _transactions.list_transactions(
        net, None, None, None, None, DEADLINE)] == [
        ("x", TransactionState.PREPARE_EPOCH_FENCE), ("y", TransactionState.UNKNOWN)]
    with pytest.raises(UnsupportedVersionError):
        _transactions.list_transactions(net, None, None, 60_000, None, DEADLINE)
    net.versions["ListTransactions"] = 1
    with pytest.raises(UnsupportedVersionError):
        _transactions.list_transactions(net, None, None, None, "x.*", DEADLINE)


# ---------------------------------------------------------------------- describe
def _describe_handlers(not_coordinator_once: set[str]) -> dict[str, Any]:
    """t-0 lives on node 0, t-1 on node 1; 'gone' is unknown; ids in
    ``not_coordinator_once`` answer NOT_COORDINATOR the first time."""
    where = {"t-0": NODE, "t-1": NODE1, "gone": NODE}

    def find(request: Any, version: int, node: Node | None) -> Any:
        assert request.key_type == 1
        if version >= 4:
            return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
                key=k, node_id=where[k].id, host=where[k].host, port=where[k].port)
                for k in request.coordinator_keys])
        n = where[request.key]
        return FindCoordinatorResponse(node_id=n.id, host=n.host, port=n.port)

    def describe(request: Any, version: int, node: Node | None) -> Any:
        assert node is not None
        states = []
        for tid in request.transactional_ids:
            assert where[tid] == node
            if tid in not_coordinator_once:
                not_coordinator_once.discard(tid)
                states.append(D_CLS(transactional_id=tid, error_code=Errors.NOT_COORDINATOR))
            elif tid == "gone":
                states.append(D_CLS(transactional_id=tid,
                                    error_code=Errors.TRANSACTIONAL_ID_NOT_FOUND))
            elif tid == "t-0":
                states.append(D_CLS(
                    transactional_id=tid, transaction_state="Ongoing",
                    transaction_timeout_ms=60_000, transaction_start_time_ms=1_700,
                    producer_id=5, producer_epoch=2,
                    topics=[D_CLS.TopicData(topic="a", partitions=[0, 2])]))
            else:
                states.append(D_CLS(
                    transactional_id=tid, transaction_state="CompleteCommit",
                    transaction_timeout_ms=30_000, transaction_start_time_ms=-1,
                    producer_id=6, producer_epoch=0, topics=[]))
        return DescribeTransactionsResponse(transaction_states=states)

    return {"FindCoordinator": find, "DescribeTransactions": describe}


def test_describe_transactions_batches_the_lookup_and_asks_each_coordinator() -> None:
    net = ScriptedNetwork(_describe_handlers({"t-1"}), nodes=[NODE, NODE1])
    result = _transactions.describe_transactions(net, ["t-0", "t-1", "gone", "t-0"], DEADLINE)
    assert list(result) == ["t-0", "t-1", "gone"]
    assert result["t-0"].result() == TransactionDescription(
        0, TransactionState.ONGOING, 5, 2, 60_000, 1_700, frozenset({TP("a", 0), TP("a", 2)}))
    assert result["t-1"].result() == TransactionDescription(
        1, TransactionState.COMPLETE_COMMIT, 6, 0, 30_000, None, frozenset())
    with pytest.raises(TransactionalIdNotFoundError, match="gone"):
        result["gone"].result()
    # one batched lookup, one DescribeTransactions per coordinator; then t-1 again alone
    assert [(name, node.id if node else None) for name, _, node in net.sent] == [
        ("FindCoordinator", None), ("DescribeTransactions", 0),
        ("DescribeTransactions", 1), ("FindCoordinator", None),
        ("DescribeTransactions", 1)]


def test_describe_transactions_looks_up_one_id_at_a_time_before_find_coordinator_v4() -> None:
    net = ScriptedNetwork(_describe_handlers(set()), {"FindCoordinator": 3},
                          nodes=[NODE, NODE1])
    result = _transactions.describe_transactions(net, ["t-0", "t-1"], DEADLINE)
    assert {tid: f.result().producer_id for tid, f in result.items()} == {"t-0": 5, "t-1": 6}
    assert net.names_sent() == ["FindCoordinator", "FindCoordinator",
                                "DescribeTransactions", "DescribeTransactions"]


# ---------------------------------------------------------------------- producers and abort
def test_describe_producers_asks_the_leader_and_again_after_a_leader_change() -> None:
    s_cls = DescribeProducersResponse.TopicResponse.PartitionResponse
    asked: list[Any] = []

    def producers(request: Any, version: int, node: Node | None) -> Any:
        assert node == NODE
        asked.append([(t.name, t.partition_indexes) for t in request.topics])
        if len(asked) == 2:
            return DescribeProducersResponse(topics=[DescribeProducersResponse.TopicResponse(
                name="a", partitions=[s_cls(partition_index=1, active_producers=[])])])
        return DescribeProducersResponse(topics=[DescribeProducersResponse.TopicResponse(
            name="a", partitions=[
                s_cls(partition_index=0, active_producers=[
                    s_cls.ProducerState(producer_id=5, producer_epoch=2, last_sequence=3,
                                        last_timestamp=1_800, coordinator_epoch=-1,
                                        current_txn_start_offset=40),
                    s_cls.ProducerState(producer_id=6, producer_epoch=0, last_sequence=0,
                                        last_timestamp=1_900, coordinator_epoch=4,
                                        current_txn_start_offset=-1)]),
                s_cls(partition_index=1, error_code=Errors.NOT_LEADER_OR_FOLLOWER)])])

    net = ScriptedNetwork({"Metadata": metadata({"a": 2}), "DescribeProducers": producers})
    result = _transactions.describe_producers(net, [TP("a", 0), TP("a", 1)], None, DEADLINE)
    assert result[TP("a", 0)].result() == PartitionProducerState([
        ProducerState(5, 2, 3, 1_800, None, 40), ProducerState(6, 0, 0, 1_900, 4, None)])
    assert result[TP("a", 1)].result() == PartitionProducerState([])
    assert asked == [[("a", [0, 1])], [("a", [1])]]


def test_abort_transaction_writes_an_abort_marker_at_the_leader() -> None:
    seen: list[Any] = []

    def markers(request: Any, version: int, node: Node | None) -> Any:
        assert (node, version) == (NODE, 1)
        [m] = request.markers
        seen.append((m.producer_id, m.producer_epoch, m.transaction_result,
                     m.coordinator_epoch, [(t.name, t.partition_indexes) for t in m.topics]))
        r_cls = WriteTxnMarkersResponse.WritableTxnMarkerResult
        t_cls = r_cls.WritableTxnMarkerTopicResult
        code = Errors.INVALID_PRODUCER_EPOCH if m.producer_epoch < 2 else 0
        return WriteTxnMarkersResponse(markers=[r_cls(producer_id=m.producer_id, topics=[
            t_cls(name="a", partitions=[t_cls.WritableTxnMarkerPartitionResult(
                partition_index=1, error_code=code)])])])

    net = ScriptedNetwork({"Metadata": metadata({"a": 2}), "WriteTxnMarkers": markers})
    _transactions.abort_transaction(net, AbortTransactionSpec(TP("a", 1), 5, 2, 7), DEADLINE)
    assert seen == [(5, 2, False, 7, [("a", [1])])]
    with pytest.raises(InvalidProducerEpochError, match="partition 'a-1'"):
        _transactions.abort_transaction(net, AbortTransactionSpec(TP("a", 1), 5, 1, 7),
                                        DEADLINE)
