"""What a request costs against the client quotas, and the response a throttled client
gets (the quota half of Kafka's ``KafkaApis`` / ``RequestHandlerHelper``, KIP-219).

The network layer calls ``cap_fetch`` before a handler runs and ``charge`` after it
returns, only while some quota is configured (``ClientQuotas.enabled``).  ``charge``
records the request's usage for the principal's user name and the request's client id:

* Produce: its record bytes against ``producer_byte_rate`` (Kafka counts the whole
  request; the header and partition framing around the records are a few dozen bytes),
  and its handler time against ``request_percentage`` unless ``acks=0``.
* Fetch from a consumer: the encoded response size against ``consumer_byte_rate``, and
  the handler time.  When either quota is violated the answer carries no data -- no
  topics at all, as Kafka's ``FetchContext.getThrottledResponse`` -- and the bytes are
  taken back, so a throttled consumer is not charged for what it did not get.
  ``cap_fetch`` first lowers the request's ``max_bytes`` to what one quota window can
  carry (Kafka's ``getMaxValueInQuotaWindow``), or a consumer whose every response
  exceeds it would be throttled forever.
* Any other request: its handler time.
* Exempt (Kafka's ``sendResponseExemptThrottle``): the inter-broker APIs (LeaderAndIsr,
  StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers, AlterPartition) and
  follower fetches (a replica id >= 0), when the principal may ClusterAction the
  cluster -- a client forging a replica id does not escape its quotas.

Handler time is the time the event loop spends *running* the handler's coroutine
(``TimedCoroutine`` times each step; time parked in a purgatory or awaiting a write is
not counted, as Kafka counts request-thread time, not waiting).  The throttle time goes
into the response's ``throttle_time_ms`` and the network layer then mutes the connection
for that long.  Kafka answers at once and mutes for every request version:
``shouldClientThrottle(version)`` is only the Java client's choice of whether to also
back off itself; the broker never holds a response back.
"""

from __future__ import annotations

import time as _time
from collections.abc import Awaitable, Generator
from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.quota.client_quota_manager import NANOS_TO_PERCENT, ClientQuotas
from millrace.protocol import API, ApiKey, Request, ServerConnection
from millrace.security.acl import CLUSTER_NAME, AclOperation, ResourceType

CLUSTER_ACTION_APIS = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION})
"""Kafka's ``ApiKeys`` with ``clusterAction``: sent by brokers, exempt from quotas."""

HAS_THROTTLE_FIELD = frozenset(
    key for key, api in API.items()
    if any(f.name == "throttle_time_ms" for f in api.response.message.fields))


class TimedCoroutine:
    """Await ``awaitable`` (a handler's coroutine) while adding the time spent running
    it -- not waiting -- to ``elapsed_ns``: each step it takes is timed, as a task steps
    it."""

    __slots__ = ("_awaitable", "elapsed_ns")

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable
        self.elapsed_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._awaitable.__await__()
        clock = _time.perf_counter_ns
        value: Any = None
        error: BaseException | None = None
        while True:
            started = clock()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.elapsed_ns += clock() - started
                return done.value
            except BaseException:
                self.elapsed_ns += clock() - started
                raise
            self.elapsed_ns += clock() - started
            try:
                value = yield yielded
                error = None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # a cancellation: into the handler, as await does
                value, error = None, e


def _exempt(ctx: RequestContext) -> bool:
    """May the principal ClusterAction (the broker's own principals)?  Asked only for the
    inter-broker requests, silently (the handler logs its own decision)."""
    return ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME,
                         log_if_allowed=False, log_if_denied=False)


def _replica_id(request: Request) -> int:
    body = request.body
    return int(body.replica_id if request.version <= 14 else body.replica_state.replica_id)


def cap_fetch(quotas: ClientQuotas, ctx: RequestContext, request: Request) -> None:
    """Lower a consumer Fetch's ``max_bytes`` to one quota window's worth."""
    fetch = quotas.fetch
    if request.api.key != ApiKey.FETCH or not fetch.enabled or _replica_id(request) >= 0:
        return
    cap = fetch.max_value_in_quota_window(ctx.principal.name, ctx.client_id)
    if cap < request.body.max_bytes:
        request.body.max_bytes = max(int(cap), 1)


def produce_size(body: Any) -> int:
    """The record bytes of a Produce request."""
    size = 0
    for topic in body.topic_data:
        for partition in topic.partition_data:
            if partition.records is not None:
                size += len(partition.records)
    return size


def charge(quotas: ClientQuotas, ctx: RequestContext, request: Request, body: Any,
           handler: TimedCoroutine | None, now_ms: int) -> tuple[int, list[Any]]:
    """Record the request's usage; returns (throttle time in ms, the encoded response:
    its frame parts, none when there is no response).  See the module docstring."""
    key = request.api.key
    user, client_id = ctx.principal.name, ctx.client_id
    if key in CLUSTER_ACTION_APIS and _exempt(ctx):
        return 0, _encode(request, body)
    request_quota = quotas.request
    throttle_ms = 0
    if key == ApiKey.FETCH:
        if _replica_id(request) >= 0 and _exempt(ctx):
            return 0, _encode(request, body)
        if handler is not None and request_quota.enabled:
            throttle_ms = request_quota.record_and_get_throttle_time_ms(
                user, client_id, handler.elapsed_ns * NANOS_TO_PERCENT, now_ms)
        parts = _encode(request, body)
        fetch = quotas.fetch
        if fetch.enabled and fetch.limits(user, client_id):
            size = sum(len(part) for part in parts)
            fetch_ms = fetch.record_and_get_throttle_time_ms(user, client_id, size, now_ms)
            throttle_ms = max(throttle_ms, fetch_ms)
            if throttle_ms > 0:
                fetch.unrecord(user, client_id, size, now_ms)
        if throttle_ms == 0:
            return 0, parts
        throttled = type(body)(throttle_time_ms=throttle_ms, error_code=body.error_code,
                               session_id=body.session_id, responses=[])
        return throttle_ms, _encode(request, throttled)
    if key == ApiKey.PRODUCE:
        produce = quotas.produce
        if produce.enabled and produce.limits(user, client_id):
            throttle_ms = produce.record_and_get_throttle_time_ms(
                user, client_id, produce_size(request.body), now_ms)
        if request.body.acks == 0:
            handler = None  # the request quota does not apply to acks=0
    if handler is not None and request_quota.enabled:
        throttle_ms = max(throttle_ms, request_quota.record_and_get_throttle_time_ms(
            user, client_id, handler.elapsed_ns * NANOS_TO_PERCENT, now_ms))
    if throttle_ms and body is not None and key in HAS_THROTTLE_FIELD:
        body.throttle_time_ms = throttle_ms
    return throttle_ms, _encode(request, body)


def _encode(request: Request, body: Any) -> list[Any]:
    return [] if body is None else ServerConnection.encode_response_chunks(request, body)
