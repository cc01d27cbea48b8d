"""SASL in the NetworkClient: the client half of Kafka's authenticator over a fake broker.

``SaslCluster`` answers SaslHandshake and SaslAuthenticate with millrace's real PLAIN and
SCRAM servers (``millrace.security.sasl``) and refuses -- fails the test -- any other
request on a connection that has not authenticated.  The client is the real
``NetworkClient`` on a ``FakeSelector`` and a ``MockTime``: no sockets, no sleeps.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, cast

import pytest

from millrace.client._client_security import SaslCredentials
from millrace.client._connection_states import ConnectionState
from millrace.client._selector import Selector
from millrace.client.cluster import Node
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.errors import IllegalStateError, NoBrokerAvailableError, SslAuthenticationError
from millrace.client.metadata import Metadata
from millrace.client.network_client import ClientRequest, ClientResponse, NetworkClient
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.errors import (
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from millrace.common.time import SYSTEM_TIME, MockTime
from millrace.protocol import API, ApiKey
from millrace.security.errors import AuthenticationException, client_error_message
from millrace.security.sasl.plain import PlainSaslServer
from millrace.security.sasl.scram import ScramFormatter, ScramMechanism, ScramSaslServer
from tests.unit.client.fakes import FakeCluster, FakeSelector

N0 = Node(0, "fake", 9092)
METADATA = API[ApiKey.METADATA].request.cls
PRODUCE = API[ApiKey.PRODUCE].request.cls
SETUP = ("ApiVersions", "SaslHandshake", "SaslAuthenticate")
API_VERSIONS_V = API[ApiKey.API_VERSIONS].versions.high
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


class SaslCluster(FakeCluster):
    """A ``FakeCluster`` whose connections must authenticate (Kafka's SASL listener)."""

    def __init__(self, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256",
                                                       "SCRAM-SHA-512"),
                 session_lifetime_ms: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.mechanisms = list(mechanisms)
        self.session_lifetime_ms = session_lifetime_ms
        self.connection = 0  # the client-side node id of the connection being served
        self.servers: dict[int, Any] = {}
        self.authenticated: set[int] = set()
        self.log: list[tuple[int, str, int]] = []  # (connection, api, version)
        self.scram = {m: {user: ScramFormatter(m).generate_credential(pw, 4096)
                          for user, pw in USERS.items()} for m in ScramMechanism}

    def handle(self, node_id: int, api_key: int, version: int, body: Any) -> Any:
        name = API[api_key].name
        self.log.append((self.connection, name, version))
        if name == "ApiVersions":
            self.authenticated.discard(self.connection)  # a new connection
        elif name not in SETUP:
            assert self.connection in self.authenticated, f"{name} before authentication"
        return super().handle(node_id, api_key, version, body)

    def _handle_SaslHandshake(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.SASL_HANDSHAKE].response.cls
        if body.mechanism not in self.mechanisms:
            return cls(error_code=33, mechanisms=self.mechanisms)
        scram = ScramMechanism.from_name(body.mechanism)
        self.servers[self.connection] = (
            PlainSaslServer(USERS.get) if scram is None
            else ScramSaslServer(scram, self.scram[scram].get))
        return cls(error_code=0, mechanisms=self.mechanisms)

    def _handle_SaslAuthenticate(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.SASL_AUTHENTICATE].response.cls
        server = self.servers[self.connection]
        try:
            token = server.evaluate_response(body.auth_bytes)
        except AuthenticationException as e:
            return cls(error_code=58, error_message=client_error_message(e, server.mechanism),
                       auth_bytes=b"")
        lifetime = 0
        if server.is_complete():
            self.authenticated.add(self.connection)
            lifetime = self.session_lifetime_ms
        return cls(error_code=0, error_message=None, auth_bytes=token,
                   session_lifetime_ms=lifetime)

    def setup_log(self, connection: int) -> list[tuple[str, int]]:
        return [(api, v) for c, api, v in self.log if c == connection and api in SETUP]


class SaslSelector(FakeSelector):
    """Tells the cluster which connection each request arrives on; can fail a TLS
    handshake (``handshake_failures``, as ``SslSelector`` reports them)."""

    cluster: SaslCluster

    def __init__(self, cluster: SaslCluster) -> None:
        super().__init__(cluster)
        self.handshake_failures: dict[int, str] = {}
        self._tls_failures: dict[int, str] = {}

    def send(self, node_id: int, data: bytes, token: Any) -> bool:
        self.cluster.connection = node_id
        return super().send(node_id, data, token)

    def fail_tls(self, node_id: int, reason: str) -> None:
        """The next connect of ``node_id`` fails its TLS handshake with ``reason``."""
        self._tls_failures[node_id] = reason

    def connect(self, node_id: int, host: str, port: int) -> None:
        super().connect(node_id, host, port)
        reason = self._tls_failures.pop(node_id, None)
        if reason is not None:
            self._pending_connect.pop(node_id, None)
            self.drop_connection(node_id, reason)
            self.handshake_failures[node_id] = reason

    def poll(self, timeout_ms: float) -> None:
        super().poll(timeout_ms)
        self.handshake_failures = {n: r for n, r in self.handshake_failures.items()
                                   if n in self.disconnected}


def sasl_client(cluster: SaslCluster, mechanism: str = "PLAIN", user: str = "alice",
                password: str | None = None, **kw: Any
                ) -> tuple[NetworkClient, SaslSelector, MockTime, Metadata]:
    clock = MockTime()
    selector = SaslSelector(cluster)
    metadata = Metadata()
    metadata.bootstrap([("fake", 9092)])
    credentials = SaslCredentials(mechanism, user, USERS[user] if password is None else password)
    client = NetworkClient(metadata, selector=cast(Selector, selector), time=clock,
                           rng=random.Random(7), sasl=credentials, **kw)
    return client, selector, clock, metadata


def poll_until_ready(client: NetworkClient, clock: MockTime, node: Node = N0) -> None:
    for _ in range(20):
        if client.ready(node, clock.milliseconds()):
            return
        client.poll(0, clock.milliseconds())
    raise AssertionError(f"node {node.id} never became ready")


def poll_until_failed(client: NetworkClient, clock: MockTime, node: Node = N0) -> Exception:
    for _ in range(20):
        client.ready(node, clock.milliseconds())
        client.poll(0, clock.milliseconds())
        error = client.authentication_error(node.id)
        if error is not None:
            return error
    raise AssertionError(f"node {node.id} never failed authentication")


def state_of(client: NetworkClient, node_id: int) -> ConnectionState:
    return client._states.state(node_id)


# ---------------------------------------------------------------------- success
def test_plain_authenticates_before_any_other_request() -> None:
    cluster = SaslCluster()
    client, _, clock, _ = sasl_client(cluster)
    assert not client.ready(N0, clock.milliseconds())
    client.poll(0, clock.milliseconds())  # connected: ApiVersions goes out
    client.poll(0, clock.milliseconds())  # ApiVersions answered: SaslHandshake goes out
    assert state_of(client, 0) is ConnectionState.AUTHENTICATING
    assert not client.ready(N0, clock.milliseconds())
    with pytest.raises(IllegalStateError):
        client.send(ClientRequest(0, METADATA(topics=[])), clock.milliseconds())
    poll_until_ready(client, clock)
    assert cluster.setup_log(0) == [("ApiVersions", API_VERSIONS_V), ("SaslHandshake", 1),
                                    ("SaslAuthenticate", 2)]
    got: list[ClientResponse] = []
    client.send(ClientRequest(0, METADATA(topics=[]), got.append), clock.milliseconds())
    client.poll(0, clock.milliseconds())
    assert got and got[0].body is not None  # the fake fails the test on an early request
    assert client.authentication_error(0) is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_takes_two_rounds(mechanism: str) -> None:
    cluster = SaslCluster()
    client, _, clock, metadata = sasl_client(cluster, mechanism, user="bob")
    poll_until_ready(client, clock)
    assert cluster.setup_log(0) == [("ApiVersions", API_VERSIONS_V), ("SaslHandshake", 1),
                                    ("SaslAuthenticate", 2), ("SaslAuthenticate", 2)]
    assert metadata.reachability.answered


@pytest.mark.parametrize("broker_max", [0, 1])
def test_sasl_authenticate_at_the_highest_common_version(broker_max: int) -> None:
    cluster = SaslCluster()
    cluster.versions[ApiKey.SASL_AUTHENTICATE] = (0, broker_max)
    client, _, clock, _ = sasl_client(cluster, "SCRAM-SHA-256")
    poll_until_ready(client, clock)
    assert [v for api, v in cluster.setup_log(0) if api == "SaslAuthenticate"] == \
        [broker_max, broker_max]


# ---------------------------------------------------------------------- failures
def test_a_wrong_password_fails_the_node_with_the_brokers_message(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = SaslCluster()
    client, selector, clock, metadata = sasl_client(cluster, password="wrong")
    with caplog.at_level(logging.WARNING, "millrace.client.network_client"):
        error = poll_until_failed(client, clock)
    assert isinstance(error, SaslAuthenticationError)
    assert error.message == "Authentication failed: Invalid username or password"
    assert state_of(client, 0) is ConnectionState.DISCONNECTED
    assert not selector.has_channel(0)
    assert [api for c, api, _ in cluster.log if c == 0] == list(SETUP)  # nothing else sent
    # every waiting call sees it at once
    standing = metadata.authentication_error()
    assert isinstance(standing, SaslAuthenticationError) and standing is not error
    assert metadata.reachability.all_failed(metadata.bootstrap_addresses, 100)
    assert metadata.await_update(metadata.update_version, 60_000) is False
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        metadata.timeout_error("Topic t not present in metadata after 1 ms.")
    failures = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("connection to node 0 (fake:9092) failed "
                                             "authentication")]
    assert len(failures) == 1  # once per failed connection (the bootstrap one fails too)
    assert "wrong" not in caplog.text  # the password is in no log line
    # a new attempt (after the backoff) withdraws the failure until it fails again
    clock.sleep(1000)
    client.ready(N0, clock.milliseconds())
    assert metadata.authentication_error() is None and client.authentication_error(0) is None
    assert isinstance(poll_until_failed(client, clock), SaslAuthenticationError)
    assert metadata.authentication_error() is not None


def test_a_mechanism_the_broker_does_not_enable() -> None:
    cluster = SaslCluster(mechanisms=("PLAIN",))
    client, _, clock, metadata = sasl_client(cluster, "SCRAM-SHA-512")
    error = poll_until_failed(client, clock)
    assert isinstance(error, UnsupportedSaslMechanismError)
    assert error.message == ("Client SASL mechanism 'SCRAM-SHA-512' not enabled in the "
                             "server, enabled mechanisms are ['PLAIN']")
    assert isinstance(metadata.authentication_error(), UnsupportedSaslMechanismError)


def test_a_broker_without_sasl_authenticate() -> None:
    cluster = SaslCluster()
    del cluster.versions[ApiKey.SASL_AUTHENTICATE]
    client, _, clock, _ = sasl_client(cluster)
    error = poll_until_failed(client, clock)
    assert isinstance(error, UnsupportedVersionError) and "SaslAuthenticate" in str(error)
    assert [api for c, api, _ in cluster.log if c == 0] == ["ApiVersions"]


def test_a_bad_server_signature_fails_authentication() -> None:
    # a broker that cannot prove it knows the user's key: its server-final is forged
    cluster = SaslCluster()
    client, _, clock, _ = sasl_client(cluster, "SCRAM-SHA-256", user="bob")
    real = cluster._handle_SaslAuthenticate

    def forged(node_id: int, version: int, body: Any) -> Any:
        response = real(node_id, version, body)
        if response.auth_bytes.startswith(b"v="):
            response.auth_bytes = b"v=" + b"A" * 44
        return response

    cluster._handle_SaslAuthenticate = forged  # type: ignore[method-assign]
    error = poll_until_failed(client, clock)
    assert isinstance(error, SaslAuthenticationError)
    assert error.message.startswith("SASL SCRAM-SHA-256 authentication failed:")


def test_a_connection_closed_during_authentication_is_not_an_authentication_failure(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = SaslCluster()
    client, selector, clock, metadata = sasl_client(cluster)
    client.ready(N0, clock.milliseconds())
    client.poll(0, clock.milliseconds())
    client.poll(0, clock.milliseconds())
    assert state_of(client, 0) is ConnectionState.AUTHENTICATING
    selector.drop_connection(0, "connection reset by peer")
    with caplog.at_level(logging.WARNING, "millrace.client.network_client"):
        client.poll(0, clock.milliseconds())
    assert state_of(client, 0) is ConnectionState.DISCONNECTED
    assert client.authentication_error(0) is None and metadata.authentication_error() is None
    assert isinstance(metadata.reachability.error(["fake:9092"]), NoBrokerAvailableError)
    assert "closed during SASL authentication" in caplog.text


def test_a_failed_tls_handshake_is_an_authentication_failure(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = SaslCluster()
    client, selector, clock, metadata = sasl_client(cluster)
    reason = "SSL handshake failed: certificate verify failed: Hostname mismatch"
    selector.fail_tls(0, reason)
    with caplog.at_level(logging.WARNING, "millrace.client.network_client"):
        error = poll_until_failed(client, clock)
    assert isinstance(error, SslAuthenticationError)
    assert str(error) == f"{reason} (fake:9092)"
    assert isinstance(metadata.authentication_error(), SslAuthenticationError)
    assert caplog.text.count("Hostname mismatch") == 1  # logged once, with the address
    assert "node 0 (fake:9092)" in caplog.text


# ---------------------------------------------------------------------- re-authentication
def test_the_session_is_renewed_by_reconnecting_before_it_expires() -> None:
    cluster = SaslCluster(session_lifetime_ms=10_000)
    client, selector, clock, _ = sasl_client(cluster)
    poll_until_ready(client, clock)
    connects = len(selector.connects)
    clock.sleep(8_000)  # < 85%: nothing happens
    client.poll(0, clock.milliseconds())
    assert client.ready(N0, clock.milliseconds())
    clock.sleep(1_600)  # > 95%
    assert client.poll(0, clock.milliseconds()) == []  # nothing failed
    assert state_of(client, 0) is ConnectionState.DISCONNECTED
    assert not client.connection_failed(N0)
    poll_until_ready(client, clock)  # at once: no reconnect backoff
    assert len(selector.connects) == connects + 1
    assert [api for _, api, _ in cluster.log[-3:]] == ["ApiVersions", "SaslHandshake",
                                                       "SaslAuthenticate"]


def test_a_due_session_drains_its_in_flight_requests_first() -> None:
    cluster = SaslCluster(session_lifetime_ms=10_000)
    cluster.create_topic("t", 1)
    client, selector, clock, _ = sasl_client(cluster)
    poll_until_ready(client, clock)
    cluster.hold = True  # produce answers wait
    got: list[ClientResponse] = []
    body = PRODUCE(acks=1, timeout_ms=1000, topic_data=[])
    client.send(ClientRequest(0, body, got.append), clock.milliseconds())
    client.poll(0, clock.milliseconds())
    clock.sleep(9_600)
    client.poll(0, clock.milliseconds())
    assert state_of(client, 0) is ConnectionState.DRAINING
    assert not client.ready(N0, clock.milliseconds()) and selector.has_channel(0)
    cluster.hold = False
    selector.release()
    client.poll(0, clock.milliseconds())
    assert len(got) == 1 and got[0].body is not None and not got[0].disconnected
    assert state_of(client, 0) is ConnectionState.DISCONNECTED and not selector.has_channel(0)
    poll_until_ready(client, clock)


# ---------------------------------------------------------------------- the waiting calls
def test_consumer_requests_and_polls_fail_with_the_authentication_error() -> None:
    cluster = SaslCluster()
    client, _, clock, metadata = sasl_client(cluster, password="wrong")
    consumer_client = ConsumerNetworkClient(client, metadata, clock)
    future = consumer_client.send(N0, METADATA(topics=[]))
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        for _ in range(20):
            consumer_client.poll(0)
    assert future.failed() and isinstance(future.exception, SaslAuthenticationError)
    consumer_client.poll_no_wakeup()  # the heartbeat thread's poll does not raise


def test_producer_send_fails_at_once_with_a_wrong_password() -> None:
    cluster = SaslCluster()
    config = {"bootstrap.servers": "fake:9092", "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
              "sasl.password": "wrong", "max.block.ms": 60_000}
    selector = SaslSelector(cluster)
    selector.blocking = True
    with cast(Any, KafkaProducer(config, time=SYSTEM_TIME,
                                 _selector=cast(Selector, selector))) as producer:
        started = time.monotonic()
        with pytest.raises(SaslAuthenticationError, match="Authentication failed"):
            producer.send(ProducerRecord[bytes, bytes]("t", b"v"))
        assert time.monotonic() - started < 10  # at once, not after max.block.ms
