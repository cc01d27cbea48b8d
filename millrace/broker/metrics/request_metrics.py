"""Per-request metrics (Kafka's ``RequestChannel.Metrics`` and
``RequestChannel.updateRequestMetrics``): how many requests of each API and version,
how many answers carried each error code, and where each request's time went.

Phases (reference observability.md 1.2), on millrace's one event loop:

=====================  =============================================================
``RequestQueueTimeMs``  the request was whole (``data_received``) → its connection's
                        worker took it up (requests of one connection are served in
                        order, so this is time spent behind the ones before it)
``LocalTimeMs``         the handler ran: until it parked in a purgatory, plus the
                        handler's work after it was woken (Kafka counts that callback
                        time as local too); the whole handler if it never parked
``RemoteTimeMs``        parked in a purgatory: an ``acks=all`` produce waiting for the
                        ISR, a fetch waiting for ``fetch.min.bytes``
``ThrottleTimeMs``      the client-quota throttle given in the response (KIP-219)
``ResponseQueueTimeMs`` the handler returned → the response was encoded and handed to
                        the transport
``ResponseSendTimeMs``  handed to the transport → written (a file region's
                        ``sendfile`` awaited; a buffered write counts as sent)
``TotalTimeMs``         whole → sent
=====================  =============================================================

A handler does not know its request's ``RequestTimes``: the network layer puts it in the
``CURRENT_REQUEST`` context variable of the connection's worker task, and
``DelayedOperation.wait`` marks the park and the wake-up on it.

Each is a histogram ``kafka.network:type=RequestMetrics,name=<phase>,request=<api>``;
a Fetch is recorded under ``Fetch`` and under ``FetchConsumer`` or ``FetchFollower``
(replica id ≥ 0), its ``RequestsPerSec`` as well as its phases (errors under ``Fetch``
only, as Kafka).  ``RequestsPerSec,request=<api>,version=<v>`` (KIP-272) and
``ErrorsPerSec,request=<api>,error=<ERROR_NAME>`` are meters; the error counts come from
every ``error_code`` field in the response body (``NONE`` counts the successes), as
Kafka's ``AbstractResponse.errorCounts``.  All of it is per request (the error walk is
per partition of the response), nothing per record.

Thread ownership: the event-loop thread.
"""

from __future__ import annotations

import contextvars
import time as _time
from collections.abc import Callable
from typing import Any

from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.yammer import Histogram, Meter
from millrace.common.errors import Errors
from millrace.protocol import API, ApiKey
from millrace.protocol.schema import Field

PHASES = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ThrottleTimeMs",
          "ResponseQueueTimeMs", "ResponseSendTimeMs", "TotalTimeMs")

clock: Callable[[], float] = _time.perf_counter


class RequestTimes:
    """The instants of one request's life, in ``clock()`` seconds (module docstring)."""

    __slots__ = ("arrived", "dequeued", "handled", "parked", "remote_s", "sent", "throttle_ms",
                 "woken", "written")

    def __init__(self, arrived: float) -> None:
        self.arrived = arrived
        self.dequeued = arrived
        self.parked = 0.0  # when the handler first parked in a purgatory (0: never)
        self.woken = 0.0
        self.remote_s = 0.0  # total time parked
        self.handled = 0.0
        self.written = 0.0
        self.sent = 0.0
        self.throttle_ms = 0

    def park(self) -> None:
        self.parked = clock()

    def wake(self) -> None:
        if self.parked:
            self.remote_s += clock() - self.parked
            self.parked = 0.0


CURRENT_REQUEST: contextvars.ContextVar[RequestTimes | None] = contextvars.ContextVar(
    "millrace_current_request", default=None)


# --- error counts ------------------------------------------------------------------------

_Walker = Callable[[Any, dict[int, int]], None]


def _compile(fields: tuple[Field, ...], version: int) -> _Walker | None:
    """A function adding every ``error_code`` of a struct (and its nested structs) to
    a count; None when the struct holds no error code at any depth.  Only the fields
    of ``version``: one the version lacks holds its default (a Metadata v12 response
    has no top-level ``error_code``; counting its 0 would add a NONE)."""
    fields = tuple(f for f in fields if f.present_in(version))
    has_error = any(f.name == "error_code" for f in fields)
    nested: list[tuple[str, bool, _Walker]] = []
    for f in fields:
        if f.is_struct and f.fields:
            walk = _compile(f.fields, version)
            if walk is not None:
                nested.append((f.name, f.is_array, walk))
    if not has_error and not nested:
        return None

    def walk_struct(obj: Any, counts: dict[int, int]) -> None:
        if has_error:
            code = obj.error_code
            counts[code] = counts.get(code, 0) + 1
        for name, is_array, walk in nested:
            value = getattr(obj, name)
            if value is None:
                continue
            if is_array:
                for item in value:
                    walk(item, counts)
            else:
                walk(value, counts)

    return walk_struct


_WALKERS: dict[tuple[int, int], _Walker | None] = {}


def error_counts(api_key: int, version: int, body: Any) -> dict[int, int]:
    """Every error code in a response body of ``version`` and how often it occurs."""
    try:
        walk = _WALKERS[(api_key, version)]
    except KeyError:
        walk = _WALKERS[(api_key, version)] = _compile(
            API[api_key].response.message.fields, version)
    counts: dict[int, int] = {}
    if walk is not None and body is not None and not isinstance(body, bytes | bytearray):
        walk(body, counts)
    return counts


def error_name(code: int) -> str:
    member = Errors._value2member_map_.get(code)
    return member.name if member is not None else "UNKNOWN_SERVER_ERROR"


# --- the metrics ---------------------------------------------------------------------------

class _ApiMetrics:
    __slots__ = ("errors", "name", "phases", "requests")

    def __init__(self, registry: KafkaMetricsRegistry, name: str) -> None:
        self.name = name
        self.phases = tuple(registry.histogram("kafka.network", "RequestMetrics", phase,
                                               {"request": name}) for phase in PHASES)
        self.requests: dict[int, Meter] = {}
        self.errors: dict[int, Meter] = {}


class RequestMetrics:
    """Records each completed request (module docstring); owned by the event loop."""

    def __init__(self, registry: KafkaMetricsRegistry) -> None:
        self.registry = registry
        self._apis: dict[str, _ApiMetrics] = {}

    def _api(self, name: str) -> _ApiMetrics:
        metrics = self._apis.get(name)
        if metrics is None:
            metrics = self._apis[name] = _ApiMetrics(self.registry, name)
        return metrics

    def record(self, api_key: int, api_name: str, version: int, body: Any,
               times: RequestTimes, *, follower: bool | None = None) -> None:
        """One request answered: its rate, the error codes of ``body`` and its phases.
        ``follower`` (Fetch only): a replica's fetch (True) or a consumer's (False)."""
        metrics = self._api(api_name)
        self._requests(metrics, version).mark()
        for code, n in error_counts(api_key, version, body).items():
            errors = metrics.errors.get(code)
            if errors is None:
                errors = metrics.errors[code] = self.registry.meter(
                    "kafka.network", "RequestMetrics", "ErrorsPerSec",
                    {"request": api_name, "error": error_name(code)})
            errors.mark(n)
        handled = times.handled or times.dequeued
        remote = times.remote_s * 1000
        values = ((times.dequeued - times.arrived) * 1000,
                  max(0.0, (handled - times.dequeued) * 1000 - remote),
                  remote,
                  float(times.throttle_ms),
                  ((times.written or handled) - handled) * 1000,
                  ((times.sent or times.written or handled) - (times.written or handled)) * 1000,
                  ((times.sent or times.written or handled) - times.arrived) * 1000)
        self._update(metrics.phases, values)
        if follower is not None:  # as Kafka: the request rate and the phases again
            fetch = self._api("FetchFollower" if follower else "FetchConsumer")
            self._requests(fetch, version).mark()
            self._update(fetch.phases, values)

    def _requests(self, metrics: _ApiMetrics, version: int) -> Meter:
        meter = metrics.requests.get(version)
        if meter is None:
            meter = metrics.requests[version] = self.registry.meter(
                "kafka.network", "RequestMetrics", "RequestsPerSec",
                {"request": metrics.name, "version": version})
        return meter

    @staticmethod
    def _update(histograms: tuple[Histogram, ...], values: tuple[float, ...]) -> None:
        for histogram, value in zip(histograms, values):
            histogram.update(value)


def is_follower_fetch(api_key: int, body: Any) -> bool | None:
    """For a Fetch: whether a replica sent it (its replica id, in the body before v15 and
    in ``replica_state`` since); None for other APIs."""
    if api_key != ApiKey.FETCH:
        return None
    replica_id = body.replica_id
    if replica_id < 0:
        state = getattr(body, "replica_state", None)
        if state is not None:
            replica_id = state.replica_id
    return replica_id >= 0
