"""A record's journey as OpenTelemetry spans (the optional ``otel`` extra).

``export_journey(journey, broker_events, tracer_provider)`` turns one ``RecordJourney``
(``millrace.client.tracing``) into spans after OpenTelemetry's messaging conventions
for Kafka (semconv messaging-spans / kafka; the "send" step of the span model):

- one PRODUCER span ``send <topic>`` whose trace id and span id *are* the journey's, so
  the ``traceparent`` the record carried in its header names this exported span (and a
  consumer's span linking to the header finds it).  Its parent is the span the record's
  original ``traceparent`` named, if any.  Attributes: ``messaging.system=kafka``,
  ``messaging.destination.name``, ``messaging.destination.partition.id`` (a string),
  ``messaging.kafka.offset``, ``messaging.client.id``, ``messaging.operation.type`` and
  ``messaging.operation.name`` (``send``), ``server.address`` / ``server.port`` (the
  connection the request went out on), ``error.type`` and an error status on failure;
  it starts at the first stage and ends when the callback returned;
- each stage as a span event at its own time, named as the stage, its fields as
  attributes (``duration_us``, ``lane``, ``detail``, ...);
- each broker event (``{"t_us", "stage", "broker", "detail", ...}``, as millrace brokers
  record them for traced records) as an INTERNAL child span ``broker <stage>``.

Getting OpenTelemetry's SDK to use ids it did not generate: spans are started through
an ordinary SDK ``Tracer`` (so the provider's sampler, resource, limits and span
processors all apply) whose provider was built with ``journey_id_generator()``: an
``IdGenerator`` that hands out the journey's ids for the one span being started on this
thread and random ids otherwise.  ``journey_tracer_provider()`` builds such a provider
with an OTLP/HTTP exporter (configured by the usual ``OTEL_EXPORTER_OTLP_*`` variables
unless given one); a provider built another way is refused with an error saying so.

OpenTelemetry is imported on first use; without it, a ``MissingExtraError`` names the
extra to install.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.consumer_record import ConsumerRecords, OffsetAndMetadata
from millrace.client.consumer.interceptor import ConsumerInterceptor
from millrace.client.tracing import RecordJourney, find_traceparent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "MissingExtraError",
    "export_journey",
    "journey_id_generator",
    "journey_tracer_provider",
]

INSTRUMENTATION_NAME = "millrace.client"
_HINT = ("OpenTelemetry export needs the optional extra: pip install 'millrace[otel]' "
         "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)")


class MissingExtraError(ImportError):
    """An optional dependency of millrace is not installed."""


@cache
def _otel() -> Any:
    """The OpenTelemetry modules, imported once; the id generator class built on them."""
    try:
        from opentelemetry import context, trace
        from opentelemetry.sdk import trace as sdk_trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import export
        from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
    except ImportError as e:
        raise MissingExtraError(_HINT) from e

    class JourneyIdGenerator(IdGenerator):
        """Random ids, except the ones queued for the next span on this thread."""

        millrace_journey_ids = True

        def __init__(self) -> None:
            self._random = RandomIdGenerator()
            self._next = threading.local()

        @contextmanager
        def next_ids(self, trace_id: int | None, span_id: int) -> Iterator[None]:
            self._next.trace_id, self._next.span_id = trace_id, span_id
            try:
                yield
            finally:
                self._next.trace_id = self._next.span_id = None

        def generate_span_id(self) -> int:
            span_id = getattr(self._next, "span_id", None)
            if span_id is None:
                return self._random.generate_span_id()
            self._next.span_id = None
            return int(span_id)

        def generate_trace_id(self) -> int:
            trace_id = getattr(self._next, "trace_id", None)
            if trace_id is None:
                return self._random.generate_trace_id()
            self._next.trace_id = None
            return int(trace_id)

        def is_trace_id_random(self) -> bool:
            return True  # RecordJourney's ids are random too

    return SimpleNamespace(context=context, trace=trace, sdk_trace=sdk_trace, export=export,
                           Resource=Resource, JourneyIdGenerator=JourneyIdGenerator)


def journey_id_generator() -> Any:
    """An OpenTelemetry ``IdGenerator`` that ``export_journey`` can steer: pass it as
    ``TracerProvider(id_generator=...)`` to export journeys through your own provider."""
    return _otel().JourneyIdGenerator()


def journey_tracer_provider(exporter: SpanExporter | None = None, *,
                            service_name: str = "millrace", batch: bool = True,
                            resource_attributes: Mapping[str, Any] | None = None
                            ) -> TracerProvider:
    """A ``TracerProvider`` for journeys: ``journey_id_generator()`` and one span
    processor (batching unless ``batch=False``) feeding ``exporter`` -- by default an
    ``OTLPSpanExporter`` (OTLP over HTTP, ``OTEL_EXPORTER_OTLP_*`` settings)."""
    ot = _otel()
    if exporter is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
        except ImportError as e:
            raise MissingExtraError(_HINT) from e
        exporter = OTLPSpanExporter()
    resource = ot.Resource.create({"service.name": service_name,
                                   **(resource_attributes or {})})
    provider = ot.sdk_trace.TracerProvider(id_generator=ot.JourneyIdGenerator(),
                                           resource=resource)
    processor = (ot.export.BatchSpanProcessor(exporter) if batch
                 else ot.export.SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    return provider


_default_lock = threading.Lock()
_default_provider: Any = None  # guarded by _default_lock


def _default() -> Any:
    global _default_provider
    with _default_lock:
        if _default_provider is None:
            _default_provider = journey_tracer_provider()
        return _default_provider


def _attribute(value: Any) -> Any:
    """A value OpenTelemetry accepts as an attribute (None: leave it out)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple) and (
            all(isinstance(v, str) for v in value)
            or all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        return list(value)
    return str(value)


def _attributes(fields: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, Any]:
    skipped = set(skip)
    out = {}
    for key, value in fields.items():
        if key in skipped:
            continue
        converted = _attribute(value)
        if converted is not None:
            out[key] = converted
    return out


def send_span_attributes(journey: RecordJourney) -> dict[str, Any]:
    """The PRODUCER span's attributes (semconv messaging, Kafka)."""
    attributes: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
    }
    if journey.topic is not None:
        attributes["messaging.destination.name"] = journey.topic
    if journey.partition is not None:
        attributes["messaging.destination.partition.id"] = str(journey.partition)
    if journey.offset is not None and journey.offset >= 0:
        attributes["messaging.kafka.offset"] = journey.offset
    if journey.client_id:
        attributes["messaging.client.id"] = journey.client_id
    responses = []
    for stage in journey.stages:
        if stage["stage"] == "request.sent" and stage.get("address"):
            host, _, port = str(stage["address"]).rpartition(":")
            attributes["server.address"] = host
            if port.isdigit():
                attributes["server.port"] = int(port)
        elif stage["stage"] == "response.received":
            responses.append(stage.get("error"))
    if journey.error is not None:
        # the broker's error name when it answered with one, else the client's exception
        last = responses[-1] if responses else None
        attributes["error.type"] = last if last not in (None, "NONE") else journey.error
    return attributes


def export_journey(journey: RecordJourney, broker_events: Iterable[Mapping[str, Any]] = (),
                   tracer_provider: Any = None) -> None:
    """Export ``journey`` (and the brokers' events for it) as spans; see the module doc.

    ``tracer_provider``: one made by ``journey_tracer_provider`` or with
    ``id_generator=journey_id_generator()``; None: a process-wide one exporting over
    OTLP/HTTP, flushed before this returns."""
    ot = _otel()
    trace = ot.trace
    flush = tracer_provider is None
    provider = _default() if tracer_provider is None else tracer_provider
    ids: Any = getattr(provider, "id_generator", None)
    if not getattr(ids, "millrace_journey_ids", False):
        raise ValueError("export_journey needs a TracerProvider built with "
                         "id_generator=journey_id_generator() (or journey_tracer_provider()), "
                         "so the exported span has the id the record's traceparent names")
    from millrace import __version__

    tracer = provider.get_tracer(INSTRUMENTATION_NAME, __version__)
    stages = journey.stages
    trace_id, span_id = int(journey.trace_id, 16), int(journey.span_id, 16)
    if journey.parent_span_id is not None:
        parent = trace.NonRecordingSpan(trace.SpanContext(
            trace_id, int(journey.parent_span_id, 16), is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)))
        parent_context = trace.set_span_in_context(parent, ot.context.Context())
        root_trace_id = None
    else:
        parent_context = ot.context.Context()  # a root: never the caller's current span
        root_trace_id = trace_id
    start_us = min((s["t_us"] for s in stages), default=None)
    end_us = max((s["t_us"] + s.get("duration_us", 0) for s in stages), default=None)
    topic = journey.topic or "unknown"
    with ids.next_ids(root_trace_id, span_id):
        span = tracer.start_span(
            f"send {topic}", context=parent_context, kind=trace.SpanKind.PRODUCER,
            attributes=send_span_attributes(journey),
            start_time=None if start_us is None else start_us * 1000)
    context = span.get_span_context()
    if span.is_recording() and (context.trace_id, context.span_id) != (trace_id, span_id):
        raise RuntimeError("the tracer provider did not take the journey's ids")
    for stage in stages:
        span.add_event(stage["stage"], _attributes(stage, ("stage", "t_us")),
                       timestamp=stage["t_us"] * 1000)
    child_context = trace.set_span_in_context(span, ot.context.Context())
    for event in broker_events:
        t_us = int(event["t_us"])
        child = tracer.start_span(
            f"broker {event['stage']}", context=child_context, kind=trace.SpanKind.INTERNAL,
            attributes=_attributes({"messaging.system": "kafka",
                                    "millrace.broker.id": event.get("broker"),
                                    **{f"millrace.{k}": v for k, v in event.items()
                                       if k not in ("t_us", "stage", "broker")}}),
            start_time=t_us * 1000)
        child.end(end_time=(t_us + int(event.get("duration_us", 0) or 0)) * 1000)
        if end_us is not None:
            end_us = max(end_us, t_us)
    if journey.error is not None:
        description = next((s.get("detail") for s in stages
                            if s["stage"] == "producer.callback" and s.get("error")), None)
        span.set_status(trace.Status(trace.StatusCode.ERROR, description or journey.error))
    span.end(end_time=None if end_us is None else end_us * 1000)
    if flush:
        provider.force_flush()


def export_consumed(trace_id: str, span_id: str, *, topic: str, partition: int,
                    offset: int, group: str | None, client_id: str | None,
                    stages: Iterable[Mapping[str, Any]], tracer_provider: Any) -> None:
    """A consumer's part of a record's journey as spans (semconv's span model): a CLIENT
    span ``poll <topic>`` *linked* to the record's creation context (``trace_id`` /
    ``span_id``, from its ``traceparent``), and a CLIENT span ``commit <topic>`` as its
    child, each timed by the ``consumer.poll`` / ``consumer.commit`` stage (dicts with
    ``t_us`` and ``duration_us``).  Links, not parent-child: a poll may return records of
    many traces.  The spans get fresh ids (the provider's own)."""
    ot = _otel()
    trace = ot.trace
    from millrace import __version__

    tracer = tracer_provider.get_tracer(INSTRUMENTATION_NAME, __version__)
    creation = trace.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                                 trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    by_stage = {stage["stage"]: stage for stage in stages}
    common = {"messaging.system": "kafka", "messaging.destination.name": topic,
              "messaging.destination.partition.id": str(partition),
              "messaging.kafka.offset": offset}
    if group:
        common["messaging.consumer.group.name"] = group
    if client_id:
        common["messaging.client.id"] = client_id
    poll = by_stage.get("consumer.poll")
    if poll is None:
        return
    start = int(poll["t_us"]) - int(poll.get("duration_us", 0) or 0)
    span = tracer.start_span(
        f"poll {topic}", context=ot.context.Context(), kind=trace.SpanKind.CLIENT,
        links=[trace.Link(creation)], start_time=start * 1000,
        attributes={**common, "messaging.operation.type": "receive",
                    "messaging.operation.name": "poll", "messaging.batch.message_count": 1})
    span.end(end_time=int(poll["t_us"]) * 1000)
    commit = by_stage.get("consumer.commit")
    if commit is not None:
        t_us = int(commit["t_us"])
        child = tracer.start_span(
            f"commit {topic}", context=trace.set_span_in_context(span, ot.context.Context()),
            kind=trace.SpanKind.CLIENT, start_time=t_us * 1000,
            attributes={**common, "messaging.operation.type": "settle",
                        "messaging.operation.name": "commit"})
        child.end(end_time=(t_us + int(commit.get("duration_us", 0) or 0)) * 1000)


class TracingConsumerInterceptor(ConsumerInterceptor):
    """The consumer's spans for traced records, as an interceptor: ``interceptor.classes
    = millrace.client.otel.TracingConsumerInterceptor`` on any millrace consumer.

    - ``on_consume``: for each topic among the records a poll returns that has records
      with a valid ``traceparent``, a CLIENT span ``poll <topic>`` *linked* to each such
      record's creation context (semconv's span model: a poll returns many traces);
      attributes ``messaging.system``, ``messaging.destination.name``,
      ``messaging.consumer.group.name``, ``messaging.client.id``,
      ``messaging.operation.type=receive``, ``messaging.operation.name=poll``,
      ``messaging.batch.message_count``.  Records without the header cost a look at
      their headers and nothing else.
    - ``on_commit``: a CLIENT span ``commit <topic>``, child of the poll span, for each
      poll whose traced records a committed offset now covers.
    - ``close``: flushes and shuts down its exporter.

    Spans go over OTLP/HTTP (the ``OTEL_EXPORTER_OTLP_*`` variables say where), through
    a provider of the interceptor's own (``service.name`` the consumer's ``client.id``);
    at most ``MAX_PENDING`` polls wait for their commit (the oldest are dropped)."""

    MAX_PENDING = 1000

    def __init__(self) -> None:
        self._provider: Any = None
        self._group: str | None = None
        self._client_id: str | None = None
        # (topic, partition) -> [(highest traced offset, the poll span's context)]
        self._pending: dict[tuple[str, int], list[tuple[int, Any]]] = {}
        self._count = 0

    def configure(self, configs: Mapping[str, Any]) -> None:
        self._group = configs.get("group.id") or None
        self._client_id = configs.get("client.id") or None
        self._provider = journey_tracer_provider(
            service_name=str(self._client_id or "millrace-consumer"))

    def on_consume(self, records: ConsumerRecords[Any, Any]) -> ConsumerRecords[Any, Any]:
        traced: dict[str, list[tuple[Any, tuple[str, str, int]]]] = {}
        counts: dict[str, int] = {}
        for record in records:
            counts[record.topic] = counts.get(record.topic, 0) + 1
            if record.headers:
                context = find_traceparent(record.headers)
                if context is not None:
                    traced.setdefault(record.topic, []).append((record, context))
        if traced and self._provider is not None:
            self._polled(traced, counts)
        return records

    def _polled(self, traced: Mapping[str, list[tuple[Any, tuple[str, str, int]]]],
                counts: Mapping[str, int]) -> None:
        ot = _otel()
        trace = ot.trace
        from millrace import __version__

        tracer = self._provider.get_tracer(INSTRUMENTATION_NAME, __version__)
        for topic, found in traced.items():
            links = [trace.Link(trace.SpanContext(
                int(trace_id, 16), int(span_id, 16), is_remote=True,
                trace_flags=trace.TraceFlags(flags & 1))) for _, (trace_id, span_id, flags)
                in found]
            span = tracer.start_span(
                f"poll {topic}", context=ot.context.Context(), kind=trace.SpanKind.CLIENT,
                links=links, attributes=self._attributes(topic, {
                    "messaging.operation.type": "receive",
                    "messaging.operation.name": "poll",
                    "messaging.batch.message_count": counts[topic]}))
            span.end()
            highest: dict[int, int] = {}
            for record, _ in found:
                highest[record.partition] = max(highest.get(record.partition, -1),
                                                record.offset)
            for partition, offset in highest.items():
                self._pending.setdefault((topic, partition), []).append(
                    (offset, span.get_span_context()))
                self._count += 1
        while self._count > self.MAX_PENDING:   # the oldest poll of the fullest partition
            key = max(self._pending, key=lambda k: len(self._pending[k]))
            self._pending[key].pop(0)
            self._count -= 1
            if not self._pending[key]:
                del self._pending[key]

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if not self._pending or self._provider is None:
            return
        ot = _otel()
        trace = ot.trace
        from millrace import __version__

        tracer = self._provider.get_tracer(INSTRUMENTATION_NAME, __version__)
        for tp, committed in offsets.items():
            waiting = self._pending.get((tp.topic, tp.partition))
            if not waiting:
                continue
            covered = [(o, c) for o, c in waiting if o < committed.offset]
            if not covered:
                continue
            self._pending[(tp.topic, tp.partition)] = [(o, c) for o, c in waiting
                                                       if o >= committed.offset]
            self._count -= len(covered)
            for _, poll_context in covered:
                parent = trace.set_span_in_context(trace.NonRecordingSpan(poll_context),
                                                   ot.context.Context())
                tracer.start_span(
                    f"commit {tp.topic}", context=parent, kind=trace.SpanKind.CLIENT,
                    attributes=self._attributes(tp.topic, {
                        "messaging.operation.type": "settle",
                        "messaging.operation.name": "commit",
                        "messaging.destination.partition.id": str(tp.partition),
                        "messaging.kafka.offset": committed.offset})).end()

    def _attributes(self, topic: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"messaging.system": "kafka",
                               "messaging.destination.name": topic, **extra}
        if self._group:
            out["messaging.consumer.group.name"] = self._group
        if self._client_id:
            out["messaging.client.id"] = self._client_id
        return out

    def close(self) -> None:
        if self._provider is not None:
            self._provider.force_flush(10_000)
            self._provider.shutdown()
            self._provider = None
