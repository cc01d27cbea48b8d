"""An in-process Kafka cluster for client unit tests: no sockets, real protocol bytes.

``FakeSelector`` stands in for ``millrace.client._selector.Selector``: connecting to an
address of a ``FakeCluster`` broker succeeds at the next ``poll``; every request written
is decoded by a ``ServerConnection`` (the broker half of our codec), answered by the
``FakeCluster`` and the encoded response is delivered at the next ``poll`` -- unless the
test holds responses back (``cluster.hold``) to keep requests in flight.

``FakeCluster`` answers ApiVersions, Metadata, InitProducerId and Produce.  Its Produce
keeps every appended record, can be told to answer the next produce of a partition with
an error (``fail_next``), and checks idempotent sequences like a Kafka broker (the last
five batches per producer; duplicates answered with their original offset; gaps with
OUT_OF_ORDER_SEQUENCE_NUMBER).
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.protocol import (
    API,
    ApiKey,
    ApiVersionsFallback,
    ServerConnection,
    api_versions_fallback_response,
)
from millrace.protocol.framing import NEED_DATA
from millrace.record import Record, RecordBatch, set_base_offset

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47


@dataclass
class _ProducerState:
    epoch: int
    last_sequence: int = -1
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))


@dataclass
class StoredBatch:
    base_offset: int
    header: Any
    records: list[Record]


class FakeCluster:
    def __init__(self, nodes: int = 1, topics: dict[str, int] | None = None,
                 auto_create_partitions: int | None = 3) -> None:
        self.nodes = {i: ("fake", 9092 + i) for i in range(nodes)}
        self.versions: dict[int, tuple[int, int]] = {
            k: (a.versions.low, min(a.versions.high, 13)) for k, a in API.items()}
        self.auto_create_partitions = auto_create_partitions
        self.leaders: dict[str, list[int]] = {}
        for name, count in (topics or {}).items():
            self.create_topic(name, count)
        self.batches: dict[TopicPartition, list[StoredBatch]] = defaultdict(list)
        self.next_offset: dict[TopicPartition, int] = defaultdict(int)
        self.fail_next: dict[TopicPartition, deque[int]] = defaultdict(deque)
        self.check_sequences = True
        self.producer_states: dict[tuple[TopicPartition, int], _ProducerState] = {}
        self.next_producer_id = 1000
        self.down: set[int] = set()  # node ids refusing connections
        self.hold = False  # keep responses back while True
        self.requests: list[tuple[int, str, int, Any]] = []  # (node, api, version, body)
        self.lose_responses = 0  # drop this many produce responses (after appending)

    # ------------------------------------------------------------------ topology
    def create_topic(self, name: str, partitions: int, leader: int | None = None) -> None:
        self.leaders[name] = [(i if leader is None else leader) % len(self.nodes)
                              for i in range(partitions)]

    def node_at(self, host: str, port: int) -> int | None:
        for node_id, address in self.nodes.items():
            if address == (host, port):
                return node_id
        return None

    def records(self, tp: TopicPartition) -> list[Record]:
        out: list[Record] = []
        for batch in self.batches[tp]:
            out.extend(batch.records)
        return out

    def values(self, tp: TopicPartition) -> list[bytes | None]:
        return [r.value for r in self.records(tp)]

    def produce_requests(self) -> list[tuple[int, int, Any]]:
        return [(n, v, b) for n, api, v, b in self.requests if api == "Produce"]

    # ------------------------------------------------------------------ handlers
    def handle(self, node_id: int, api_key: int, version: int, body: Any) -> Any:
        name = API[api_key].name
        self.requests.append((node_id, name, version, body))
        handler = getattr(self, f"_handle_{name}")
        return handler(node_id, version, body)

    def _handle_ApiVersions(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.API_VERSIONS].response.cls
        return cls(error_code=0, throttle_time_ms=0, api_keys=[
            cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.versions.items())])

    def _handle_Metadata(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.METADATA].response.cls
        brokers = [cls.MetadataResponseBroker(node_id=n, host=h, port=p)
                   for n, (h, p) in self.nodes.items()]
        names = sorted(self.leaders) if body.topics is None else [t.name for t in body.topics]
        topics = []
        for name in names:
            if name not in self.leaders and body.allow_auto_topic_creation and \
                    self.auto_create_partitions:
                self.create_topic(name, self.auto_create_partitions)
                # like Kafka: the first answer after creation has no leaders yet
                topics.append(cls.MetadataResponseTopic(error_code=5, name=name))
                continue
            if name not in self.leaders:
                topics.append(cls.MetadataResponseTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION,
                                                        name=name))
                continue
            parts = [cls.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=i, leader_id=leader, leader_epoch=0,
                replica_nodes=[leader], isr_nodes=[leader])
                for i, leader in enumerate(self.leaders[name])]
            topics.append(cls.MetadataResponseTopic(error_code=0, name=name, partitions=parts))
        return cls(brokers=brokers, cluster_id="fake", controller_id=0, topics=topics)

    def _handle_InitProducerId(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.INIT_PRODUCER_ID].response.cls
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return cls(error_code=0, producer_id=producer_id, producer_epoch=0)

    def _handle_Produce(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.PRODUCE].response.cls
        responses = []
        for topic in body.topic_data:
            parts = []
            for pd in topic.partition_data:
                tp = TopicPartition(topic.name, pd.index)
                error, base = self._append(node_id, tp, pd.records)
                parts.append(cls.TopicProduceResponse.PartitionProduceResponse(
                    index=pd.index, error_code=error, base_offset=base,
                    log_append_time_ms=-1, log_start_offset=0))
            responses.append(cls.TopicProduceResponse(name=topic.name,
                                                      partition_responses=parts))
        if body.acks == 0:
            return None
        if self.lose_responses:
            self.lose_responses -= 1
            return _LOST
        return cls(responses=responses, throttle_time_ms=0)

    def _append(self, node_id: int, tp: TopicPartition, records: bytes) -> tuple[int, int]:
        leaders = self.leaders.get(tp.topic)
        if leaders is None or tp.partition >= len(leaders):
            return UNKNOWN_TOPIC_OR_PARTITION, -1
        if leaders[tp.partition] != node_id:
            return 6, -1  # NOT_LEADER_OR_FOLLOWER
        if self.fail_next[tp]:
            return self.fail_next[tp].popleft(), -1
        batch = RecordBatch(records)
        batch.validate()
        h = batch.header
        if h.producer_id >= 0 and self.check_sequences:
            verdict = self._check_sequence(tp, h)
            if verdict is not None:
                return verdict
        base = self.next_offset[tp]
        self.next_offset[tp] = base + h.records_count
        buf = bytearray(records)
        set_base_offset(buf, 0, base)
        stored = RecordBatch(bytes(buf))
        self.batches[tp].append(StoredBatch(base, h, stored.record_list()))
        if h.producer_id >= 0:
            state = self.producer_states[(tp, h.producer_id)]
            last = h.base_sequence + h.records_count - 1
            state.last_sequence = last
            state.batches.append((h.base_sequence, last, base))
        return 0, base

    def _check_sequence(self, tp: TopicPartition, h: Any) -> tuple[int, int] | None:
        key = (tp, h.producer_id)
        state = self.producer_states.get(key)
        last = h.base_sequence + h.records_count - 1
        if state is None or h.producer_epoch > state.epoch:
            if state is not None and h.base_sequence != 0:
                return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
            self.producer_states[key] = _ProducerState(h.producer_epoch)
            return None
        if h.producer_epoch < state.epoch:
            return INVALID_PRODUCER_EPOCH, -1
        for first, last_seq, offset in state.batches:
            if (first, last_seq) == (h.base_sequence, last):
                return 0, offset  # a duplicate: its original offset, nothing appended
        if h.base_sequence != state.last_sequence + 1:
            return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        return None


_LOST = object()


class FakeSelector:
    """The ``Selector`` interface over a ``FakeCluster``."""

    def __init__(self, cluster: FakeCluster, blocking: bool = False) -> None:
        self.cluster = cluster
        self.blocking = blocking
        self._channels: dict[int, tuple[int, ServerConnection]] = {}  # node -> (broker, conn)
        self._pending_connect: dict[int, bool] = {}  # node -> succeeds?
        self._responses: list[tuple[int, bytes]] = []
        self._held: list[tuple[int, bytes]] = []
        self._cond = threading.Condition()
        self._woken = False
        self.connects: list[tuple[int, int]] = []  # (node, attempt counter)
        self.completed_sends: list[Any] = []
        self.completed_receives: list[tuple[int, bytes]] = []
        self.connected: list[int] = []
        self.disconnected: dict[int, str] = {}
        self._disconnects: dict[int, str] = {}
        self.closed = False

    def connect(self, node_id: int, host: str, port: int) -> None:
        broker = self.cluster.node_at(host, port)
        if broker is None:
            raise OSError(f"cannot resolve {host}:{port}")
        self.connects.append((node_id, len(self.connects)))
        with self._cond:
            self._pending_connect[node_id] = broker not in self.cluster.down
            if broker not in self.cluster.down:
                versions = dict(self.cluster.versions)
                self._channels[node_id] = (broker, ServerConnection(versions))
            self._cond.notify_all()

    def is_connected(self, node_id: int) -> bool:
        return node_id in self._channels and node_id not in self._pending_connect

    def has_channel(self, node_id: int) -> bool:
        return node_id in self._channels

    def close(self, node_id: int) -> None:
        with self._cond:
            self._channels.pop(node_id, None)
            self._pending_connect.pop(node_id, None)
            self._responses = [(n, d) for n, d in self._responses if n != node_id]
            self._held = [(n, d) for n, d in self._held if n != node_id]

    def drop_connection(self, node_id: int, reason: str = "connection reset") -> None:
        """The peer closes the connection (reported at the next poll)."""
        self.close(node_id)
        with self._cond:
            self._disconnects[node_id] = reason
            self._cond.notify_all()

    def send(self, node_id: int, data: bytes, token: Any) -> bool:
        broker, conn = self._channels[node_id]
        conn.receive_data(data)
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                break
            if isinstance(event, ApiVersionsFallback):
                high = self.cluster.versions[ApiKey.API_VERSIONS][1]
                self._deliver(node_id, api_versions_fallback_response(
                    event.header.correlation_id, high), held=False)
                continue
            body = self.cluster.handle(broker, event.api.key, event.version, event.body)
            if body is _LOST:
                continue
            if body is not None:
                self._deliver(node_id, ServerConnection.encode_response(event, body),
                              held=event.api.key == ApiKey.PRODUCE)
        return True

    def _deliver(self, node_id: int, data: bytes, held: bool) -> None:
        with self._cond:
            if held and self.cluster.hold:
                self._held.append((node_id, data))
            else:
                self._responses.append((node_id, data))
            self._cond.notify_all()

    def release(self, count: int | None = None) -> int:
        """Deliver held responses (all, or the first ``count``), in order."""
        with self._cond:
            n = len(self._held) if count is None else min(count, len(self._held))
            self._responses.extend(self._held[:n])
            del self._held[:n]
            self._cond.notify_all()
            return n

    @property
    def held(self) -> int:
        return len(self._held)

    def wakeup(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def _has_events(self) -> bool:
        return bool(self._pending_connect or self._responses or self._disconnects
                    or self._woken)

    def poll(self, timeout_ms: float) -> None:
        with self._cond:
            if self.blocking and not self._has_events() and timeout_ms > 0:
                self._cond.wait(min(timeout_ms, 50) / 1000.0)
            self._woken = False
            self.completed_sends = []
            self.connected = [n for n, ok in self._pending_connect.items() if ok]
            self.disconnected = {n: "connection refused"
                                 for n, ok in self._pending_connect.items() if not ok}
            self.disconnected.update(self._disconnects)
            self._disconnects = {}
            self._pending_connect = {}
            self.completed_receives = self._responses
            self._responses = []

    def close_all(self) -> None:
        self.closed = True
        for node_id in list(self._channels):
            self.close(node_id)


# ---------------------------------------------------------------------- producer harness
def make_producer(cluster: FakeCluster, config: dict[str, Any] | None = None,
                  time: Any = None, **kwargs: Any) -> tuple[Any, FakeSelector, Any]:
    """A ``KafkaProducer`` on a ``FakeSelector`` with a ``MockTime`` and no thread:
    the test steps ``producer._sender.run_once()`` itself (see ``step``)."""
    from millrace.client.producer import KafkaProducer
    from millrace.common.time import MockTime

    clock = time or MockTime()
    selector = FakeSelector(cluster)
    settings = {"bootstrap.servers": "fake:9092", **(config or {})}
    producer = KafkaProducer(settings, time=clock, _selector=selector, _start_thread=False,
                             **kwargs)
    return producer, selector, clock


def step(producer: Any, times: int = 1) -> None:
    for _ in range(times):
        producer._sender.run_once()


def warm(producer: Any, topic: str, clock: Any) -> None:
    """Step until ``topic`` is in the producer's metadata (and a producer id is known)."""
    producer._metadata.add(topic, clock.milliseconds())
    for _ in range(50):
        step(producer)
        tm = producer._transaction_manager
        cluster = producer._metadata.fetch()
        if cluster.partition_count(topic) and (tm is None or tm.has_producer_id()):
            client, now = producer._client, clock.milliseconds()
            # connect to every broker now, so tests see sends without connection set-up
            if all([client.ready(node, now) for node in cluster.nodes]):
                return
        clock.sleep(100)
    raise AssertionError(f"topic {topic} never showed up in the metadata")
