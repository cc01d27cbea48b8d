"""The transaction coordinator against a real ``millrace broker`` process.

librdkafka's transactional producer (confluent-kafka): ``init_transactions``,
``begin_transaction``, produce, ``commit_transaction`` / ``abort_transaction`` complete
without error, several transactions in a row (each needs the previous one's markers
written and its CompleteCommit/CompleteAbort recorded); a second producer with the same
``transactional.id`` fences the first, whose commit then fails fatally; and a
transaction left open by a producer that went away is aborted at its
``transaction.timeout.ms``, with the epoch bumped (raw protocol, so the exact ids and
epochs can be checked).

What consumers see (read_committed, markers in the log) is asserted by
test_txn_read_committed.py and tests/compat/test_transactions_peers.py.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from millrace.protocol import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
)
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.raw_connection import RawConnection

pytestmark = [pytest.mark.integration]

HOST = "127.0.0.1"
TOPIC = "txn-out"
PRODUCER_FENCED = 90
CONCURRENT_TRANSACTIONS = 51


class RawClient(RawConnection):
    def __init__(self, port: int) -> None:
        super().__init__(port, client_id="txn-test")


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = BrokerProcess(tmp_path, overrides={
        "transaction.state.log.num.partitions": "5",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}).start()
    c = RawClient(b.port)
    body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=3, replication_factor=1, assignments=[], configs=[])])
    assert c.call(body, 5).topics[0].error_code == 0
    c.close()
    try:
        yield b
    finally:
        b.stop()


def producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                     "transaction.timeout.ms": 20000, **extra})


def test_commit_and_abort_complete(broker: BrokerProcess) -> None:
    p = producer(broker.bootstrap, f"tx-{uuid.uuid4()}")
    p.init_transactions(20)
    for i in range(4):
        p.begin_transaction()
        for part in range(3):
            p.produce(TOPIC, f"v{i}-{part}".encode(), partition=part)
        if i % 2:
            p.abort_transaction(20)
        else:
            p.commit_transaction(20)


def test_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    tid = f"tx-{uuid.uuid4()}"
    first = producer(broker.bootstrap, tid)
    first.init_transactions(20)
    first.begin_transaction()
    first.produce(TOPIC, b"zombie", partition=0)
    first.flush(20)
    second = producer(broker.bootstrap, tid)
    second.init_transactions(30)      # aborts the first one's transaction, bumps the epoch
    second.begin_transaction()
    second.produce(TOPIC, b"winner", partition=0)
    second.commit_transaction(20)
    with pytest.raises(KafkaException) as info:
        first.commit_transaction(20)
    assert info.value.args[0].fatal()


def test_open_transaction_is_aborted_at_its_timeout(broker: BrokerProcess) -> None:
    tid = f"tx-{uuid.uuid4()}"
    c = RawClient(broker.port)
    try:
        found = c.call(FindCoordinatorRequest(key=tid, key_type=1), 3)
        assert (found.error_code, found.node_id) == (0, 0)
        init = c.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=1500,
                                            producer_id=-1, producer_epoch=-1), 4)
        assert (init.error_code, init.producer_epoch) == (0, 0)
        pid = init.producer_id
        add = c.call(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=0, v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC,
                                                                  partitions=[0, 1])]), 3)
        assert [p.partition_error_code for t in add.results_by_topic_v3_and_below
                for p in t.results_by_partition] == [0, 0]
        time.sleep(3)                   # the producer is gone; the timeout passes
        end = c.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=0,
                                   committed=True), 3)
        assert end.error_code == PRODUCER_FENCED
        deadline = time.monotonic() + 20
        while True:   # CONCURRENT_TRANSACTIONS until the abort's markers are written
            again = c.call(InitProducerIdRequest(transactional_id=tid,
                                                 transaction_timeout_ms=1500,
                                                 producer_id=-1, producer_epoch=-1), 4)
            if again.error_code != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # the timeout abort took epoch 1, this producer gets 2
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, 2)
    finally:
        c.close()
