"""Group membership: coordinator discovery, JoinGroup/SyncGroup, heartbeats, LeaveGroup
(Java ``AbstractCoordinator``).

Theory of operation.  The member's state machine (``state``)::

    UNJOINED --JoinGroup sent--> PREPARING_REBALANCE --JoinGroup answered--> COMPLETING_REBALANCE
    COMPLETING_REBALANCE --SyncGroup answered--> STABLE --rebalance needed--> PREPARING_REBALANCE
    any --fenced (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID), poll timeout, leave--> UNJOINED

``join_group_if_needed`` (application thread) drives a rebalance: ``on_join_prepare``
(commit, revoke), JoinGroup -- retried at once with the id the coordinator hands out on
MEMBER_ID_REQUIRED --, then, on the leader, the assignor runs over every member's
subscription (``perform_assignment``) and SyncGroup carries the result; everyone gets its
own assignment from SyncGroup (``on_join_complete``).  A step that has not finished when the
caller's timer runs out is kept and resumed by the next call, so ``poll`` never blocks on
a rebalance longer than its timeout.

The coordinator is the broker the FindCoordinator answer names.  It is reached on its own
connection (node id ``2**31 - 1 - broker id``, as Java does), so heartbeats and commits
never queue behind a long-polling fetch on the same socket.

The heartbeat thread (``heartbeat_run_once`` in a loop) runs while the member is in (or is
completing) a generation: it sends a Heartbeat every ``heartbeat.interval.ms``;
REBALANCE_IN_PROGRESS asks for a rejoin (done by the next ``poll``); ILLEGAL_GENERATION /
UNKNOWN_MEMBER_ID reset the generation; no answer within ``session.timeout.ms`` marks the
coordinator unknown; no ``poll`` within ``max.poll.interval.ms`` makes the member leave the
group (the next ``poll`` rejoins, its partitions reported lost).

Locking: ``_lock`` guards the state, the generation, the timers and the futures.  Both
threads take it before the network client's lock, never after (the network client fires
completions only after releasing its own lock), so the two cannot deadlock.
"""

from __future__ import annotations

import enum
import logging
import threading
from typing import Any, NamedTuple

from millrace.client.cluster import Node
from millrace.client.consumer._internals.consumer_metrics import GroupCoordinatorMetrics
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.heartbeat import Heartbeat
from millrace.client.consumer._internals.heartbeat_thread import HeartbeatThread
from millrace.client.consumer._internals.request_future import RequestFuture, Timer
from millrace.client.metrics import Metrics
from millrace.client.network_client import ClientResponse
from millrace.common.errors import (
    CoordinatorNotAvailableError,
    Errors,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    for_code,
)
from millrace.common.time import Time
from millrace.protocol import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
_COORDINATOR_ERRORS = (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR)
_JOIN_RETRY_AT_ONCE = (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError,
                       MemberIdRequiredError)


class MemberState(enum.Enum):
    UNJOINED = 0
    PREPARING_REBALANCE = 1
    COMPLETING_REBALANCE = 2
    STABLE = 3


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol_name: str | None


NO_GENERATION = Generation(-1, "", None)


class UnjoinedGroupError(KafkaError):
    """The member left the group (or was reset) while a rebalance step was in flight."""

    name = "UNJOINED_GROUP"
    retriable = True


class JoinResult(NamedTuple):
    generation: Generation
    leader_id: str
    members: list[Any]


class AbstractCoordinator:
    def __init__(self, client: ConsumerNetworkClient, time: Time, *, group_id: str,
                 group_instance_id: str | None = None, client_id: str = "",
                 session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                 heartbeat_interval_ms: int = 3000, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30_000, leave_group_on_close: bool = True,
                 start_heartbeat_thread: bool = True,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        self._client = client
        self._time = time
        self.sensors = metrics if metrics is not None else GroupCoordinatorMetrics(Metrics(time))
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.leave_group_on_close = leave_group_on_close
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self.state = MemberState.UNJOINED  # guarded by _lock
        self.generation = NO_GENERATION  # guarded by _lock
        self.rejoin_needed = True  # guarded by _lock
        self.rejoin_reason = ""  # guarded by _lock
        self._needs_join_prepare = True
        self._coordinator: Node | None = None  # guarded by _lock
        self._find_coordinator_future: RequestFuture[None] | None = None  # guarded by _lock
        self._join_future: RequestFuture[JoinResult] | None = None  # guarded by _lock
        self._sync_future: RequestFuture[bytes] | None = None  # guarded by _lock
        self.heartbeat = Heartbeat(session_timeout_ms=session_timeout_ms,
                                   heartbeat_interval_ms=heartbeat_interval_ms,
                                   max_poll_interval_ms=rebalance_timeout_ms,
                                   retry_backoff_ms=retry_backoff_ms,
                                   now_ms=time.milliseconds())  # guarded by _lock
        # start_heartbeat_thread=False: tests step heartbeat_run_once themselves
        self.heartbeat_thread = HeartbeatThread(self, start_heartbeat_thread)

    # ------------------------------------------------------------------ subclass hooks
    def protocol_type(self) -> str:
        raise NotImplementedError

    def metadata(self) -> list[tuple[str, bytes]]:
        """(protocol name, member metadata) in preference order."""
        raise NotImplementedError

    def on_join_prepare(self, timer: Timer, generation_id: int, member_id: str) -> bool:
        """Before (re)joining; False = not done yet (call again)."""
        raise NotImplementedError

    def perform_assignment(self, leader_id: str, protocol: str,
                           members: list[Any]) -> dict[str, bytes]:
        raise NotImplementedError

    def on_join_complete(self, generation_id: int, member_id: str, protocol: str | None,
                         assignment: bytes) -> None:
        raise NotImplementedError

    def on_leave_prepare(self) -> None:
        """Before leaving the group (close, unsubscribe)."""

    def rejoin_needed_or_pending(self) -> bool:
        with self._lock:
            return self.rejoin_needed or self._join_future is not None

    # ------------------------------------------------------------------ coordinator
    def coordinator_unknown(self) -> bool:
        return self.check_and_get_coordinator() is None

    def check_and_get_coordinator(self) -> Node | None:
        with self._lock:
            coordinator = self._coordinator
            if coordinator is not None and self._client.is_unavailable(coordinator):
                self.mark_coordinator_unknown("the coordinator is unavailable", disconnect=True)
                return None
            return coordinator

    def mark_coordinator_unknown(self, reason: str, disconnect: bool = False) -> None:
        with self._lock:
            old = self._coordinator
            if old is None:
                return
            log.info("group %s: coordinator %s is unavailable or invalid (%s); will "
                     "attempt rediscovery", self.group_id, old, reason)
            self._coordinator = None
        if disconnect:
            self._client.disconnect(old.id)

    def ensure_coordinator_ready(self, timer: Timer) -> bool:
        """Find the coordinator, waiting at most until ``timer`` expires."""
        while self.coordinator_unknown():
            future = self.lookup_coordinator()
            self._client.poll_until(future, timer.remaining_ms)
            timer.update()
            if not future.is_done:
                return False
            if future.failed():
                if not future.is_retriable():
                    raise future.exception
                log.debug("group %s: FindCoordinator failed: %s", self.group_id,
                          future.exception)
            if not self.coordinator_unknown():
                return True
            if timer.is_expired():
                return False
            self._client.sleep(min(self.retry_backoff_ms, timer.remaining_ms))
            timer.update()
        return True

    def lookup_coordinator(self) -> RequestFuture[None]:
        with self._lock:
            if self._find_coordinator_future is not None:
                return self._find_coordinator_future
            node = self._client.least_loaded_node()
            if node is None:
                return RequestFuture.failure(CoordinatorNotAvailableError(
                    "no broker is available to look up the coordinator"))
            body = FindCoordinatorRequest(key=self.group_id, key_type=0,
                                          coordinator_keys=[self.group_id])
            future = self._client.send(node, body).compose(self._handle_find_coordinator)
            self._find_coordinator_future = future

            def clear(_: Any) -> None:
                with self._lock:
                    self._find_coordinator_future = None
            future.add_listener(clear, clear)
            return future

    def _handle_find_coordinator(self, response: ClientResponse, out: RequestFuture[None]) -> None:
        body = response.body
        if response.request.version >= 4:
            if not body.coordinators:
                out.raise_(CoordinatorNotAvailableError("empty FindCoordinator answer"))
                return
            entry = body.coordinators[0]
            error, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
        else:
            error, node_id, host, port = body.error_code, body.node_id, body.host, body.port
        if error:
            out.raise_(for_code(error)(f"FindCoordinator for group {self.group_id}"))
            return
        with self._lock:
            # a connection of its own: coordinator traffic never waits behind a fetch
            self._coordinator = Node(INT32_MAX - node_id, host, port)
            log.info("group %s: discovered group coordinator %s:%d (broker %d)",
                     self.group_id, host, port, node_id)
            self.heartbeat.reset_session_timeout(self._time.milliseconds())
        out.complete(None)

    # ------------------------------------------------------------------ joining
    def request_rejoin(self, reason: str) -> None:
        with self._lock:
            if not self.rejoin_needed:
                log.info("group %s: request joining group due to: %s", self.group_id, reason)
            self.rejoin_reason = reason
            self.rejoin_needed = True

    def ensure_active_group(self, timer: Timer) -> bool:
        if not self.ensure_coordinator_ready(timer):
            return False
        self.heartbeat_thread.start_if_needed()
        return self.join_group_if_needed(timer)

    def join_group_if_needed(self, timer: Timer) -> bool:
        while self.rejoin_needed_or_pending():
            if not self.ensure_coordinator_ready(timer):
                return False
            if self._needs_join_prepare:
                self._needs_join_prepare = False
                with self._lock:
                    generation = self.generation
                if not self.on_join_prepare(timer, generation.generation_id,
                                            generation.member_id):
                    self._needs_join_prepare = True
                    return False
            done = self._advance_join(timer)
            if done is None:
                return False
            if not done:
                continue
            timer.update()
        return True

    def _advance_join(self, timer: Timer) -> bool | None:
        """One step of the rebalance: None = still waiting, False = retry, True = joined."""
        join = self._initiate_join_group()
        if not self._client.poll_until(join, timer.remaining_ms):
            return None
        if join.succeeded():
            with self._lock:
                sync = self._sync_future
                if sync is None:
                    result = join.value
                    if self.state is not MemberState.COMPLETING_REBALANCE or \
                            self.generation != result.generation:
                        self._reset_join_group_future()
                        return False
            if sync is None:
                try:
                    sync = self._on_join_success(join.value)
                except Exception:
                    with self._lock:
                        self._reset_join_group_future()
                        self.request_rejoin("the assignment failed")
                    raise
            if not self._client.poll_until(sync, timer.remaining_ms):
                return None
            future: RequestFuture[Any] = sync
        else:
            future = join
        with self._lock:
            generation, state = self.generation, self.state
            self._reset_join_group_future()
        if future.succeeded():
            if state is MemberState.STABLE and generation.generation_id >= 0:
                self.on_join_complete(generation.generation_id, generation.member_id,
                                      generation.protocol_name, future.value)
                self._needs_join_prepare = True
                return True
            self._reset_state_and_rejoin("the generation was reset while joining")
            return False
        error = future.exception
        if isinstance(error, _JOIN_RETRY_AT_ONCE):
            return False
        if not future.is_retriable():
            raise error
        timer.update()
        if timer.is_expired():
            return None
        self._client.sleep(min(self.retry_backoff_ms, timer.remaining_ms))
        return False

    def _reset_join_group_future(self) -> None:
        with self._lock:
            self._join_future = None
            self._sync_future = None

    def _initiate_join_group(self) -> RequestFuture[JoinResult]:
        with self._lock:
            if self._join_future is None:
                self.state = MemberState.PREPARING_REBALANCE
                self.sensors.rebalance_started(self._time.milliseconds())
                self.heartbeat_thread.disable()
                self._sync_future = None
                self._join_future = self._send_join_group_request()
            return self._join_future

    def _send_join_group_request(self) -> RequestFuture[JoinResult]:
        coordinator = self.check_and_get_coordinator()
        if coordinator is None:
            return RequestFuture.failure(CoordinatorNotAvailableError("coordinator unknown"))
        protocol_cls = JoinGroupRequest.JoinGroupRequestProtocol
        body = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.generation.member_id, group_instance_id=self.group_instance_id,
            protocol_type=self.protocol_type(),
            protocols=[protocol_cls(name=n, metadata=m) for n, m in self.metadata()],
            reason=self.rejoin_reason or None)
        log.info("group %s: (re-)joining group", self.group_id)
        timeout = max(self.request_timeout_ms, self.rebalance_timeout_ms + 5000)
        return self._client.send(coordinator, body, timeout_ms=timeout, max_version=8) \
            .compose(self._handle_join_group)

    def _handle_join_group(self, response: ClientResponse, out: RequestFuture[JoinResult]
                           ) -> None:
        body = response.body
        error = body.error_code
        with self._lock:
            if error == Errors.NONE:
                if self.state is not MemberState.PREPARING_REBALANCE:
                    out.raise_(UnjoinedGroupError("the member left the group while joining"))
                    return
                if body.protocol_type is not None and body.protocol_type != self.protocol_type():
                    out.raise_(InconsistentGroupProtocolError(
                        f"JoinGroup answered protocol type {body.protocol_type}"))
                    return
                self.state = MemberState.COMPLETING_REBALANCE
                self.sensors.join.record(response.request_latency_ms, response.received_ms)
                self.generation = Generation(body.generation_id, body.member_id,
                                             body.protocol_name)
                self.heartbeat_thread.enable()
                log.info("group %s: joined generation %d as %s (leader %s, protocol %s)",
                         self.group_id, body.generation_id, body.member_id, body.leader,
                         body.protocol_name)
                out.complete(JoinResult(self.generation, body.leader, list(body.members)))
                return
            if error != Errors.MEMBER_ID_REQUIRED:  # that one is a step of the protocol
                self.sensors.rebalance_failed(response.received_ms)
            if error == Errors.MEMBER_ID_REQUIRED:
                self.generation = Generation(-1, body.member_id, None)
            elif error == Errors.UNKNOWN_MEMBER_ID:
                self._reset_state_and_generation(reset_member_id=True)
            elif error in _COORDINATOR_ERRORS:
                self.mark_coordinator_unknown(for_code(error).name)
            elif error == Errors.FENCED_INSTANCE_ID:
                log.error("group %s: static member %s was fenced by a newer instance",
                          self.group_id, self.group_instance_id)
            out.raise_(for_code(error)(f"JoinGroup for group {self.group_id}"))

    def _on_join_success(self, result: JoinResult) -> RequestFuture[bytes]:
        """Leader: run the assignor; everyone: send SyncGroup (application thread)."""
        generation = result.generation
        assignments: dict[str, bytes] = {}
        if result.leader_id == generation.member_id:
            assert generation.protocol_name is not None
            assignments = self.perform_assignment(result.leader_id, generation.protocol_name,
                                                  result.members)
        with self._lock:
            future = self._send_sync_group_request(generation, assignments)
            self._sync_future = future
            return future

    def _send_sync_group_request(self, generation: Generation, assignments: dict[str, bytes]
                                 ) -> RequestFuture[bytes]:
        coordinator = self.check_and_get_coordinator()
        if coordinator is None:
            return RequestFuture.failure(CoordinatorNotAvailableError("coordinator unknown"))
        assignment_cls = SyncGroupRequest.SyncGroupRequestAssignment
        body = SyncGroupRequest(
            group_id=self.group_id, generation_id=generation.generation_id,
            member_id=generation.member_id, group_instance_id=self.group_instance_id,
            protocol_type=self.protocol_type(), protocol_name=generation.protocol_name,
            assignments=[assignment_cls(member_id=m, assignment=a)
                         for m, a in assignments.items()])
        timeout = max(self.request_timeout_ms, self.rebalance_timeout_ms + 5000)
        return self._client.send(coordinator, body, timeout_ms=timeout).compose(
            lambda response, out: self._handle_sync_group(response, out, generation))

    def _handle_sync_group(self, response: ClientResponse, out: RequestFuture[bytes],
                           sent: Generation) -> None:
        body = response.body
        error = body.error_code
        with self._lock:
            if error == Errors.NONE:
                if self.generation != sent or self.state is not MemberState.COMPLETING_REBALANCE:
                    out.raise_(UnjoinedGroupError("the generation changed during SyncGroup"))
                    return
                if body.protocol_name is not None and body.protocol_name != sent.protocol_name:
                    out.raise_(InconsistentGroupProtocolError(
                        f"SyncGroup answered protocol {body.protocol_name}, JoinGroup "
                        f"{sent.protocol_name}"))
                    return
                self.state = MemberState.STABLE
                self.rejoin_needed = False
                self.rejoin_reason = ""
                self.sensors.sync.record(response.request_latency_ms, response.received_ms)
                self.sensors.rebalance_completed(self._time.milliseconds())
                log.info("group %s: successfully synced group in generation %d",
                         self.group_id, sent.generation_id)
                out.complete(body.assignment)
                return
            self.sensors.rebalance_failed(response.received_ms)
            self.request_rejoin(f"SyncGroup failed: {for_code(error).name}")
            if error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
                self._reset_state_and_generation(reset_member_id=True)
            elif error in _COORDINATOR_ERRORS:
                self.mark_coordinator_unknown(for_code(error).name)
            out.raise_(for_code(error)(f"SyncGroup for group {self.group_id}"))

    # ------------------------------------------------------------------ generation resets
    def _reset_state_and_generation(self, reset_member_id: bool) -> None:
        with self._lock:
            self.state = MemberState.UNJOINED
            self.generation = NO_GENERATION if reset_member_id else \
                Generation(-1, self.generation.member_id, None)
            self.heartbeat_thread.disable()

    def _reset_state_and_rejoin(self, reason: str, reset_member_id: bool = True) -> None:
        with self._lock:
            self._reset_state_and_generation(reset_member_id)
            self.request_rejoin(reason)
            self._needs_join_prepare = True

    def generation_if_stable(self) -> Generation | None:
        with self._lock:
            return self.generation if self.state is MemberState.STABLE else None

    def rebalance_in_progress(self) -> bool:
        with self._lock:
            return self.state in (MemberState.PREPARING_REBALANCE,
                                  MemberState.COMPLETING_REBALANCE)

    def has_not_joined_group(self) -> bool:
        with self._lock:
            return self.state in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE)

    def is_dynamic_member(self) -> bool:
        return self.group_instance_id is None

    # ------------------------------------------------------------------ heartbeats
    def heartbeat_run_once(self, wait: bool = True) -> bool:
        return self.heartbeat_thread.run_once(wait)

    def send_heartbeat_request(self) -> RequestFuture[None]:
        coordinator = self.check_and_get_coordinator()
        if coordinator is None:
            return RequestFuture.failure(CoordinatorNotAvailableError("coordinator unknown"))
        sent = self.generation
        body = HeartbeatRequest(group_id=self.group_id, generation_id=sent.generation_id,
                                member_id=sent.member_id,
                                group_instance_id=self.group_instance_id)
        self.sensors.heartbeat_sent(self._time.milliseconds())
        return self._client.send(coordinator, body).compose(
            lambda response, out: self._handle_heartbeat(response, out, sent))

    def _handle_heartbeat(self, response: ClientResponse, out: RequestFuture[None],
                          sent: Generation) -> None:
        self.sensors.heartbeat.record(response.request_latency_ms, response.received_ms)
        error = response.body.error_code
        with self._lock:
            if error == Errors.NONE:
                out.complete(None)
                return
            if error in _COORDINATOR_ERRORS:
                self.mark_coordinator_unknown(for_code(error).name)
            elif error == Errors.REBALANCE_IN_PROGRESS:
                if self.state is not MemberState.STABLE:
                    out.complete(None)  # already rebalancing
                    return
                self.request_rejoin("group is already rebalancing")
            elif error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID,
                           Errors.FENCED_INSTANCE_ID):
                if self.generation != sent:
                    out.complete(None)  # a stale answer for an older generation
                    return
                log.info("group %s: heartbeat failed with %s; resetting the generation",
                         self.group_id, for_code(error).name)
                self._reset_state_and_rejoin(f"heartbeat failed: {for_code(error).name}")
            out.raise_(for_code(error)(f"Heartbeat for group {self.group_id}"))

    def poll_heartbeat(self, now_ms: int) -> None:
        """The application polled: restart the poll timer; surface heartbeat failures."""
        with self._lock:
            error = self.heartbeat_thread.take_fatal_error()
            if error is not None:
                raise error
            self.heartbeat.poll(now_ms)
            self._cond.notify_all()

    def time_to_next_poll(self, now_ms: int) -> int:
        """How long the application thread may wait in the network: until the next
        heartbeat is due, so the heartbeat thread never waits long for the network lock."""
        with self._lock:
            if self.state in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE):
                return INT32_MAX
            return self.heartbeat.time_to_next_heartbeat(now_ms)

    # ------------------------------------------------------------------ leaving
    def maybe_leave_group(self, reason: str) -> RequestFuture[None] | None:
        with self._lock:
            future: RequestFuture[None] | None = None
            generation = self.generation
            if self.is_dynamic_member() and self.state is not MemberState.UNJOINED and \
                    generation.member_id and not self.coordinator_unknown():
                coordinator = self._coordinator
                assert coordinator is not None
                log.info("group %s: member %s sending LeaveGroup request to coordinator %s "
                         "due to %s", self.group_id, generation.member_id, coordinator, reason)
                identity = LeaveGroupRequest.MemberIdentity(member_id=generation.member_id,
                                                            reason=reason)
                body = LeaveGroupRequest(group_id=self.group_id,
                                         member_id=generation.member_id, members=[identity])
                future = self._client.send(coordinator, body).compose(self._handle_leave_group)
                self._client.poll_no_wakeup()  # out now, even if nobody else polls soon
            self._reset_state_and_rejoin(f"consumer pro-actively leaving the group: {reason}")
            self._join_future = None
            self._sync_future = None
            return future

    def _handle_leave_group(self, response: ClientResponse, out: RequestFuture[None]) -> None:
        error = response.body.error_code
        if error:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, for_code(error).name)
            out.raise_(for_code(error)("LeaveGroup"))
        else:
            out.complete(None)

    def close(self, timer: Timer) -> None:
        """Leave the group (dynamic members), stop the heartbeat thread, flush requests."""
        self.heartbeat_thread.close()
        with self._lock:
            if self.leave_group_on_close:
                self.on_leave_prepare()
                future = self.maybe_leave_group("the consumer is being closed")
            else:
                future = None
        if future is not None:
            self._client.poll_until(future, timer.remaining_ms)
