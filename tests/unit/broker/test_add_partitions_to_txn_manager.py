"""``AddPartitionsToTxnManager``: the request a leader sends, how the coordinator's
answers become Produce errors, and which operation each request version asks for."""

from __future__ import annotations

import asyncio
from typing import Any

from millrace.broker.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    TransactionSupportedOperation,
    produce_error,
    translate_response,
)
from millrace.broker.api_version_manager import ApiVersionManager
from millrace.broker.handlers import load_all
from millrace.broker.handlers.produce import transaction_supported_operation
from millrace.broker.metadata import PartitionState
from millrace.common.errors import BrokerNotAvailableError, Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

Op = TransactionSupportedOperation
R = AddPartitionsToTxnResponse
TR = R.AddPartitionsToTxnResult.AddPartitionsToTxnTopicResult
PR = TR.AddPartitionsToTxnPartitionResult


def response(errors: dict[tuple[str, int], int], top: int = 0) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[Any]] = {}
    for (t, p), e in errors.items():
        by_topic.setdefault(t, []).append(PR(partition_index=p, partition_error_code=e))
    return R(throttle_time_ms=0, error_code=top, results_by_transaction=[
        R.AddPartitionsToTxnResult(transactional_id="t", topic_results=[
            TR(name=t, results_by_partition=ps)
            for t, ps in by_topic.items()])])


def test_translate_response() -> None:
    parts = [("a", 0), ("a", 1), ("b", 0)]
    got = translate_response(response({("a", 0): Errors.NONE,
                                       ("a", 1): Errors.TRANSACTION_ABORTABLE,
                                       ("b", 0): Errors.PRODUCER_FENCED}), parts,
                             Op.DEFAULT_ERROR)
    assert got == {("a", 1): Errors.INVALID_TXN_STATE, ("b", 0): Errors.INVALID_PRODUCER_EPOCH}
    got = translate_response(response({("a", 1): Errors.TRANSACTION_ABORTABLE}), parts,
                             Op.GENERIC_ERROR)
    assert got == {("a", 1): Errors.TRANSACTION_ABORTABLE}
    assert translate_response(response({}, Errors.CLUSTER_AUTHORIZATION_FAILED), parts,
                              Op.DEFAULT_ERROR) == dict.fromkeys(parts, Errors.INVALID_TXN_STATE)


def test_produce_error() -> None:
    for code in (Errors.CONCURRENT_TRANSACTIONS, Errors.NETWORK_EXCEPTION,
                 Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
                 Errors.NOT_COORDINATOR):
        assert produce_error(code) == Errors.NOT_ENOUGH_REPLICAS
    assert produce_error(Errors.INVALID_TXN_STATE) == Errors.INVALID_TXN_STATE


class Metadata:
    def __init__(self, leader: int) -> None:
        self.leader = leader

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        assert topic == "__transaction_state" and 0 <= partition < 3
        return PartitionState(leader=self.leader, leader_epoch=0, isr=(self.leader,))


def test_verify_transaction_sends_to_the_coordinator() -> None:
    sent: list[tuple[int, AddPartitionsToTxnRequest]] = []

    async def send(node: int, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        sent.append((node, request))
        return response({("out", 0): Errors.NONE, ("out", 2): Errors.NONE})

    manager = AddPartitionsToTxnManager(Metadata(4), 1, 3, send=send)  # type: ignore[arg-type]
    got = asyncio.run(manager.verify_transaction("tx", 7, 3, [("out", 2), ("out", 0)],
                                                 Op.DEFAULT_ERROR))
    assert got == {}
    [(node, req)] = sent
    [txn] = req.transactions
    assert (node, txn.transactional_id, txn.producer_id, txn.producer_epoch,
            txn.verify_only) == (4, "tx", 7, 3, True)
    assert [(t.name, list(t.partitions)) for t in txn.topics] == [("out", [0, 2])]
    asyncio.run(manager.verify_transaction("tx", 7, 3, [("out", 0)], Op.ADD_PARTITION))
    assert sent[1][1].transactions[0].verify_only is False


def test_verify_transaction_without_coordinator_or_connection() -> None:
    async def down(node: int, request: AddPartitionsToTxnRequest) -> Any:
        raise BrokerNotAvailableError("down")

    manager = AddPartitionsToTxnManager(Metadata(-1), 1, 3, send=down)  # type: ignore[arg-type]
    assert asyncio.run(manager.verify_transaction("tx", 7, 3, [("out", 0)], Op.DEFAULT_ERROR)
                       ) == {("out", 0): Errors.COORDINATOR_NOT_AVAILABLE}
    manager = AddPartitionsToTxnManager(Metadata(2), 1, 3, send=down)  # type: ignore[arg-type]
    assert asyncio.run(manager.verify_transaction("tx", 7, 3, [("out", 0)], Op.DEFAULT_ERROR)
                       ) == {("out", 0): Errors.NETWORK_EXCEPTION}


def test_operation_by_produce_version_and_transaction_version() -> None:
    assert transaction_supported_operation(9, 2) is Op.DEFAULT_ERROR
    assert transaction_supported_operation(11, 2) is Op.GENERIC_ERROR
    assert transaction_supported_operation(12, 1) is Op.GENERIC_ERROR
    assert transaction_supported_operation(12, 2) is Op.ADD_PARTITION


def test_versions_served_per_transaction_version() -> None:
    keys = (ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT, ApiKey.ADD_PARTITIONS_TO_TXN)
    tv1 = ApiVersionManager(load_all(), 1).advertised
    tv2 = ApiVersionManager(load_all(), 2).advertised
    assert [tv1[k][1] for k in keys] == [4, 4, 5]
    assert [tv2[k][1] for k in keys] == [5, 5, 5]
