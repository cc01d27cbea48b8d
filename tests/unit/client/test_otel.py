"""millrace.client.otel without a network: the extra's absence, the provider rule, ids."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from millrace.client import otel
from millrace.client.tracing import RecordJourney


def test_without_opentelemetry_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    otel._otel.cache_clear()
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails
    try:
        with pytest.raises(otel.MissingExtraError, match=r"pip install 'millrace\[otel\]'"):
            otel.export_journey(RecordJourney.start())
    finally:
        otel._otel.cache_clear()


def test_a_provider_with_another_id_generator_is_refused() -> None:
    with pytest.raises(ValueError, match="journey_id_generator"):
        otel.export_journey(RecordJourney.start(), (), TracerProvider())


def test_the_span_takes_the_journeys_ids_and_later_spans_do_not() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=otel.journey_id_generator())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    journey = RecordJourney.start()
    journey.topic = "t"
    journey.add("producer.serialize", 5, lane="producer", duration_us=2, key_bytes=-1)
    otel.export_journey(journey, (), provider)
    with provider.get_tracer("other").start_as_current_span("unrelated"):
        pass
    sent, unrelated = exporter.get_finished_spans()
    assert (f"{sent.context.trace_id:032x}", f"{sent.context.span_id:016x}") == \
        (journey.trace_id, journey.span_id)
    assert sent.parent is None and sent.name == "send t"
    assert f"{unrelated.context.span_id:016x}" != journey.span_id
    assert f"{unrelated.context.trace_id:032x}" != journey.trace_id
    (event,) = sent.events
    assert (event.name, event.timestamp, dict(event.attributes or {})) == (
        "producer.serialize", 5000,
        {"duration_us": 2, "lane": "producer", "detail": "", "key_bytes": -1})


def test_the_consumer_interceptor_keeps_at_most_max_pending_polls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Polls whose traced records no commit has covered yet are bounded: the oldest go
    first, and a commit then makes a span for each poll still kept."""
    from millrace.client.cluster import TopicPartition
    from millrace.client.consumer.consumer_record import (
        ConsumerRecord,
        ConsumerRecords,
        OffsetAndMetadata,
    )

    monkeypatch.setattr(otel.TracingConsumerInterceptor, "MAX_PENDING", 3)
    exporter = InMemorySpanExporter()
    interceptor = otel.TracingConsumerInterceptor()
    interceptor._group, interceptor._client_id = "g", "c"
    interceptor._provider = otel.journey_tracer_provider(exporter, batch=False)
    tp = TopicPartition("t", 0)
    for offset in range(5):
        header = RecordJourney.start().traceparent.encode()
        plain = ConsumerRecord("t", 0, 100 + offset)   # no header: no link
        records = ConsumerRecords({tp: [ConsumerRecord("t", 0, offset,
                                                       headers=[("traceparent", header)]),
                                        plain]})
        assert interceptor.on_consume(records) is records
    polls = [s for s in exporter.get_finished_spans() if s.name == "poll t"]
    assert len(polls) == 5 and all(len(s.links) == 1 for s in polls)
    assert polls[0].attributes is not None
    assert polls[0].attributes["messaging.batch.message_count"] == 2
    interceptor.on_commit({tp: OffsetAndMetadata(3)})   # covers offsets 0..2: one kept
    interceptor.on_commit({tp: OffsetAndMetadata(99)})  # the other two
    commits = [s for s in exporter.get_finished_spans() if s.name == "commit t"]
    kept = {p.context.span_id for p in polls[2:]}
    assert [s.parent.span_id for s in commits if s.parent is not None] == \
        [p.context.span_id for p in polls[2:]]
    assert {s.parent.span_id for s in commits if s.parent is not None} == kept
    interceptor.close()
