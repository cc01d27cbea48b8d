"""Fakes for the consumer unit tests: no sockets, an injected clock.

``SimBroker`` answers requests the way one broker would: group requests go to the
broker's own pure ``GroupCoordinator`` (the same state machine the real broker runs, so
rebalances are real), everything else to handlers a test installs.  ``FakeNetworkClient``
stands in for ``ConsumerNetworkClient``: ``send`` queues, ``poll`` hands each request to the
broker and completes the futures whose answers are ready; a poll that delivers nothing lets
the ``MockTime`` run for its timeout, so backoffs and timeouts elapse instantly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from millrace.broker.group import GroupConfig, GroupCoordinator
from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer._internals.consumer_metadata import ConsumerMetadata
from millrace.client.consumer._internals.request_future import RequestFuture, Timer
from millrace.client.consumer._internals.subscription_state import (
    OffsetResetStrategy,
    SubscriptionState,
)
from millrace.client.network_client import ClientRequest, ClientResponse
from millrace.common.time import MockTime
from millrace.protocol import API, FindCoordinatorResponse, MetadataResponse
from millrace.protocol.api import REQUEST_CLASS_TO_API
from millrace.record import RecordBatchBuilder

BROKER = Node(0, "sim", 9092)
GROUP_CONFIG = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=600_000,
                           initial_rebalance_delay_ms=0)

Handler = Callable[[Any, int], Any]


class _Parked:
    def __init__(self, token: int) -> None:
        self.token = token


class SimBroker:
    def __init__(self, time: MockTime) -> None:
        self.time = time
        self.coord = GroupCoordinator(GROUP_CONFIG, 1)
        self.coord.load(0, [], time.milliseconds())
        self.answers: dict[int, Any] = {}
        self.handlers: dict[str, Handler] = {}
        self.requests: list[tuple[str, Any]] = []  # (client id, body) in arrival order

    def handle(self, client_id: str, body: Any, version: int) -> Any:
        self.requests.append((client_id, body))
        name = type(body).__name__
        if name in self.handlers:
            return self.handlers[name](body, version)
        now = self.time.milliseconds()
        c = self.coord
        if name == "FindCoordinatorRequest":
            if version >= 4:
                entry = FindCoordinatorResponse.Coordinator(
                    key=body.coordinator_keys[0], node_id=BROKER.id, host=BROKER.host,
                    port=BROKER.port, error_code=0)
                return FindCoordinatorResponse(coordinators=[entry])
            return FindCoordinatorResponse(error_code=0, node_id=BROKER.id, host=BROKER.host,
                                           port=BROKER.port)
        if name == "JoinGroupRequest":
            result = c.join_group(body, version, client_id, "/127.0.0.1", now)
        elif name == "SyncGroupRequest":
            result = c.sync_group(body, version, now)
        elif name == "HeartbeatRequest":
            result = c.heartbeat(body, version, now)
        elif name == "LeaveGroupRequest":
            result = c.leave_group(body, version, now)
        elif name == "OffsetCommitRequest":
            result = c.commit_offsets(body, version, now, frozenset())
        elif name == "OffsetFetchRequest":
            result = c.fetch_offsets(body, version, now)
        else:
            raise AssertionError(f"no handler for {name}")
        return self._step(result)

    def _step(self, result: Any) -> Any:
        for rec in result.records:
            self.coord.replay(rec.key, rec.value)
        for token, response in self.coord.take_completions():
            self.answers[token] = response
        if result.response is not None:
            return result.response
        assert result.waiter is not None
        if result.waiter in self.answers:
            return self.answers.pop(result.waiter)
        return _Parked(result.waiter)

    def tick(self) -> None:
        self._step_timers()

    def _step_timers(self) -> None:
        result = self.coord.poll(self.time.milliseconds())
        for rec in result.records:
            self.coord.replay(rec.key, rec.value)
        for token, response in self.coord.take_completions():
            self.answers[token] = response

    def sent(self, name: str, client_id: str | None = None) -> list[Any]:
        return [b for c, b in self.requests if type(b).__name__ == name
                and (client_id is None or c == client_id)]


class FakeNetworkClient:
    """The parts of ``ConsumerNetworkClient`` the coordinator and fetchers use."""

    def __init__(self, broker: SimBroker, time: MockTime, client_id: str = "client",
                 metadata: ConsumerMetadata | None = None) -> None:
        self.broker = broker
        self.time = time
        self.client_id = client_id
        self.metadata = metadata
        self.retry_backoff_ms = 100
        self.request_timeout_ms = 30_000
        self._queue: list[tuple[ClientRequest, RequestFuture[ClientResponse], Any]] = []
        self.unavailable: set[int] = set()
        self.disconnected: list[int] = []
        self.drop_next: set[str] = set()  # request names whose next send fails (disconnect)

    def send(self, node: Node, body: Any, *, timeout_ms: int | None = None,
             min_version: int | None = None, max_version: int | None = None
             ) -> RequestFuture[ClientResponse]:
        api = REQUEST_CLASS_TO_API[type(body)]
        request = ClientRequest(node.id, body, created_ms=self.time.milliseconds(),
                                min_version=min_version, max_version=max_version)
        request.send_ms = self.time.milliseconds()  # written at once: latency = answer - now
        request.version = min(api.versions.high, max_version if max_version is not None
                              else api.versions.high)
        future: RequestFuture[ClientResponse] = RequestFuture()
        self._queue.append((request, future, None))
        return future

    def poll(self, timeout_ms: float, condition: Callable[[], bool] | None = None, *,
             disable_wakeup: bool = False, blocking: bool = True) -> bool:
        self.broker.tick()
        queue, self._queue = self._queue, []
        delivered = False
        for request, future, state in queue:
            name = type(request.body).__name__
            if name in self.drop_next:
                self.drop_next.discard(name)
                from millrace.client.consumer.errors import DisconnectError
                future.raise_(DisconnectError(f"{name} dropped"))
                delivered = True
                continue
            if state is None:
                state = self.broker.handle(self.client_id, request.body, request.version)
            if isinstance(state, _Parked):
                answer = self.broker.answers.pop(state.token, None)
                if answer is None:
                    self._queue.append((request, future, state))
                    continue
                state = answer
            future.complete(ClientResponse(request, self.time.milliseconds(), state))
            delivered = True
        if not delivered and timeout_ms > 0 and (condition is None or condition()):
            self.time.sleep(timeout_ms)
        return True

    def poll_until(self, future: RequestFuture[Any], timeout_ms: float) -> bool:
        timer = Timer(self.time, timeout_ms)
        while True:
            self.poll(min(timer.remaining_ms, 100), lambda: not future.is_done)
            timer.update()
            if future.is_done or timer.is_expired():
                return future.is_done

    def poll_no_wakeup(self, blocking: bool = False) -> bool:
        return self.poll(0)

    def transmit_sends(self) -> None:
        self.poll(0)

    def sleep(self, ms: float) -> None:
        self.time.sleep(ms)

    def least_loaded_node(self) -> Node | None:
        return BROKER

    def is_unavailable(self, node: Node) -> bool:
        return node.id in self.unavailable

    def has_pending_requests(self, node_id: int | None = None) -> bool:
        return bool(self._queue)

    def disconnect(self, node_id: int) -> None:
        self.disconnected.append(node_id)

    def await_metadata_update(self, timeout_ms: float) -> bool:
        """A refresh that answers after the refresh backoff (the cluster is unchanged)."""
        self.time.sleep(min(self.retry_backoff_ms, timeout_ms))
        return True

    def maybe_trigger_wakeup(self) -> None:
        pass

    def wakeup(self) -> None:
        pass

    def disable_wakeups(self) -> None:
        pass

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------- metadata
BROKER1 = Node(1, "sim1", 9093)


def metadata_response(topics: dict[str, int], leaders: dict[TopicPartition, int] | None = None,
                      error_topics: dict[str, int] | None = None,
                      epochs: dict[TopicPartition, int] | None = None) -> Any:
    """Brokers 0 and 1; every partition led by broker 0 in epoch 0 unless ``leaders`` and
    ``epochs`` say otherwise."""
    topic_cls = MetadataResponse.MetadataResponseTopic
    partition_cls = topic_cls.MetadataResponsePartition
    out = []
    for name, count in topics.items():
        parts = []
        for p in range(count):
            leader = (leaders or {}).get(TopicPartition(name, p), BROKER.id)
            parts.append(partition_cls(error_code=0, partition_index=p, leader_id=leader,
                                       leader_epoch=(epochs or {}).get(
                                           TopicPartition(name, p), 0),
                                       replica_nodes=[leader],
                                       isr_nodes=[leader], offline_replicas=[]))
        out.append(topic_cls(name=name, error_code=0, is_internal=False, partitions=parts))
    for name, code in (error_topics or {}).items():
        out.append(topic_cls(name=name, error_code=code, partitions=[]))
    broker_cls = MetadataResponse.MetadataResponseBroker
    return MetadataResponse(
        brokers=[broker_cls(node_id=n.id, host=n.host, port=n.port, rack=None)
                 for n in (BROKER, BROKER1)],
        cluster_id="sim", controller_id=BROKER.id, topics=out)


def consumer_metadata(subscriptions: SubscriptionState, topics: dict[str, int],
                      time: MockTime, leaders: dict[TopicPartition, int] | None = None
                      ) -> ConsumerMetadata:
    metadata = ConsumerMetadata(subscriptions)
    metadata.update(metadata_response(topics, leaders), metadata.request_version(),
                    time.milliseconds())
    return metadata


def subscriptions(reset: str = "earliest") -> SubscriptionState:
    return SubscriptionState(OffsetResetStrategy.of(reset))


# ---------------------------------------------------------------------- records
def batch(base_offset: int, values: list[bytes], *, timestamp: int = 1000,
          producer_id: int = -1, transactional: bool = False,
          keys: list[bytes | None] | None = None) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, producer_id=producer_id,
                                 producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1,
                                 is_transactional=transactional)
    for i, value in enumerate(values):
        builder.append(timestamp + i, keys[i] if keys else None, value)
    return builder.build()


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def api_version_high(body: Any) -> int:
    return int(API[REQUEST_CLASS_TO_API[type(body)].key].versions.high)
