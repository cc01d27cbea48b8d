"""millrace's transactional producer against a real ``millrace broker`` with
``transaction.version`` 2 and 1, through a small TCP proxy that can hold back one EndTxn.

The broker advertises the proxy's address, so every connection of the producer goes
through it.  The proxy splits the client's bytes into request frames; when armed it keeps
the next EndTxn frame and closes that client connection, as a network that delays a
request and then drops the connection would.  The producer retries the EndTxn on a new
connection; the test later delivers the held copy on a connection of its own.

* transaction.version 2: several committed and aborted transactions, the epoch grows by
  one per transaction (DescribeTransactions), a read_committed confluent-kafka consumer
  sees exactly the committed records, ``send_offsets_to_transaction`` commits offsets.
* The Jepsen Bufstream case with our client, at both transaction versions: the held
  EndTxn of transaction 1 arrives after transaction 2 wrote a record, is fenced (v2: the
  epoch moved on with the commit; v1: the producer bumped it because the first EndTxn got
  no answer), and transaction 2 is still aborted for real when the producer aborts it.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.client.cluster import TopicPartition
from millrace.client.consumer import ConsumerGroupMetadata, OffsetAndMetadata
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.protocol import CreateTopicsRequest, DescribeTransactionsRequest, OffsetFetchRequest
from millrace.testing.broker_process import BrokerProcess, free_port
from tests.integration.test_transactions_clients import read
from tests.integration.test_txn_kip890 import RawClient

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
END_TXN = 26
PRODUCER_FENCED = 90
INVALID_PRODUCER_EPOCH = 47


class HoldingProxy:
    """Forwards client connections to the broker; can hold back one EndTxn frame."""

    def __init__(self, port: int, broker_port: int) -> None:
        self.broker_port = broker_port
        self.server = socket.create_server((HOST, port))
        self.arm = False
        self.held: bytes | None = None
        self.held_event = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection((HOST, self.broker_port))
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            s.close()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        buf = b""
        try:
            while chunk := client.recv(65536):
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    size = 4 + struct.unpack(">i", buf[:4])[0]
                    frame, buf = buf[:size], buf[size:]
                    api_key = struct.unpack(">h", frame[4:6])[0]
                    if api_key == END_TXN and self.arm:
                        self.arm = False
                        self.held = frame
                        self.held_event.set()
                        raise OSError("dropped after holding EndTxn")
                    upstream.sendall(frame)
        except OSError:
            pass
        for s in (client, upstream):
            s.close()

    def deliver_held(self) -> int:
        """Send the held EndTxn to the broker now; its error code."""
        assert self.held is not None
        with socket.create_connection((HOST, self.broker_port), timeout=15) as s:
            s.sendall(self.held)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = s.recv(65536)
                assert chunk, "the broker closed the connection"
                data += chunk
        version = struct.unpack(">h", self.held[6:8])[0]
        # size, correlation id, [header tags], throttle_time_ms, error_code
        offset = 4 + 4 + (1 if version >= 3 else 0) + 4
        return int(struct.unpack(">h", data[offset:offset + 2])[0])

    def close(self) -> None:
        self.server.close()


def start(tmp_path: Path, transaction_version: int) -> tuple[BrokerProcess, HoldingProxy]:
    proxy_port = free_port()
    broker = BrokerProcess(tmp_path, overrides={
        "transaction.state.log.num.partitions": "3",
        "transaction.version": str(transaction_version),
        "advertised.listeners": f"PLAINTEXT://{HOST}:{proxy_port}"}).start()
    proxy = HoldingProxy(proxy_port, broker.port)
    c = RawClient(broker.port)
    for topic in ("out", "in"):
        body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=2, replication_factor=1, assignments=[], configs=[])])
        assert c.call(body, 5).topics[0].error_code == 0
    c.close()
    return broker, proxy


@pytest.fixture(scope="module", params=[2, 1], ids=["tv2", "tv1"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[BrokerProcess, HoldingProxy, int]]:
    version = int(request.param)
    broker, proxy = start(tmp_path_factory.mktemp(f"tv{version}"), version)
    try:
        yield broker, proxy, version
    finally:
        proxy.close()
        broker.stop()


def producer(proxy: HoldingProxy, txn_id: str) -> KafkaProducer[bytes, bytes]:
    return KafkaProducer({"bootstrap.servers": f"{HOST}:{proxy.server.getsockname()[1]}",
                          "transactional.id": txn_id, "max.block.ms": 20000,
                          "linger.ms": 1})


def describe(broker: BrokerProcess, txn_id: str) -> tuple[str, int, int]:
    c = RawClient(broker.port)
    try:
        (state,) = c.call(DescribeTransactionsRequest(transactional_ids=[txn_id]),
                          0).transaction_states
        return state.transaction_state, state.producer_id, state.producer_epoch
    finally:
        c.close()


def test_commits_and_aborts_epochs_per_transaction_version(
        cluster: tuple[BrokerProcess, HoldingProxy, int]) -> None:
    """transaction.version 2: one epoch per transaction; the classic protocol (1): the
    epoch init_transactions gave, for every transaction."""
    broker, proxy, version = cluster
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    committed: list[bytes] = []
    with producer(proxy, txn_id) as p:
        p.init_transactions()
        tm = p._transaction_manager
        assert tm is not None
        pid = tm.producer_id
        for n in range(5):
            p.begin_transaction()
            values = [f"{n}-{i}".encode() for i in range(3)]
            futures = [p.send(ProducerRecord("out", v, partition=i % 2))
                       for i, v in enumerate(values)]
            if n % 2 == 0:  # an abort goes out at once, racing its Produce on purpose
                for f in futures:
                    f.get(20)
            if n == 2:
                p.send_offsets_to_transaction({TopicPartition("in", 0): OffsetAndMetadata(17)},
                                              ConsumerGroupMetadata(f"g-{txn_id}"))
            if n % 2 == 0:
                p.commit_transaction()
                committed += values
            else:
                p.abort_transaction()
            assert tm.is_transaction_v2_enabled == (version == 2)
            epoch = n + 1 if version == 2 else 0
            assert describe(broker, txn_id)[1:] == (pid, epoch)
            assert (tm.producer_id, tm.producer_epoch) == (pid, epoch)
    assert read(broker.bootstrap, "out", 2, "read_committed", len(committed)) == \
        sorted(committed)
    c = RawClient(broker.port)
    try:
        fetched = c.call(OffsetFetchRequest(group_id=f"g-{txn_id}", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="in", partition_indexes=[0])]), 5)
        assert fetched.topics[0].partitions[0].committed_offset == 17
    finally:
        c.close()


def test_a_delayed_end_txn_does_not_end_the_next_transaction(
        cluster: tuple[BrokerProcess, HoldingProxy, int]) -> None:
    broker, proxy, version = cluster
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    topic_values: list[bytes] = []
    with producer(proxy, txn_id) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(ProducerRecord("out", b"one-" + txn_id.encode(), partition=0))
        proxy.arm = True
        p.commit_transaction()  # the first EndTxn is held, the retry commits
        assert proxy.held_event.is_set()
        topic_values.append(b"one-" + txn_id.encode())
        p.begin_transaction()
        p.send(ProducerRecord("out", b"two-" + txn_id.encode(), partition=1)).get(20)
        assert describe(broker, txn_id)[0] == "Ongoing"
        error = proxy.deliver_held()
        assert error in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)
        assert describe(broker, txn_id)[0] == "Ongoing"  # transaction 2 still open
        p.abort_transaction()
        state = describe(broker, txn_id)
        assert state[0] in ("PrepareAbort", "CompleteAbort")
        assert state[2] == (2 if version == 2 else 1)  # v2: +1 per EndTxn; v1: the bump
    proxy.held = None
    proxy.held_event.clear()
    got = [v for v in read(broker.bootstrap, "out", 2, "read_committed", 1, timeout=10)
           if txn_id.encode() in v]
    assert got == topic_values
