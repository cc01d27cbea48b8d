"""The client's view of the cluster and the rules for refreshing it (Java ``Metadata``).

Theory of operation.  ``Metadata`` holds the current ``Cluster`` snapshot and decides
*when* a refresh is due; ``NetworkClient`` (its metadata updater, on the network thread)
decides *where* to send the MetadataRequest and feeds the answer to ``update``.  A refresh
is due when

* the snapshot is older than ``metadata.max.age.ms``, or
* someone called ``request_update()`` -- the sender after NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION or a disconnect, ``send()`` for a topic it has not seen --

but never sooner than the refresh backoff after the previous attempt (exponential from
``retry.backoff.ms`` to ``retry.backoff.max.ms`` while attempts keep failing), except for
topics the snapshot does not cover yet (``request_update_for_new_topics``: a subscription,
a producer's first send to a topic, an offsets lookup), which are asked for at once.  Each
successful update bumps ``update_version``; threads waiting for a topic block on
``await_update`` until the version moves past the one they saw.

A partition whose new leader epoch is older than the cached one is kept as it was (the
answering broker is behind; KIP-320) and another refresh is requested.  ``current_leader``
hands out a partition's leader with its epoch: the consumer fetches with that epoch and
validates its position when it changes.

Threading: written by the network thread, read by any.  The snapshot is replaced as a
whole, so ``fetch()`` needs no lock; everything else is guarded by ``_cond``.
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time as _time
from collections.abc import Iterable
from typing import NamedTuple

from millrace.client._backoff import ExponentialBackoff
from millrace.client.cluster import Cluster, Node, PartitionInfo, TopicPartition
from millrace.client.errors import KafkaTimeoutError, NoBrokerAvailableError
from millrace.common.errors import ConfigError, Errors, KafkaError, MillraceError, for_code
from millrace.protocol.types import MetadataResponse

log = logging.getLogger(__name__)

_IPV6 = re.compile(r"^\[([0-9a-fA-F:.]+)\]:(\d+)$")


def parse_bootstrap_servers(servers: Iterable[str] | str) -> list[tuple[str, int]]:
    """``host:port`` entries (``[v6addr]:port`` too) -> [(host, port)]; ConfigError if bad."""
    if isinstance(servers, str):
        servers = [s for s in servers.split(",")]
    out: list[tuple[str, int]] = []
    for raw in servers:
        entry = raw.strip()
        if not entry:
            continue
        m = _IPV6.match(entry)
        if m:
            host, port_text = m.group(1), m.group(2)
        else:
            host, sep, port_text = entry.rpartition(":")
            if not sep or not host or ":" in host:
                raise ConfigError(f"Invalid url in bootstrap.servers: {entry}")
        try:
            port = int(port_text)
        except ValueError:
            raise ConfigError(f"Invalid port in bootstrap.servers: {entry}") from None
        if not 0 < port < 65536:
            raise ConfigError(f"Invalid port in bootstrap.servers: {entry}")
        out.append((host, port))
    if not out:
        raise ConfigError("No resolvable bootstrap urls given in bootstrap.servers")
    return out


class LeaderAndEpoch(NamedTuple):
    """A partition's leader and its leader epoch as the metadata knows them (Java
    ``Metadata.LeaderAndEpoch``); either may be unknown (None)."""

    leader: Node | None
    epoch: int | None

    @staticmethod
    def no_leader_or_epoch() -> LeaderAndEpoch:
        return LeaderAndEpoch(None, None)


class Reachability:
    """Whether any broker ever answered, and else why each address failed.

    The network thread reports connection failures and the first broker that answers
    ApiVersions (and, with SASL, authenticates us); callers' threads read it when a wait
    runs out, to say "no broker reachable at <address> (<socket error>)" instead of
    blaming a topic.  Once a broker has answered, later failures are ordinary retries and
    this stays quiet.

    Authentication failures are different: a wrong password or an untrusted certificate
    will not fix itself, so callers must not wait for their timeout (Java's
    ``Metadata.fatalError``).  The network thread reports each one
    (``authentication_failed``: a ``SaslAuthenticationError``, ``SslAuthenticationError``,
    ...) whether or not a broker answered before; it stands until the next connection
    attempt to that address (which may succeed: the credentials may have been created in
    the meantime) or until any connection authenticates.  While one stands,
    ``authentication_error`` returns it, ``error`` returns it and ``all_failed`` is
    true, so every waiting call raises it at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answered = False
        self._failures: dict[str, tuple[int, str]] = {}  # address -> (attempts, last reason)
        self._auth_errors: dict[str, MillraceError] = {}  # address -> the failure

    @property
    def answered(self) -> bool:
        return self._answered

    def connection_failed(self, address: str, reason: str) -> None:
        with self._lock:
            if not self._answered:
                attempts, _ = self._failures.get(address, (0, ""))
                self._failures[address] = (attempts + 1, reason)

    def connecting(self, address: str) -> None:
        """A new attempt on ``address``: its previous authentication failure is history."""
        if self._auth_errors:
            with self._lock:
                self._auth_errors.pop(address, None)

    def authentication_failed(self, address: str, error: MillraceError) -> None:
        with self._lock:
            self._auth_errors.pop(address, None)
            self._auth_errors[address] = error  # last in the dict: the newest
            if not self._answered:
                attempts, _ = self._failures.get(address, (0, ""))
                self._failures[address] = (attempts + 1, str(error))

    def authentication_error(self) -> MillraceError | None:
        """The newest standing authentication failure, if any (a fresh copy: each
        caller raises its own, with its own traceback)."""
        if not self._auth_errors:
            return None
        with self._lock:
            error = next(reversed(self._auth_errors.values()), None)
        return copy.copy(error)

    def broker_answered(self) -> None:
        with self._lock:
            self._answered = True
            self._failures.clear()
            self._auth_errors.clear()

    def failed_attempts(self) -> int:
        """The fewest failed attempts over the addresses tried (0 if none failed yet)."""
        with self._lock:
            return min((n for n, _ in self._failures.values()), default=0)

    def all_failed(self, addresses: Iterable[str], attempts: int) -> bool:
        """No broker answered and each of ``addresses`` failed at least ``attempts`` times
        -- or an authentication failure stands (no point in trying longer)."""
        with self._lock:
            if self._auth_errors:
                return True
            return not self._answered and all(
                self._failures.get(a, (0, ""))[0] >= attempts for a in addresses)

    def error(self, addresses: Iterable[str] = (), waited_ms: float | None = None
              ) -> MillraceError | None:
        """A standing authentication failure; else ``unreachable_error``."""
        auth = self.authentication_error()
        if auth is not None:
            return auth
        return self.unreachable_error(addresses, waited_ms)

    def unreachable_error(self, addresses: Iterable[str] = (), waited_ms: float | None = None
                          ) -> NoBrokerAvailableError | None:
        """``NoBrokerAvailableError`` naming every failed address (and ``addresses`` not
        tried) if no broker has answered and some connection failed; else None."""
        with self._lock:
            if self._answered or not self._failures:
                return None
            parts = [f"{address} ({reason})" for address, (_, reason)
                     in self._failures.items()]
            parts += [f"{a} (not tried)" for a in addresses if a not in self._failures]
        after = "" if waited_ms is None else f" after {int(waited_ms)} ms"
        return NoBrokerAvailableError("no broker reachable at " + ", ".join(parts) + after)


class Metadata:
    def __init__(self, refresh_backoff_ms: int = 100, refresh_backoff_max_ms: int = 1000,
                 metadata_max_age_ms: int = 300_000) -> None:
        self._cond = threading.Condition()
        self._cluster = Cluster.empty()
        self._max_age_ms = metadata_max_age_ms
        self._refresh_backoff = ExponentialBackoff(
            refresh_backoff_ms, 2, max(refresh_backoff_ms, refresh_backoff_max_ms), 0.2)
        self._update_version = 0  # guarded by _cond
        self._request_version = 0  # guarded by _cond
        self._need_update = False  # guarded by _cond
        self._last_refresh_ms = 0  # guarded by _cond
        self._last_successful_refresh_ms = 0  # guarded by _cond
        self._attempts = 0  # guarded by _cond
        self._backoff_ms = self._refresh_backoff.backoff(0)  # drawn once per attempt count
        self._closed = False
        self.reachability = Reachability()
        self.bootstrap_addresses: list[str] = []

    # ------------------------------------------------------------------ reading
    def fetch(self) -> Cluster:
        """The current snapshot (no lock: snapshots are immutable)."""
        return self._cluster

    @property
    def update_version(self) -> int:
        return self._update_version

    @property
    def closed(self) -> bool:
        return self._closed

    def update_requested(self) -> bool:
        return self._need_update

    def current_leader(self, tp: TopicPartition) -> LeaderAndEpoch:
        """``tp``'s leader and leader epoch in the current snapshot."""
        info = self._cluster.partition(tp)
        if info is None:
            return LeaderAndEpoch.no_leader_or_epoch()
        return LeaderAndEpoch(info.leader, info.leader_epoch if info.leader_epoch >= 0 else None)

    def metadata_age_ms(self, now_ms: int) -> int:
        return now_ms - self._last_successful_refresh_ms

    # ------------------------------------------------------------------ scheduling
    def bootstrap(self, addresses: Iterable[tuple[str, int]]) -> None:
        addresses = list(addresses)
        self.bootstrap_addresses = [f"{host}:{port}" for host, port in addresses]
        with self._cond:
            self._cluster = Cluster.bootstrap(addresses)
            self._need_update = True
            self._update_version += 1

    def request_update(self) -> int:
        """Ask for a refresh as soon as the backoff allows; returns the current version."""
        with self._cond:
            self._need_update = True
            self._request_version += 1
            return self._update_version

    def request_update_for_new_topics(self) -> int:
        """``request_update`` for topics the snapshot does not cover yet (a subscription, a
        first send, an offsets lookup): due at once, without the refresh backoff, as the
        answer about other topics says nothing about these."""
        with self._cond:
            self._last_refresh_ms = 0
            self._need_update = True
            self._request_version += 1
            return self._update_version

    def _set_attempts(self, attempts: int) -> None:
        self._attempts = attempts
        self._backoff_ms = self._refresh_backoff.backoff(max(attempts - 1, 0))

    def time_to_allow_update(self, now_ms: int) -> int:
        return max(self._last_refresh_ms + self._backoff_ms - now_ms, 0)

    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until a refresh is due (0 = now)."""
        if self._need_update:
            expire = 0
        else:
            expire = max(self._last_successful_refresh_ms + self._max_age_ms - now_ms, 0)
        if expire == 0 and not self._need_update and self._attempts:
            self._set_attempts(0)  # a periodic refresh does not inherit a failure backoff
        return max(expire, self.time_to_allow_update(now_ms))

    def request_version(self) -> int:
        return self._request_version

    # ------------------------------------------------------------------ what to ask for
    def metadata_request_topics(self, now_ms: int) -> list[str] | None:
        """Topics to ask about (None = all).  Subclasses narrow it (the producer's topics)."""
        return None

    def allow_auto_topic_creation(self) -> bool:
        return True

    # ------------------------------------------------------------------ updates
    def failed_update(self, now_ms: int) -> None:
        with self._cond:
            self._last_refresh_ms = now_ms
            self._set_attempts(self._attempts + 1)
            self._cond.notify_all()

    def update(self, response: MetadataResponse, request_version: int, now_ms: int,
               requested_topics: list[str] | None = None) -> None:
        """Apply a MetadataResponse; ``request_version`` is what ``request_version()``
        said when the request was sent (a newer request keeps ``update_requested``)."""
        with self._cond:
            old = self._cluster
            cluster, retry = cluster_from_response(response, old)
            self._cluster = cluster
            self._last_refresh_ms = now_ms
            self._update_version += 1
            if retry:
                self._set_attempts(self._attempts + 1)
                self._need_update = True
            else:
                self._set_attempts(0)
                self._last_successful_refresh_ms = now_ms
                if request_version == self._request_version:
                    self._need_update = False
            self._cond.notify_all()
        self.on_update(cluster, now_ms)

    def on_update(self, cluster: Cluster, now_ms: int) -> None:
        """Hook for subclasses (e.g. expire unused producer topics)."""

    # ------------------------------------------------------------------ waiting
    def authentication_failed(self, address: str, error: MillraceError) -> None:
        """The network thread could not authenticate to ``address``: record it (see
        ``Reachability``) and wake the threads in ``await_update``."""
        self.reachability.authentication_failed(address, error)
        with self._cond:
            self._cond.notify_all()

    def authentication_error(self) -> MillraceError | None:
        """A standing authentication failure, which waiting calls raise at once."""
        return self.reachability.authentication_error()

    def await_update(self, last_version: int, timeout_ms: float) -> bool:
        """Block until ``update_version > last_version`` (True) or the timeout (False);
        False at once while an authentication failure stands (``authentication_error``)."""
        deadline = _time.monotonic() + timeout_ms / 1000.0
        reach = self.reachability
        with self._cond:
            while self._update_version <= last_version and not self._closed:
                if reach.authentication_error() is not None:
                    return False
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self._update_version > last_version

    def topic_error(self, topic: str) -> KafkaError | None:
        """A non-retriable error the last update reported for ``topic``, if any."""
        cluster = self._cluster
        code = cluster.topic_errors.get(topic)
        if code is None:
            return None
        cls = for_code(code)
        if cls.retriable:
            return None
        return cls(f"{cls.name} for topic {topic}")

    def timeout_error(self, message: str, waited_ms: float | None = None) -> KafkaTimeoutError:
        """What a wait that ran out should raise: ``KafkaTimeoutError(message)`` -- or,
        when no broker ever answered, ``NoBrokerAvailableError`` naming the addresses and
        their socket errors, the real cause (not the topic or group that was waited for).
        A standing authentication failure is raised from here instead: it is the cause."""
        auth = self.reachability.authentication_error()
        if auth is not None:
            raise auth
        unreachable = self.reachability.unreachable_error(self.bootstrap_addresses, waited_ms)
        return unreachable if unreachable is not None else KafkaTimeoutError(message)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def cluster_from_response(response: MetadataResponse, old: Cluster) -> tuple[Cluster, bool]:
    """A MetadataResponse as a ``Cluster`` and whether to ask again soon (a topic error
    such as LEADER_NOT_AVAILABLE, a partition without a leader, a stale leader epoch).
    ``old`` supplies leaders newer than the response's (their epoch is higher)."""
    nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    partitions: list[PartitionInfo] = []
    unauthorized: list[str] = []
    invalid: list[str] = []
    internal: list[str] = []
    errors: dict[str, int] = {}
    retry = False
    for t in response.topics:
        name = t.name
        if name is None:
            continue
        if t.error_code:
            errors[name] = t.error_code
            if t.error_code == Errors.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.append(name)
            elif t.error_code == Errors.INVALID_TOPIC_EXCEPTION:
                invalid.append(name)
            else:
                retry = True  # e.g. LEADER_NOT_AVAILABLE while a topic is created
            continue
        if t.is_internal:
            internal.append(name)
        for p in t.partitions:
            info = PartitionInfo(
                name, p.partition_index,
                nodes.get(p.leader_id) if p.leader_id >= 0 else None,
                tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas),
                p.leader_epoch)
            if info.leader is None:
                retry = True
            previous = old.partition(TopicPartition(name, p.partition_index))
            if previous is not None and 0 <= info.leader_epoch < previous.leader_epoch:
                log.debug("ignoring stale metadata for %s-%d: epoch %d < cached %d",
                          name, p.partition_index, info.leader_epoch, previous.leader_epoch)
                leader = nodes.get(previous.leader.id) if previous.leader else None
                info = previous._replace(leader=leader)
                retry = True
            partitions.append(info)
    controller = nodes.get(response.controller_id)
    cluster = Cluster(nodes.values(), partitions, cluster_id=response.cluster_id,
                      controller=controller, unauthorized_topics=unauthorized,
                      invalid_topics=invalid, internal_topics=internal, topic_errors=errors)
    return cluster, retry
