"""KIP-890 against a real ``millrace broker`` process, driven with our protocol client so
each request can be held back and delivered late, as a slow network would.

* The Jepsen Bufstream case ("EndTxn delayed until after a new transaction started"):
  txn 1 is committed with EndTxn sent twice, the first copy held back; txn 2 begins
  (AddPartitionsToTxn, Produce); then the held copy arrives.  With
  ``transaction.version=2`` (EndTxn v5 bumps the epoch every transaction) it is fenced,
  txn 2 stays open and its abort really aborts: a read_committed confluent-kafka
  consumer never sees txn 2's record.  With the classic protocol (``transaction.version
  =1``, Kafka 3.x behaviour) the held copy commits txn 2 and the client's abort of txn 2
  is refused: the consumer sees a record its producer aborted.
* Part 1 (verification): a Produce of an aborted transaction delivered after the abort is
  refused with INVALID_TXN_STATE and nothing is written, so no transaction hangs and the
  last stable offset moves on; with ``transaction.partition.verification.enable=false``
  (the negative control) the same Produce opens a transaction no marker will close.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.protocol import (
    AddPartitionsToTxnRequest,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from millrace.record.batch import RecordBatchBuilder
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.raw_connection import RawConnection

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
TOPIC = "kip890"
NONE = 0
INVALID_TXN_STATE = 48
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90


class RawClient(RawConnection):
    def __init__(self, port: int) -> None:
        super().__init__(port, client_id="kip890-test")


def start_broker(tmp_path: Path, **overrides: str) -> BrokerProcess:
    b = BrokerProcess(tmp_path, overrides={
        "transaction.state.log.num.partitions": "3", **overrides}).start()
    c = RawClient(b.port)
    body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=2, replication_factor=1, assignments=[], configs=[])])
    assert c.call(body, 5).topics[0].error_code == 0
    c.close()
    return b


@pytest.fixture(scope="module")
def tv2_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("tv2"), **{"transaction.version": "2"})
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def tv1_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("tv1"))
    try:
        yield b
    finally:
        b.stop()


class TxnProducer:
    """A transactional producer spoken by hand, one request at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.c = RawClient(port)
        self.tid = f"tx-{uuid.uuid4().hex[:8]}"
        init = self.c.call(InitProducerIdRequest(
            transactional_id=self.tid, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1), 4)
        assert (init.error_code, init.producer_epoch) == (NONE, 0)
        self.pid, self.epoch = int(init.producer_id), 0
        self.seq = 0

    def add_partitions(self, partition: int, epoch: int | None = None) -> int:
        """AddPartitionsToTxn v3, retried while the previous transaction completes."""
        deadline = time.monotonic() + 20
        while True:
            body = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
                v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
                v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=TOPIC, partitions=[partition])])
            resp = self.c.call(body, 3)
            error = int(resp.results_by_topic_v3_and_below[0].results_by_partition[0]
                        .partition_error_code)
            if error != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
                return error
            time.sleep(0.05)

    def produce_request(self, partition: int, value: str) -> ProduceRequest:
        b = RecordBatchBuilder(producer_id=self.pid, producer_epoch=self.epoch,
                               base_sequence=self.seq, is_transactional=True)
        b.append(int(time.time() * 1000), None, value.encode())
        self.seq += 1
        return ProduceRequest(transactional_id=self.tid, acks=-1, timeout_ms=5000,
                              topic_data=[ProduceRequest.TopicProduceData(
                                  name=TOPIC, partition_data=[
                                      ProduceRequest.TopicProduceData.PartitionProduceData(
                                          index=partition, records=b.build())])])

    def produce(self, partition: int, value: str, client: RawClient | None = None,
                request: ProduceRequest | None = None) -> int:
        body = request or self.produce_request(partition, value)
        (topic,) = (client or self.c).call(body, 9).responses
        return int(topic.partition_responses[0].error_code)

    def end_request(self, commit: bool, epoch: int | None = None) -> EndTxnRequest:
        return EndTxnRequest(transactional_id=self.tid, producer_id=self.pid,
                             producer_epoch=self.epoch if epoch is None else epoch,
                             committed=commit)

    def end(self, request: EndTxnRequest, version: int,
            client: RawClient | None = None) -> Any:
        return (client or self.c).call(request, version)

    def bump(self, resp: Any) -> None:
        """Take the EndTxn v5 answer's epoch (a new epoch starts its sequences at 0)."""
        assert int(resp.producer_id) == self.pid
        self.epoch, self.seq = int(resp.producer_epoch), 0

    def describe(self) -> tuple[str, int, list[tuple[str, list[int]]]]:
        (state,) = self.c.call(DescribeTransactionsRequest(transactional_ids=[self.tid]),
                               0).transaction_states
        assert state.error_code == NONE
        return (state.transaction_state, int(state.producer_epoch),
                [(t.topic, list(t.partitions)) for t in state.topics])

    def wait_state(self, wanted: str) -> None:
        deadline = time.monotonic() + 20
        while self.describe()[0] != wanted:
            assert time.monotonic() < deadline, f"{self.tid} never reached {wanted}"
            time.sleep(0.05)

    def close(self) -> None:
        self.c.close()


def offsets(c: RawClient, partition: int) -> tuple[int, int]:
    """(latest offset read_uncommitted = high watermark, read_committed = LSO)."""
    out = []
    for isolation in (0, 1):
        cls = ListOffsetsRequest
        body = cls(replica_id=-1, isolation_level=isolation, topics=[cls.ListOffsetsTopic(
            name=TOPIC, partitions=[cls.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, timestamp=-1)])])
        out.append(int(c.call(body, 7).topics[0].partitions[0].offset))
    return out[0], out[1]


def read_committed(port: int, partition: int, want: int, wait_s: float = 20) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer: Any = Consumer({"bootstrap.servers": f"{HOST}:{port}",
                              "group.id": f"g-{uuid.uuid4().hex[:6]}",
                              "isolation.level": "read_committed",
                              "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        out: list[str] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(out) < want:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value().decode())
        return out
    finally:
        consumer.close()


def test_api_versions_advertise_transaction_version(tv1_broker: BrokerProcess,
                                                    tv2_broker: BrokerProcess) -> None:
    def features(port: int) -> tuple[Any, Any, int]:
        c = RawClient(port)
        try:
            resp = c.call(ApiVersionsRequest(client_software_name="t",
                                             client_software_version="1"), 3)
        finally:
            c.close()
        end_txn = next(k.max_version for k in resp.api_keys if k.api_key == 26)
        return ([(f.name, f.max_version_level) for f in resp.finalized_features or ()],
                [(f.name, f.min_version, f.max_version)
                 for f in resp.supported_features or ()], int(end_txn))

    assert features(tv1_broker.port) == ([], [], 4)
    assert features(tv2_broker.port) == ([("transaction.version", 2)],
                                         [("transaction.version", 0, 2)], 5)


def test_delayed_end_txn_is_fenced_with_transaction_version_2(
        tv2_broker: BrokerProcess) -> None:
    p = TxnProducer(tv2_broker.port)
    late = RawClient(tv2_broker.port)           # the connection the held copy waits on
    try:
        # txn 1: commit, EndTxn sent twice; the first copy is held back
        assert p.add_partitions(0) == NONE
        assert p.produce(0, "t1") == NONE
        held = p.end_request(commit=True)
        resp = p.end(p.end_request(commit=True), 5)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (NONE, p.pid, 1)
        p.bump(resp)
        # txn 2 begins at the bumped epoch
        assert p.add_partitions(0) == NONE
        assert p.produce(0, "t2") == NONE
        # the held copy of txn 1's EndTxn arrives: fenced, txn 2 untouched
        resp = p.end(held, 5, client=late)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (
            PRODUCER_FENCED, -1, -1)
        assert p.describe() == ("Ongoing", 1, [(TOPIC, [0])])
        # txn 2's abort really aborts (epoch 2), txn 3 commits
        resp = p.end(p.end_request(commit=False), 5)
        assert (resp.error_code, resp.producer_epoch) == (NONE, 2)
        p.bump(resp)
        assert p.add_partitions(0) == NONE
        assert p.produce(0, "t3") == NONE
        resp = p.end(p.end_request(commit=True), 5)
        assert (resp.error_code, resp.producer_epoch) == (NONE, 3)
        p.wait_state("CompleteCommit")
        # a retry of txn 3's EndTxn with its own (previous) epoch is still answered
        assert p.end(p.end_request(commit=True, epoch=2), 5).error_code == NONE
    finally:
        late.close()
        p.close()
    assert read_committed(tv2_broker.port, 0, want=3, wait_s=8) == ["t1", "t3"]


def test_produce_v12_and_txn_offset_commit_v5_add_partitions_implicitly(
        tv2_broker: BrokerProcess) -> None:
    """A transaction.version 2 client sends no AddPartitionsToTxn/AddOffsetsToTxn: the
    leader (Produce v12) and the group coordinator (TxnOffsetCommit v5) add the
    partitions; a Produce at the epoch before the last EndTxn is refused."""
    p = TxnProducer(tv2_broker.port)
    group = f"g-{uuid.uuid4().hex[:6]}"
    try:
        (topic,) = p.c.call(p.produce_request(1, "implicit"), 12).responses
        assert topic.partition_responses[0].error_code == NONE
        assert p.describe() == ("Ongoing", 0, [(TOPIC, [1])])
        t_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        got = p.c.call(TxnOffsetCommitRequest(
            transactional_id=p.tid, group_id=group, producer_id=p.pid, producer_epoch=0,
            generation_id=-1, member_id="", group_instance_id=None, topics=[t_cls(
                name=TOPIC, partitions=[t_cls.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                    committed_metadata="")])]), 5)
        assert got.topics[0].partitions[0].error_code == NONE
        state, epoch, parts = p.describe()
        assert (state, epoch, sorted(t for t, _ in parts)) == (
            "Ongoing", 0, ["__consumer_offsets", TOPIC])
        stale = p.produce_request(1, "stale")        # epoch 0, sent after the commit
        resp = p.end(p.end_request(commit=True), 5)
        assert (resp.error_code, resp.producer_epoch) == (NONE, 1)
        p.wait_state("CompleteCommit")
        (topic,) = p.c.call(stale, 12).responses
        assert topic.partition_responses[0].error_code == 47   # INVALID_PRODUCER_EPOCH
        assert p.describe() == ("CompleteCommit", 1, [])
        fetched = p.c.call(OffsetFetchRequest(group_id=group, require_stable=True, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]),
            7)
        assert fetched.topics[0].partitions[0].committed_offset == 42
        assert offsets(p.c, 1) == (2, 2)           # the record and its marker, no more
    finally:
        p.close()
    assert read_committed(tv2_broker.port, 1, want=1) == ["implicit"]


def test_delayed_end_txn_commits_the_next_transaction_with_version_1(
        tv1_broker: BrokerProcess) -> None:
    """What Kafka 3.x does, kept as the reason for transaction.version 2: one epoch for
    every transaction, so the held-back commit of txn 1 commits txn 2."""
    p = TxnProducer(tv1_broker.port)
    late = RawClient(tv1_broker.port)
    try:
        assert p.add_partitions(0) == NONE
        assert p.produce(0, "t1") == NONE
        held = p.end_request(commit=True)
        assert p.end(p.end_request(commit=True), 4).error_code == NONE
        assert p.add_partitions(0) == NONE
        assert p.produce(0, "t2") == NONE
        assert p.end(held, 4, client=late).error_code == NONE    # commits txn 2
        # the producer then decides to abort txn 2: too late
        assert p.end(p.end_request(commit=False), 4).error_code == INVALID_TXN_STATE
        p.wait_state("CompleteCommit")
        assert p.describe()[1] == 0
    finally:
        late.close()
        p.close()
    assert read_committed(tv1_broker.port, 0, want=2) == ["t1", "t2"]


def test_delayed_produce_of_aborted_transaction_is_refused(tv1_broker: BrokerProcess) -> None:
    p = TxnProducer(tv1_broker.port)
    late = RawClient(tv1_broker.port)
    try:
        assert p.add_partitions(1) == NONE
        held = p.produce_request(1, "late")        # never arrives before the abort
        assert p.end(p.end_request(commit=False), 4).error_code == NONE
        p.wait_state("CompleteAbort")
        assert offsets(p.c, 1) == (1, 1)           # only the abort marker was written
        assert p.produce(1, "late", client=late, request=held) == INVALID_TXN_STATE
        assert offsets(p.c, 1) == (1, 1)           # nothing written, nothing hanging
        # the producer's next transaction on the partition is verified and written (the
        # refused batch's sequence was never used: the next batch takes it again)
        assert p.add_partitions(1) == NONE
        p.seq = 0
        assert p.produce(1, "next") == NONE
        assert p.end(p.end_request(commit=True), 4).error_code == NONE
        p.wait_state("CompleteCommit")
        assert offsets(p.c, 1) == (3, 3)
    finally:
        late.close()
        p.close()


def test_without_verification_the_delayed_produce_hangs_a_transaction(
        tmp_path: Path) -> None:
    """The negative control: Kafka before 3.6."""
    broker = start_broker(tmp_path, **{"transaction.partition.verification.enable": "false"})
    try:
        p = TxnProducer(broker.port)
        try:
            assert p.add_partitions(1) == NONE
            held = p.produce_request(1, "late")
            assert p.end(p.end_request(commit=False), 4).error_code == NONE
            p.wait_state("CompleteAbort")
            assert offsets(p.c, 1) == (1, 1)
            assert p.produce(1, "late", request=held) == NONE
            assert offsets(p.c, 1) == (2, 1)       # LSO stuck at the hanging batch
        finally:
            p.close()
    finally:
        broker.stop()


def test_kafka_python_and_librdkafka_producers_pass_verification(
        tv1_broker: BrokerProcess) -> None:
    """Both clients' transactional producers (classic protocol) with verification on:
    every first batch per partition goes through the coordinator; committed records are
    read, aborted ones are not."""
    import warnings

    from confluent_kafka import Producer

    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with read_text
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer

    bootstrap = f"{HOST}:{tv1_broker.port}"
    c = RawClient(tv1_broker.port)
    body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
        name="clients", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    assert c.call(body, 5).topics[0].error_code == 0
    c.close()
    kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4()}")
    try:
        kp.init_transactions()
        for i, commit in enumerate((True, False, True)):
            kp.begin_transaction()
            kp.send("clients", f"kp{i}".encode(), partition=0)
            kp.flush()
            if commit:
                kp.commit_transaction()
            else:
                kp.abort_transaction()
    finally:
        kp.close()
    rk = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"rk-{uuid.uuid4()}"})
    rk.init_transactions(20)
    for i, commit in enumerate((False, True)):
        rk.begin_transaction()
        rk.produce("clients", f"rk{i}".encode(), partition=0)
        if commit:
            rk.commit_transaction(20)
        else:
            rk.abort_transaction(20)
    from confluent_kafka import Consumer, TopicPartition

    consumer: Any = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-clients",
                              "isolation.level": "read_committed",
                              "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("clients", 0, 0)])
        seen: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen) < 3:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value().decode())
    finally:
        consumer.close()
    assert seen == ["kp0", "kp2", "rk1"]
