"""Leader election: the registry instances of one cluster are the members of one Kafka group.

``SchemaRegistryCoordinator`` is a group member of protocol type ``sr`` (what Confluent's
registry uses), built on the client's ``AbstractCoordinator`` the way a consumer's
coordinator is: the same JoinGroup / SyncGroup / Heartbeat, a different meaning.  Each
member's metadata is its identity, JSON::

    {"version": 1, "host": "127.0.0.1", "port": 8081, "scheme": "http",
     "leader_eligibility": true}

The group leader (Kafka's, chosen by the coordinator) picks the registry's leader among
the eligible members -- the current one while it is still a member, else the first by
URL -- and SyncGroup hands every member ``{"version": 1, "error": 0, "leader": member id,
"leader_identity": {...}}`` (``error`` 1 when no member is eligible).  A member that stops
heartbeating (killed) is dropped by the coordinator after ``session.timeout.ms``; the
rebalance that follows elects another.

While a rebalance is in progress the leader is unknown; writes wait for the next one
(``LeaderElector.wait_for_leader``).  A member that becomes the leader opens the
transactional writer first (``on_elected``: fences the previous leader's producer and
reads the topic to its end), then says it is the leader.

Thread ownership: ``LeaderElector`` is the thread that drives the coordinator (the
"application thread" of ``AbstractCoordinator``); the heartbeat thread is the
coordinator's own.  ``leader`` is read by the HTTP handlers under ``changed``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from millrace.client.client_utils import create_network_client
from millrace.client.consumer._internals.abstract_coordinator import AbstractCoordinator
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.request_future import Timer
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.metadata import Metadata, parse_bootstrap_servers
from millrace.common.errors import KafkaError
from millrace.common.time import SYSTEM_TIME, Time

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"


@dataclass(frozen=True)
class Identity:
    host: str
    port: int
    scheme: str = "http"
    leader_eligibility: bool = True

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "host": self.host, "port": self.port, "scheme": self.scheme,
                "leader_eligibility": self.leader_eligibility}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Identity:
        return cls(str(body["host"]), int(body["port"]), str(body.get("scheme", "http")),
                   bool(body.get("leader_eligibility", True)))


class SchemaRegistryCoordinator(AbstractCoordinator):
    def __init__(self, client: ConsumerNetworkClient, time: Time, identity: Identity,
                 on_assignment: Callable[[Identity | None, bool], None], **kwargs: Any) -> None:
        super().__init__(client, time, **kwargs)
        self.identity = identity
        self.on_assignment = on_assignment
        self.last_leader: Identity | None = None

    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    def metadata(self) -> list[tuple[str, bytes]]:
        return [(PROTOCOL_NAME, json.dumps(self.identity.to_json()).encode())]

    def on_join_prepare(self, timer: Timer, generation_id: int, member_id: str) -> bool:
        self.on_assignment(None, False)  # no leader while the group rebalances
        return True

    def perform_assignment(self, leader_id: str, protocol: str,
                           members: list[Any]) -> dict[str, bytes]:
        identities: dict[str, Identity] = {}
        for member in members:
            try:
                identities[member.member_id] = Identity.from_json(json.loads(member.metadata))
            except (ValueError, KeyError, TypeError):
                log.warning("group %s: member %s sent metadata that does not parse",
                            self.group_id, member.member_id)
        eligible = {m: i for m, i in identities.items() if i.leader_eligibility}
        chosen = next((m for m, i in eligible.items() if i == self.last_leader), None)
        if chosen is None and eligible:
            chosen = min(eligible, key=lambda m: (eligible[m].url, m))
        body: dict[str, Any] = {"version": 1, "error": 0 if chosen else 1, "leader": chosen,
                                "leader_identity": eligible[chosen].to_json() if chosen else None}
        log.info("group %s: the registry's leader is %s", self.group_id,
                 eligible[chosen].url if chosen else "nobody (no eligible member)")
        encoded = json.dumps(body).encode()
        return {member.member_id: encoded for member in members}

    def on_join_complete(self, generation_id: int, member_id: str, protocol: str | None,
                         assignment: bytes) -> None:
        try:
            body = json.loads(assignment)
            leader = Identity.from_json(body["leader_identity"]) if body.get("error") == 0 \
                else None
        except (ValueError, KeyError, TypeError):
            log.warning("group %s: an assignment that does not parse", self.group_id)
            leader = None
        self.last_leader = leader
        self.on_assignment(leader, leader is not None and body.get("leader") == member_id)


class LeaderElector(threading.Thread):
    """Keeps this instance in the group and tracks who leads."""

    def __init__(self, clients: Mapping[str, Any], group_id: str, identity: Identity,
                 on_elected: Callable[[], None], on_deposed: Callable[[], None], *,
                 session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 3_000,
                 time: Time = SYSTEM_TIME) -> None:
        super().__init__(name="schema-registry-elector", daemon=True)
        self.identity = identity
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        self.changed = threading.Condition()
        self.leader: Identity | None = None  # guarded by changed
        self.is_leader = False  # guarded by changed
        self.failure: str | None = None
        self._stop_event = threading.Event()
        self._time = time
        cfg = ConsumerConfig({**clients, "group.id": group_id,
                              "client.id": f"schema-registry-{identity.port}"})
        v = cfg.values
        metadata = Metadata(refresh_backoff_ms=v["retry.backoff.ms"],
                            metadata_max_age_ms=v["metadata.max.age.ms"])
        metadata.bootstrap(parse_bootstrap_servers(v["bootstrap.servers"]))
        network = create_network_client(v, metadata, client_id=v["client.id"],
                                        max_in_flight_requests_per_connection=100, time=time)
        self.client = ConsumerNetworkClient(network, metadata, time, v["request.timeout.ms"],
                                            v["retry.backoff.ms"])
        self.coordinator = SchemaRegistryCoordinator(
            self.client, time, identity, self._assigned, group_id=group_id,
            client_id=v["client.id"], session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=session_timeout_ms * 3,
            heartbeat_interval_ms=heartbeat_interval_ms,
            retry_backoff_ms=v["retry.backoff.ms"], request_timeout_ms=v["request.timeout.ms"])

    def _assigned(self, leader: Identity | None, is_leader: bool) -> None:
        was_leader = self.is_leader
        if was_leader and not is_leader:
            self.on_deposed()
        if is_leader and not was_leader:
            try:
                self.on_elected()  # fence the old writer and read to the end first
            except Exception as e:  # a KafkaError, a timeout, a store error: not the leader
                log.error("elected, but could not open the writer: %s; rejoining", e)
                self.coordinator.request_rejoin(f"the writer did not open: {e}")
                leader, is_leader = None, False
        with self.changed:
            self.leader, self.is_leader = leader, is_leader
            self.changed.notify_all()
        if leader is not None:
            log.info("the registry's leader is %s%s", leader.url,
                     " (this instance)" if is_leader else "")

    def wait_for_leader(self, timeout_s: float) -> tuple[Identity | None, bool]:
        with self.changed:
            self.changed.wait_for(lambda: self.leader is not None or self._stop_event.is_set(),
                                  timeout_s)
            return self.leader, self.is_leader

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                timer = Timer(self._time, 500)
                try:
                    self.coordinator.poll_heartbeat(timer.current_ms)
                    self.coordinator.ensure_active_group(timer)
                    self.client.poll(min(timer.remaining_ms, 200))
                except KafkaError as e:
                    log.warning("group %s: %s", self.coordinator.group_id, e)
                    self._stop_event.wait(0.5)
        except Exception as e:
            self.failure = f"{type(e).__name__}: {e}"
            log.exception("the leader elector stopped")
        finally:
            try:
                self.coordinator.close(Timer(self._time, 5_000))
            finally:
                self.client.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.client.wakeup()
        self.join(15)
