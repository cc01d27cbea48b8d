"""ConsumerNetworkClient over a scripted NetworkClient: sends are queued without touching the
network client, written when the node is ready, failed when its connection fails or they
wait too long; futures complete after the lock is released; the heartbeat thread's
non-blocking poll steps aside; wakeup; plus RequestFuture and the Heartbeat timers."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from millrace.client.cluster import Node
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.heartbeat import Heartbeat
from millrace.client.consumer._internals.request_future import RequestFuture
from millrace.client.consumer.errors import DisconnectError, WakeupError
from millrace.client.errors import IllegalStateError
from millrace.client.metadata import Metadata
from millrace.client.network_client import ClientRequest, ClientResponse
from millrace.common.errors import NotCoordinatorError
from millrace.common.time import MockTime
from millrace.protocol import HeartbeatRequest, HeartbeatResponse

NODE = Node(0, "h", 1)


class ScriptedNetworkClient:
    """Answers every request written to it on the next poll."""

    def __init__(self, time: MockTime) -> None:
        self.time = time
        self.ready_nodes: set[int] = {0}
        self.failed_nodes: set[int] = set()
        self.written: list[ClientRequest] = []
        self.in_flight: list[ClientRequest] = []
        self.wakeups = 0
        self.poll_hook: Any = None

    def ready(self, node: Node, now_ms: int) -> bool:
        return node.id in self.ready_nodes

    def send(self, request: ClientRequest, now_ms: int) -> None:
        self.written.append(request)
        self.in_flight.append(request)

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        if self.poll_hook is not None:
            self.poll_hook()
        done, self.in_flight = self.in_flight, []
        out = []
        for request in done:
            response = ClientResponse(request, now_ms, HeartbeatResponse(error_code=0))
            response.on_complete()
            out.append(response)
        if not done:
            self.time.sleep(timeout_ms)
        return out

    def connection_failed(self, node: Node) -> bool:
        return node.id in self.failed_nodes

    def is_blacked_out(self, node: Node, now_ms: int) -> bool:
        return node.id in self.failed_nodes

    def authentication_error(self, node_id: int) -> Exception | None:
        return None

    def wakeup(self) -> None:
        self.wakeups += 1

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return bool(self.in_flight)

    def close(self) -> None:
        pass


def make() -> tuple[ConsumerNetworkClient, ScriptedNetworkClient, MockTime]:
    time = MockTime()
    network = ScriptedNetworkClient(time)
    client = ConsumerNetworkClient(network, Metadata(), time,  # type: ignore[arg-type]
                                   request_timeout_ms=1000)
    return client, network, time


def body() -> Any:
    return HeartbeatRequest(group_id="g", generation_id=1, member_id="m")


def test_send_queues_and_wakes_without_touching_the_client() -> None:
    client, network, _ = make()
    future = client.send(NODE, body())
    assert network.written == [] and network.wakeups == 1
    assert client.has_pending_requests(0)
    assert client.poll_until(future, 100)
    assert future.succeeded() and future.value.body.error_code == 0
    assert len(network.written) == 1


def test_unsent_requests_fail_when_the_connection_fails_or_they_wait_too_long() -> None:
    client, network, time = make()
    network.ready_nodes.clear()
    waiting = client.send(NODE, body())
    client.poll(0)
    assert not waiting.is_done
    time.sleep(1001)
    client.poll(0)
    assert isinstance(waiting.exception, DisconnectError) and "timed out" in str(
        waiting.exception)
    refused = client.send(NODE, body())
    network.failed_nodes.add(0)
    client.poll(0)
    assert isinstance(refused.exception, DisconnectError)
    assert refused.is_retriable()
    assert client.is_unavailable(NODE)


def test_listeners_run_after_the_lock_is_released() -> None:
    client, _, _ = make()
    held_elsewhere: list[bool] = []

    def probe(_: Any) -> None:
        # another thread must be able to take the network lock from inside a listener
        t = threading.Thread(target=lambda: held_elsewhere.append(client._lock.acquire(
            timeout=1) and (client._lock.release() or True)))
        t.start()
        t.join()
    client.send(NODE, body()).add_listener(probe)
    client.poll(0)
    assert held_elsewhere == [True]


def test_non_blocking_poll_steps_aside_for_a_polling_thread() -> None:
    client, network, _ = make()
    entered, leave = threading.Event(), threading.Event()

    def slow() -> None:
        entered.set()
        leave.wait(5)
    network.poll_hook = slow
    t = threading.Thread(target=lambda: client.poll(0))
    t.start()
    entered.wait(5)
    network.poll_hook = None
    assert client.poll_no_wakeup(blocking=False) is False
    leave.set()
    t.join()
    assert client.poll_no_wakeup(blocking=False) is True


def test_wakeup_interrupts_the_next_poll_once() -> None:
    client, _, _ = make()
    client.wakeup()
    with pytest.raises(WakeupError):
        client.poll(0)
    client.poll(0)
    client.wakeup()
    client.disable_wakeups()
    client.poll(0)


def test_request_future() -> None:
    f: RequestFuture[int] = RequestFuture()
    seen: list[Any] = []
    f.add_listener(seen.append, seen.append)
    doubled = f.compose(lambda v, out: out.complete(v * 2))
    f.complete(21)
    assert seen == [21] and doubled.value == 42
    with pytest.raises(IllegalStateError):
        f.complete(1)
    failed = RequestFuture.failure(NotCoordinatorError("moved"))
    assert failed.is_retriable()
    chained: RequestFuture[Any] = RequestFuture()
    failed.chain(chained)
    assert isinstance(chained.exception, NotCoordinatorError)
    with pytest.raises(IllegalStateError):
        _ = chained.value


def test_heartbeat_timers() -> None:
    hb = Heartbeat(session_timeout_ms=10_000, heartbeat_interval_ms=3000,
                   max_poll_interval_ms=60_000, retry_backoff_ms=100, now_ms=0)
    assert not hb.should_heartbeat(2999) and hb.should_heartbeat(3000)
    hb.sent_heartbeat(3000)
    assert hb.time_to_next_heartbeat(3000) == 3000
    hb.fail_heartbeat(3500)
    assert hb.should_heartbeat(3600)
    assert not hb.session_timeout_expired(9999) and hb.session_timeout_expired(10_000)
    hb.receive_heartbeat(9000)
    assert not hb.session_timeout_expired(18_999)
    hb.poll(50_000)
    assert not hb.poll_timeout_expired(109_999) and hb.poll_timeout_expired(110_000)
    assert hb.poll_time_remaining(100_000) == 10_000
