"""NetworkClient over a fake selector: negotiation, in-flight limits, timeouts, backoff."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from millrace.client._connection_states import ClusterConnectionStates
from millrace.client._in_flight_requests import InFlightRequests
from millrace.client.cluster import Node
from millrace.client.errors import IllegalStateError
from millrace.client.metadata import Metadata
from millrace.client.network_client import ClientRequest, ClientResponse, NetworkClient
from millrace.common.time import MockTime
from millrace.protocol import API, ApiKey
from tests.unit.client.fakes import FakeCluster, FakeSelector

N0 = Node(0, "fake", 9092)
N1 = Node(1, "fake", 9093)
METADATA = API[ApiKey.METADATA].request.cls
PRODUCE = API[ApiKey.PRODUCE].request.cls


def client_for(cluster: FakeCluster, **kw: Any) -> tuple[NetworkClient, FakeSelector, MockTime]:
    clock = MockTime()
    selector = FakeSelector(cluster)
    metadata = Metadata(metadata_max_age_ms=kw.pop("metadata_max_age_ms", 300_000))
    metadata.bootstrap([("fake", 9092)])
    client = NetworkClient(metadata, selector=selector, time=clock, rng=random.Random(3),
                           **kw)
    return client, selector, clock


def connect(client: NetworkClient, node: Node, clock: MockTime) -> None:
    for _ in range(10):
        if client.ready(node, clock.milliseconds()):
            return
        client.poll(0, clock.milliseconds())
    raise AssertionError("never ready")


def metadata_request(node: Node, callback: Any = None, **kw: Any) -> ClientRequest:
    return ClientRequest(node.id, METADATA(topics=[]), callback, **kw)


def test_connect_negotiates_api_versions_first() -> None:
    cluster = FakeCluster(nodes=1)
    cluster.versions[ApiKey.METADATA] = (0, 7)
    client, _, clock = client_for(cluster)
    assert not client.ready(N0, clock.milliseconds())  # starts connecting
    client.poll(0, clock.milliseconds())  # connected -> ApiVersions sent
    # (the metadata updater connects to the bootstrap address too: node -1)
    assert {r[1] for r in cluster.requests} == {"ApiVersions"}
    assert cluster.requests[0][2] == API[ApiKey.API_VERSIONS].versions.high
    connect(client, N0, clock)
    got: list[ClientResponse] = []
    client.send(metadata_request(N0, got.append), clock.milliseconds())
    responses = client.poll(0, clock.milliseconds())
    assert responses == got and got[0].request.version == 7  # min(ours, the broker's max)
    assert cluster.requests[-1][1:3] == ("Metadata", 7)
    assert client.api_versions(0)[ApiKey.METADATA] == (0, 7)


def test_unsupported_api_versions_version_falls_back_to_the_brokers_max() -> None:
    cluster = FakeCluster(nodes=1)
    cluster.versions[ApiKey.API_VERSIONS] = (0, 2)  # an older broker
    client, _, clock = client_for(cluster)
    connect(client, N0, clock)
    versions = [v for _, api, v, _ in cluster.requests if api == "ApiVersions"]
    # the v4 request was answered v0-style (UNSUPPORTED_VERSION), then v2 was used
    assert set(versions) == {2}
    assert client.api_versions(0)[ApiKey.API_VERSIONS] == (0, 2)


def test_no_common_version_is_reported_not_sent() -> None:
    cluster = FakeCluster(nodes=1)
    cluster.versions[ApiKey.PRODUCE] = (3, 8)
    client, _, clock = client_for(cluster)
    connect(client, N0, clock)
    request = ClientRequest(0, PRODUCE(acks=1, timeout_ms=10), min_version=9)
    client.send(request, clock.milliseconds())
    (response,) = client.poll(0, clock.milliseconds())
    assert response.version_mismatch is not None and "3-8" in str(response.version_mismatch)
    assert all(api != "Produce" for _, api, _, _ in cluster.requests)


def test_sending_to_a_node_that_is_not_ready_is_refused() -> None:
    client, _, clock = client_for(FakeCluster(nodes=1))
    with pytest.raises(IllegalStateError):
        client.send(metadata_request(N0), clock.milliseconds())


def test_in_flight_limit_per_connection() -> None:
    cluster = FakeCluster(nodes=1)
    client, selector, clock = client_for(cluster, max_in_flight_requests_per_connection=2)
    connect(client, N0, clock)
    cluster.hold = True
    produce = PRODUCE(acks=1, timeout_ms=10, topic_data=[])
    for _ in range(2):
        assert client.ready(N0, clock.milliseconds())
        client.send(ClientRequest(0, produce), clock.milliseconds())
    assert not client.ready(N0, clock.milliseconds())
    assert client.in_flight_request_count(0) == 2 and client.in_flight_request_count() == 2
    selector.release(1)
    client.poll(0, clock.milliseconds())
    assert client.ready(N0, clock.milliseconds())


def test_request_timeout_disconnects_and_fails_what_was_in_flight() -> None:
    cluster = FakeCluster(nodes=1)
    client, _, clock = client_for(cluster, request_timeout_ms=1000)
    connect(client, N0, clock)
    cluster.hold = True
    produce = PRODUCE(acks=1, timeout_ms=10, topic_data=[])
    client.send(ClientRequest(0, produce, request_timeout_ms=1000), clock.milliseconds())
    clock.sleep(1000)
    assert client.poll(0, clock.milliseconds()) == []
    clock.sleep(1)
    (response,) = client.poll(0, clock.milliseconds())
    assert response.disconnected and response.timed_out
    assert not client.ready(N0, clock.milliseconds())
    assert client.in_flight_request_count() == 0


def test_a_disconnect_fails_in_flight_requests_and_asks_for_metadata() -> None:
    cluster = FakeCluster(nodes=1)
    client, selector, clock = client_for(cluster)
    connect(client, N0, clock)
    cluster.hold = True
    client.send(ClientRequest(0, PRODUCE(acks=1, timeout_ms=10, topic_data=[])),
                clock.milliseconds())
    client._metadata._need_update = False
    selector.drop_connection(0)
    (response,) = client.poll(0, clock.milliseconds())
    assert response.disconnected and not response.timed_out
    assert client._metadata.update_requested()


def test_reconnect_backoff_doubles_up_to_the_maximum() -> None:
    cluster = FakeCluster(nodes=1)
    cluster.down.add(0)
    client, selector, clock = client_for(cluster, reconnect_backoff_ms=50,
                                         reconnect_backoff_max_ms=400)
    attempts: list[int] = []
    for _ in range(3000):
        now = clock.milliseconds()
        before = len(selector.connects)
        client.ready(N0, now)
        if len(selector.connects) > before:
            attempts.append(now)
        client.poll(0, now)
        clock.sleep(1)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    for expected, gap in zip([50, 100, 200, 400, 400, 400], gaps):
        assert expected * 0.8 <= gap <= expected * 1.2 + 1, gaps
    assert client.connection_failed(N0)
    assert client.connection_delay(N0, clock.milliseconds()) <= 480


def test_least_loaded_node_prefers_idle_ready_nodes() -> None:
    cluster = FakeCluster(nodes=2)
    client, _, clock = client_for(cluster)
    client._metadata.update(_metadata_response(cluster), 0, clock.milliseconds())
    connect(client, N0, clock)
    connect(client, N1, clock)
    cluster.hold = True
    client.send(ClientRequest(0, PRODUCE(acks=1, timeout_ms=10, topic_data=[])),
                clock.milliseconds())
    assert client.least_loaded_node(clock.milliseconds()) == N1
    cluster.down.add(1)
    client.disconnect(1)
    assert client.least_loaded_node(clock.milliseconds()) == N0


def test_metadata_is_refreshed_when_it_gets_old() -> None:
    cluster = FakeCluster(nodes=1, topics={"t": 2})
    client, _, clock = client_for(cluster, metadata_max_age_ms=5000)
    for _ in range(6):
        client.poll(0, clock.milliseconds())
    assert client._metadata.fetch().nodes == [N0]
    count = sum(1 for r in cluster.requests if r[1] == "Metadata")
    assert count == 1
    clock.sleep(4999)
    client.poll(0, clock.milliseconds())
    assert sum(1 for r in cluster.requests if r[1] == "Metadata") == 1
    clock.sleep(1)
    for _ in range(4):  # (to node 0 now: connect, ApiVersions, then the request)
        client.poll(0, clock.milliseconds())
    assert sum(1 for r in cluster.requests if r[1] == "Metadata") == 2


def test_a_metadata_response_without_brokers_is_ignored_and_asked_again() -> None:
    # A broker that listens before the controller's first UpdateMetadata reached it
    # answers Metadata with no brokers; the client must keep its bootstrap node (or it
    # has nobody left to ask) and ask again after the backoff, as Java's client does.
    cluster = FakeCluster(nodes=1, topics={"t": 2})
    client, _, clock = client_for(cluster)
    answer = cluster._handle_Metadata
    answered: list[Any] = []

    def no_brokers_first(node_id: int, version: int, body: Any) -> Any:
        response = answer(node_id, version, body)
        if not answered:
            response.brokers = []
        answered.append(response)
        return response

    cluster._handle_Metadata = no_brokers_first  # type: ignore[method-assign]
    for _ in range(6):
        client.poll(0, clock.milliseconds())
    assert len(answered) == 1
    cluster_now = client._metadata.fetch()
    assert cluster_now.is_bootstrap and len(cluster_now.nodes) == 1  # still someone to ask
    assert client.least_loaded_node(clock.milliseconds()) is not None
    clock.sleep(1000)  # past the refresh backoff
    for _ in range(6):
        client.poll(0, clock.milliseconds())
    assert len(answered) == 2
    assert client._metadata.fetch().nodes == [N0]


def test_a_response_that_does_not_decode_closes_the_connection() -> None:
    cluster = FakeCluster(nodes=1)
    client, selector, clock = client_for(cluster)
    connect(client, N0, clock)
    cluster.hold = True
    client.send(ClientRequest(0, PRODUCE(acks=1, timeout_ms=10, topic_data=[])),
                clock.milliseconds())
    selector._responses.append((0, b"\x00\x00\x00\x04\x00\x00\x03\xe7"))  # wrong id
    (response,) = client.poll(0, clock.milliseconds())
    assert response.disconnected


def test_callbacks_that_raise_do_not_break_the_client(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster(nodes=1)
    client, _, clock = client_for(cluster)
    connect(client, N0, clock)

    def boom(response: ClientResponse) -> None:
        raise RuntimeError("callback bug")

    client.send(metadata_request(N0, boom), clock.milliseconds())
    assert len(client.poll(0, clock.milliseconds())) == 1
    assert "callback bug" in caplog.text


def test_acks_zero_requests_complete_once_written() -> None:
    cluster = FakeCluster(nodes=1, topics={"t": 1})
    client, _, clock = client_for(cluster)
    connect(client, N0, clock)
    request = ClientRequest(0, PRODUCE(acks=0, timeout_ms=10, topic_data=[]),
                            expect_response=False)
    client.send(request, clock.milliseconds())
    (response,) = client.poll(0, clock.milliseconds())
    assert response.body is None and not response.disconnected
    assert client.in_flight_request_count() == 0


def test_close_is_idempotent_and_final() -> None:
    client, selector, clock = client_for(FakeCluster(nodes=1))
    client.close()
    client.close()
    assert selector.closed
    with pytest.raises(IllegalStateError):
        client.poll(0, clock.milliseconds())


def test_in_flight_requests_bookkeeping() -> None:
    requests = InFlightRequests(2)
    a = ClientRequest(0, METADATA(topics=[]))
    b = ClientRequest(0, METADATA(topics=[]))
    requests.add(a)
    assert requests.can_send_more(0)
    requests.add(b)
    assert not requests.can_send_more(0) and requests.count() == 2
    a.send_ms, b.send_ms = 0, 500
    a.request_timeout_ms = b.request_timeout_ms = 1000
    assert requests.nodes_with_timed_out_requests(1000) == []
    assert requests.nodes_with_timed_out_requests(1001) == [0]
    assert requests.complete_next(0) is a
    assert requests.clear_all(0) == [b] and requests.is_empty()


def test_connection_setup_timeout() -> None:
    states = ClusterConnectionStates(50, 1000, 100, 400, random.Random(1))
    states.connecting(0, 0, "h", 1, None)  # type: ignore[arg-type]
    assert states.nodes_with_setup_timeout(100) == []
    assert states.nodes_with_setup_timeout(121) == [0]


def _metadata_response(cluster: FakeCluster) -> Any:
    return cluster._handle_Metadata(0, 12, METADATA(topics=None))
