"""The producer's side of a traced record (``KafkaProducer.send_traced``).

A traced record carries its ``RecordJourney`` (``millrace.client.tracing``) down the full
Python ``send``: ``_send`` adds the application-thread stages, ``RecordAccumulator.append``
hands the record's batch to ``AppendTrace.landed`` under its lock, which hangs the
journey on the batch (``ProducerBatch.journeys``: ``(journey, index in batch)`` pairs,
None for a batch without traced records).  From there the Sender thread sees it: every
sender-side hook is behind ``if batch.journeys is not None``, so an untraced batch costs
one attribute test per drain, request and response.  The callback stage comes from
``JourneyCallback``, which wraps the user's callback (a traced record always has one, so
it is among the batch's callback futures and hears of every outcome: success, error,
expiry, abort).

Thread ownership: ``AppendTrace`` runs on the application thread holding the
accumulator's lock; the other hooks on the Sender thread.  Stages go into the journey
under its own lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from millrace.client.tracing import (
    TRACEPARENT,
    RecordJourney,
    find_traceparent,
    format_traceparent,
    now_us,
)
from millrace.common.errors import for_code

if TYPE_CHECKING:
    from millrace.client.producer._internals.producer_batch import ProducerBatch
    from millrace.client.producer._internals.record_accumulator import RecordAccumulator

PRODUCER = "producer"
SENDER = "sender"


def find_traceparent_value(headers: Any) -> str | None:
    """A record's valid ``traceparent`` (to continue its trace), else None."""
    parsed = find_traceparent(headers)
    return None if parsed is None else format_traceparent(*parsed)


def with_traceparent(headers: Any, traceparent: str) -> list[tuple[str, Any]]:
    """``headers`` (a mapping or pairs) without any ``traceparent``, then the new one."""
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    out = [(k, v) for k, v in items if k != TRACEPARENT]
    out.append((TRACEPARENT, traceparent.encode("ascii")))
    return out


def traced_interceptors(journey: RecordJourney, t0_us: int, interceptors: Any) -> None:
    names = [type(i).__name__ for i in interceptors.interceptors] if interceptors else []
    journey.add("producer.interceptors", t0_us, lane=PRODUCER,
                duration_us=max(now_us() - t0_us, 0),
                detail=", ".join(names) if names else "none",
                interceptors=names if names else 0)


def traced_serialize(journey: RecordJourney, t0_us: int, key_serializer: Any,
                     value_serializer: Any, key: bytes | None, value: bytes | None) -> None:
    key_name, value_name = type(key_serializer).__name__, type(value_serializer).__name__
    key_bytes = -1 if key is None else len(key)
    value_bytes = -1 if value is None else len(value)
    journey.add("producer.serialize", t0_us, lane=PRODUCER,
                duration_us=max(now_us() - t0_us, 0),
                detail=f"key {key_name} ({key_bytes} B), value {value_name} ({value_bytes} B)",
                key_serializer=key_name, value_serializer=value_name,
                key_bytes=key_bytes, value_bytes=value_bytes)


def partition_reason(partition: int | None, partitioner: Any, key: bytes | None,
                     ignore_keys: bool) -> str:
    """How ``send`` chooses the partition (the order of its tests)."""
    if partition is not None:
        return "explicit"
    if partitioner is not None:
        return f"custom:{type(partitioner).__name__}"
    if key is not None and not ignore_keys:
        return "key-hash"
    return "sticky"


def traced_partition(journey: RecordJourney, t_us: int, partition: int, reason: str) -> None:
    journey.partition = partition
    detail = {"explicit": "given by the record", "key-hash": "murmur2 of the key",
              "sticky": "the topic's sticky partition"}.get(reason, reason)
    journey.add("producer.partition", t_us, lane=PRODUCER, detail=f"{partition}: {detail}",
                partition=partition, reason=reason)


class AppendTrace:
    """A traced record on its way into the accumulator (``append(..., trace=...)``)."""

    __slots__ = ("batch_size", "journey", "t0_us")

    def __init__(self, journey: RecordJourney, batch_size: int) -> None:
        self.journey = journey
        self.batch_size = batch_size
        self.t0_us = now_us()

    def landed(self, batch: ProducerBatch, index: int, new_batch: bool) -> None:
        """The record is record ``index`` of ``batch`` (accumulator lock held)."""
        journeys = batch.journeys
        if journeys is None:
            journeys = batch.journeys = []
        journeys.append((self.journey, index))
        size = batch.appended_size()
        t0 = self.t0_us
        self.journey.add("accumulator.append", t0, lane=PRODUCER,
                         duration_us=max(now_us() - t0, 0),
                         detail="opened a new batch" if new_batch else "joined the open batch",
                         new_batch=new_batch, batch_records=batch.record_count,
                         batch_bytes=size, batch_size=self.batch_size,
                         fill_pct=round(100.0 * size / self.batch_size, 1)
                         if self.batch_size > 0 else 100.0)


def ready_reason(accumulator: RecordAccumulator, batch: ProducerBatch, more_queued: bool,
                 now_ms: int) -> str:
    """Why the Sender took ``batch`` now (called as it drains it, before it is closed)."""
    if batch.attempts > 0:
        return "retry"
    if batch.full or more_queued:
        return "full"
    if now_ms - batch.created_ms >= accumulator.linger_ms:
        return "linger"
    if accumulator._closed:
        return "closing"
    if accumulator._flushes_in_progress > 0:
        return "flush"
    if accumulator._free.queued() > 0:
        return "memory"  # an append waits for buffer memory: everything goes
    tm = accumulator._tm
    if tm is not None and tm.is_completing():
        return "transaction"  # a commit or abort sends what is queued
    return "with-node"  # another partition on the same broker was ready


def batch_ready(batch: ProducerBatch, reason: str, linger_ms: int, now_ms: int) -> None:
    t = now_us()
    age_ms = max(now_ms - batch.created_ms, 0)
    for journey, _ in batch.journeys or ():
        journey.add("batch.ready", t, lane=SENDER, detail=reason, reason=reason,
                    linger_ms=linger_ms, age_ms=age_ms, batch_records=batch.record_count,
                    attempt=batch.attempts + 1)


def drained(batch: ProducerBatch, node_id: int) -> None:
    t = now_us()
    for journey, _ in batch.journeys or ():
        journey.add("sender.drain", t, lane=SENDER, detail=f"node {node_id}", node=node_id)


def connection_address(client: Any, cluster: Any, node_id: int) -> str | None:
    """host:port the NetworkClient is connected to for ``node_id`` (else the metadata's)."""
    states = getattr(client, "_states", None)
    state = states.get(node_id) if states is not None else None
    if state is not None:
        return f"{state.host}:{state.port}"
    node = cluster.node_by_id(node_id) if cluster is not None else None
    return None if node is None else node.address


def request_sent(batches: list[ProducerBatch], node_id: int, address: str | None,
                 correlation_id: int, acks: int, written: bool, version: int) -> None:
    t = now_us()
    for batch in batches:
        for journey, _ in batch.journeys or ():
            journey.add("request.sent", t, lane=SENDER,
                        detail=f"Produce v{version} to {address} (correlation id "
                               f"{correlation_id})",
                        node=node_id, address=address, correlation_id=correlation_id,
                        acks=acks, written=written, api_version=version,
                        batches_in_request=len(batches))


def response_received(batch: ProducerBatch, node_id: int, error_code: int, base_offset: int,
                      log_append_time: int) -> None:
    t = now_us()
    error = "NONE" if not error_code else for_code(error_code).name
    for journey, index in batch.journeys or ():
        offset = base_offset + index if base_offset >= 0 and not error_code else -1
        journey.add("response.received", t, lane=SENDER,
                    detail=error,
                    node=node_id, error=error, base_offset=base_offset, offset=offset,
                    log_append_time=log_append_time)


class JourneyCallback:
    """Wraps the user's callback: times it as the ``producer.callback`` stage, fills in
    the journey's partition and offset, then sets ``done`` (on success and failure)."""

    __slots__ = ("_callback", "_journey")

    def __init__(self, callback: Any, journey: RecordJourney) -> None:
        self._callback = callback
        self._journey = journey

    def __call__(self, metadata: Any, error: Exception | None) -> None:
        journey = self._journey
        if metadata is not None:
            journey.partition = metadata.partition
            if error is None:
                journey.offset = metadata.offset
        t0 = now_us()
        try:
            if self._callback is not None:
                self._callback(metadata, error)
        finally:
            attrs: dict[str, Any] = {}
            if error is not None:
                attrs["error"] = type(error).__name__
            journey.add("producer.callback", t0, lane=SENDER,
                        duration_us=max(now_us() - t0, 0),
                        detail="" if error is None else f"{type(error).__name__}: {error}",
                        user_callback=self._callback is not None, **attrs)
            journey.finish(error)
