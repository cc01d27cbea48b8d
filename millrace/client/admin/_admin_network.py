"""Synchronous request/response over the shared ``NetworkClient`` for the admin client.

Java counterparts: ``KafkaAdminClient``'s ``AdminClientRunnable`` (which calls run on the
network thread) and ``AdminMetadataManager`` (which keeps only the broker list).  The
admin client has no background thread: each admin operation runs its calls on the
caller's thread, one at a time:

1. pick the node (a given one, the controller, or the least loaded one);
2. poll the ``NetworkClient`` until the connection is ready (it connects, exchanges
   ApiVersions, refreshes metadata when due);
3. send, then poll until *that* request's response comes back.

A dropped connection or a request that outlived ``request.timeout.ms`` is retried after
``retry.backoff.ms``; nothing is retried past the operation's deadline (by default
``default.api.timeout.ms``), which ends in ``KafkaTimeoutError``.  Coordinator-bound
calls find the coordinator with FindCoordinator (cached per group) and start over when
it has moved (NOT_COORDINATOR) or is loading/unavailable.

An operation on many items (partitions by leader, transactional ids by coordinator) runs
``call_keys``: each round is one attempt at every pending key and answers each key's
value or error, and the keys it names to retry; those go round again after a backoff
(Java's ``AdminApiDriver`` re-queues a handler's unmapped and retriable keys the same
way).  A key still pending at the deadline ends in ``KafkaTimeoutError`` with its last
error; the others keep their answers.

Not thread-safe: the owning ``KafkaAdminClient`` serialises calls with a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from millrace.client.admin.results import AdminResult
from millrace.client.client_utils import create_network_client
from millrace.client.cluster import Cluster, Node
from millrace.client.errors import KafkaTimeoutError
from millrace.client.metadata import Metadata, parse_bootstrap_servers
from millrace.client.network_client import ClientRequest, ClientResponse
from millrace.common.errors import Errors, KafkaError, for_code
from millrace.common.time import SYSTEM_TIME, Time
from millrace.protocol import ApiKey, FindCoordinatorRequest
from millrace.protocol.api import REQUEST_CLASS_TO_API

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
# One round of ``call_keys``: the pending keys -> (each key's value or error, keys to retry).
KeyRound = Callable[[list[K]], tuple[Mapping[K, V | BaseException], Iterable[K]]]

GROUP_KEY_TYPE = 0
# Coordinator errors after which a group call finds the coordinator again and retries.
COORDINATOR_ERRORS = frozenset({Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR})
_POLL_SLICE_MS = 100
# Refused connections per bootstrap address (reconnect backoff 50 ms doubling: ~1.5 s in
# all) before an admin call gives up on a cluster that never answered.
_UNREACHABLE_ATTEMPTS = 5


class AdminMetadata(Metadata):
    """Metadata that asks for the brokers only (Java ``AdminMetadataManager``)."""

    def metadata_request_topics(self, now_ms: int) -> list[str] | None:
        return []

    def allow_auto_topic_creation(self) -> bool:
        return False


class RetriableCallError(Exception):
    """Raised by a response handler to have the call retried after a backoff."""

    def __init__(self, error: KafkaError, coordinator_moved: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.coordinator_moved = coordinator_moved


class AdminNetwork:
    def __init__(self, values: dict[str, Any], *, time: Time = SYSTEM_TIME) -> None:
        self._time = time
        self.bootstrap_text = ",".join(values["bootstrap.servers"])
        addresses = parse_bootstrap_servers(values["bootstrap.servers"])
        self.request_timeout_ms: int = values["request.timeout.ms"]
        self.retry_backoff_ms: int = values["retry.backoff.ms"]
        self.metadata = AdminMetadata(values["retry.backoff.ms"], values["retry.backoff.max.ms"],
                                      values["metadata.max.age.ms"])
        self.metadata.bootstrap(addresses)
        self.client = create_network_client(
            values, self.metadata, client_id=values["client.id"] or "millrace-admin",
            max_in_flight_requests_per_connection=1, time=time)
        self._coordinators: dict[str, Node] = {}

    # ------------------------------------------------------------------ time
    def now(self) -> int:
        return self._time.milliseconds()

    def _timeout(self, what: str, node: Node | None, deadline_ms: int, started_ms: int
                 ) -> KafkaTimeoutError:
        waited = max(deadline_ms - started_ms, 0)
        if node is None or node.id < 0:
            where = f"the cluster at {self.bootstrap_text}"
        else:
            where = f"node {node.id} ({node.host}:{node.port})"
        return self.metadata.timeout_error(
            f"{what}: timed out after {waited} ms waiting for {where}", waited)

    def check_reachable(self) -> None:
        """Fail at once, not at the deadline, once every bootstrap address has refused
        ``_UNREACHABLE_ATTEMPTS`` connections and nothing ever answered: an admin call
        against a wrong address or a stopped broker ends in seconds, naming the cause."""
        reach = self.metadata.reachability
        if reach.all_failed(self.metadata.bootstrap_addresses, _UNREACHABLE_ATTEMPTS):
            error = reach.error(self.metadata.bootstrap_addresses)
            if error is not None:
                raise error

    def backoff(self, deadline_ms: int) -> None:
        """Wait ``retry.backoff.ms`` (or until the deadline) while doing network I/O."""
        end = min(self.now() + self.retry_backoff_ms, deadline_ms)
        while (now := self.now()) < end:
            self.client.poll(end - now, now)

    # ------------------------------------------------------------------ metadata
    def cluster(self, deadline_ms: int) -> Cluster:
        """The broker list, once the first metadata response has arrived."""
        started = self.now()
        while self.metadata.fetch().is_bootstrap:
            now = self.now()
            if now >= deadline_ms:
                raise self._timeout("fetching the broker list", None, deadline_ms, started)
            self.check_reachable()
            # connect as soon as the reconnect backoff allows (the metadata request goes
            # once a connection is up), so unreachable addresses are known in seconds
            node = self.client.least_loaded_node(now)
            if node is not None:
                self.client.ready(node, now)
            self.client.poll(min(deadline_ms - now, _POLL_SLICE_MS), now)
        return self.metadata.fetch()

    def controller_or_any(self, deadline_ms: int) -> Node | None:
        """The controller (where topic changes go), else None (= least loaded node)."""
        return self.cluster(deadline_ms).controller

    def refresh_metadata(self, deadline_ms: int) -> None:
        """Fetch the broker list (and controller) again now, e.g. after NOT_CONTROLLER;
        returns when the answer is in or the deadline has passed."""
        seen = self.metadata.request_update_for_new_topics()
        while self.metadata.update_version <= seen and (now := self.now()) < deadline_ms:
            self.client.poll(min(deadline_ms - now, _POLL_SLICE_MS), now)

    # ------------------------------------------------------------------ calls
    def send_to_controller(self, body: Any, deadline_ms: int, what: str, *,
                           min_version: int | None = None) -> tuple[Any, int]:
        """Send ``body`` to the metadata's controller (ElectLeaders, reassignments: the
        requests only the active controller answers).  A top-level NOT_CONTROLLER
        refreshes the metadata and raises RetriableCallError, so ``call`` retries on the
        new controller until the deadline; any other top-level error raises."""
        response, version = self.send(body, deadline_ms, self.controller_or_any(deadline_ms),
                                      min_version=min_version)
        code = response.error_code  # 0 at versions without the field
        if code == Errors.NOT_CONTROLLER:
            self.refresh_metadata(deadline_ms)
            raise RetriableCallError(for_code(code)(what))
        if code:
            raise for_code(code)(getattr(response, "error_message", None) or what)
        return response, version

    def send(self, body: Any, deadline_ms: int, node: Node | None = None, *,
             min_version: int | None = None, max_version: int | None = None
             ) -> tuple[Any, int]:
        """Send ``body`` to ``node`` (None: the least loaded node); return (response body,
        version).  Retries lost connections until ``deadline_ms``; a broker without a
        version in [``min_version``, ``max_version``] raises ``UnsupportedVersionError``."""
        api_name = ApiKey(REQUEST_CLASS_TO_API[type(body)].key).name
        started = self.now()
        target: Node | None = None
        if node is None:
            # Like Java's LeastLoadedNodeProvider: a call for any node waits for the
            # first metadata, so it goes to a broker the cluster lists, not to a
            # bootstrap address that may be a broker still waiting for the controller.
            self.cluster(deadline_ms)
        while True:
            now = self.now()
            if now >= deadline_ms:
                raise self._timeout(api_name, target, deadline_ms, started)
            target = node or self.client.least_loaded_node(now)
            if target is None or not self.client.ready(target, now):
                self.check_reachable()
                self.client.poll(min(deadline_ms - now, _POLL_SLICE_MS), now)
                continue
            request = ClientRequest(target.id, body, created_ms=now,
                                    request_timeout_ms=min(self.request_timeout_ms,
                                                           deadline_ms - now),
                                    min_version=min_version, max_version=max_version)
            self.client.send(request, now)
            response = self._await(request)
            if response.version_mismatch is not None:
                raise response.version_mismatch
            if response.disconnected:
                log.debug("%s to node %d: connection lost%s; retrying", api_name, target.id,
                          " (timed out)" if response.timed_out else "")
                self.backoff(deadline_ms)
                continue
            return response.body, request.version

    def _await(self, request: ClientRequest) -> ClientResponse:
        # The NetworkClient answers every request: a response, a disconnect, or a timeout
        # after request.timeout_ms (capped to the call's deadline above).  Should that
        # promise ever break, the connection is closed, which answers it as disconnected.
        give_up = request.created_ms + request.request_timeout_ms + 5 * _POLL_SLICE_MS * 10
        while True:
            now = self.now()
            for response in self.client.poll(_POLL_SLICE_MS * 10, now):
                if response.request is request:
                    return response
            if now > give_up:
                self.client.disconnect(request.destination)

    def call(self, deadline_ms: int, attempt: Callable[[], T], what: str) -> T:
        """Run ``attempt`` until it does not raise ``RetriableCallError`` or time runs out."""
        while True:
            try:
                return attempt()
            except RetriableCallError as e:
                if self.now() + self.retry_backoff_ms >= deadline_ms:
                    raise KafkaTimeoutError(f"{what}: timed out; last error: {e.error}") \
                        from e.error
                log.debug("%s: %s; retrying", what, e.error)
                self.backoff(deadline_ms)

    def call_keys(self, keys: Iterable[K], deadline_ms: int, attempt: KeyRound[K, V],
                  what: Callable[[K], str]) -> AdminResult[K, V]:
        """Run ``attempt(pending)`` until it names no key to retry or time runs out; a key
        still pending then fails with ``KafkaTimeoutError`` naming ``what(key)`` and its
        last error.  The result holds every key of ``keys``, in that order."""
        ordered = list(keys)
        outcome: dict[K, V | BaseException] = {}
        pending = ordered
        while pending:
            answers, retry = attempt(pending)
            outcome.update(answers)
            pending = list(retry)
            if pending:
                if self.now() + self.retry_backoff_ms >= deadline_ms:
                    for key in pending:
                        outcome[key] = KafkaTimeoutError(
                            f"{what(key)}: timed out; last error: {outcome[key]}")
                    break
                self.backoff(deadline_ms)
        result: AdminResult[K, V] = AdminResult()
        result.set_outcomes(ordered, outcome)
        return result

    # ------------------------------------------------------------------ coordinators
    def coordinator(self, group_id: str, deadline_ms: int) -> Node:
        """The group's coordinator (FindCoordinator, cached until it moves)."""
        node = self._coordinators.get(group_id)
        if node is not None:
            return node
        return self.call(deadline_ms, lambda: self._find_coordinator(group_id, deadline_ms),
                         f"finding the coordinator of group '{group_id}'")

    def _find_coordinator(self, group_id: str, deadline_ms: int) -> Node:
        body = FindCoordinatorRequest(key=group_id, key_type=GROUP_KEY_TYPE,
                                      coordinator_keys=[group_id])
        response, version = self.send(body, deadline_ms)
        if version >= 4:
            entry = next((c for c in response.coordinators if c.key == group_id), None)
            if entry is None:
                raise KafkaError(f"FindCoordinator answered no entry for group '{group_id}'")
        else:
            entry = response
        if entry.error_code:
            error = for_code(entry.error_code)(
                entry.error_message or f"coordinator of group '{group_id}'")
            if error.retriable:
                raise RetriableCallError(error)
            raise error
        node = Node(entry.node_id, entry.host, entry.port)
        self._coordinators[group_id] = node
        return node

    def coordinator_moved(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    def group_call(self, group_id: str, deadline_ms: int,
                   attempt: Callable[[Node], T], what: str) -> T:
        """Run ``attempt(coordinator)``; a coordinator error found by it (raised as
        ``RetriableCallError``) forgets the coordinator and retries."""
        def run() -> T:
            node = self.coordinator(group_id, deadline_ms)
            try:
                return attempt(node)
            except RetriableCallError as e:
                if e.coordinator_moved:
                    self.coordinator_moved(group_id)
                raise
        return self.call(deadline_ms, run, what)

    def close(self) -> None:
        self.client.close()


def check_coordinator_error(code: int, group_id: str) -> None:
    """Raise ``RetriableCallError`` for the errors that mean "ask the coordinator again"."""
    if code in COORDINATOR_ERRORS:
        raise RetriableCallError(for_code(code)(f"group '{group_id}'"),
                                 coordinator_moved=code != Errors.COORDINATOR_LOAD_IN_PROGRESS)
