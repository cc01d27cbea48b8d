"""The console's message browser and produce form, as a Kafka consumer and producer.

``browse`` reads a topic (one partition or all) with a consumer of no group (``assign``
and ``seek``, nothing committed): from the oldest offset, from the newest (each
partition's last ``limit`` records, or the last ``SCAN_LIMIT / partitions`` when a filter
is given), from an offset, or from the first record at or after a timestamp
(ListOffsets by time).  A filter ``q`` keeps the records whose key, value or a header
(name or value) contains the text, compared on the UTF-8 bytes.  The scan stops at the
high watermarks it found when it began, at ``limit`` matches, after ``SCAN_LIMIT``
records or after ``SCAN_TIMEOUT_S``: bounded work per request, with ``scanned`` and
``done`` saying how far it got.  Keys, values and header values go out base64-encoded;
the page renders them as text, JSON, hex or base64.

``Producer`` sends one record with the console's client settings (acks=all) and waits
for its offset.

Thread ownership: both run on the console's worker threads, never on the event loop.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.errors import MillraceError
from millrace.common.topic_partition import TopicPartition

MAX_LIMIT = 500
SCAN_LIMIT = 200_000
SCAN_TIMEOUT_S = 20.0
POLL_MS = 200
METADATA_TIMEOUT_MS = 10_000

FROM_CHOICES = ("oldest", "newest", "offset", "timestamp")


class BadRequest(ValueError):
    """A browse or produce request the console refuses, with the reason."""


@dataclass(frozen=True)
class BrowseRequest:
    topic: str
    partition: int | None
    start: str
    offset: int | None
    timestamp: int | None
    limit: int
    query: str

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> BrowseRequest:
        topic = params.get("topic", "")
        if not topic:
            raise BadRequest("topic is required")
        start = params.get("from", "oldest") or "oldest"
        if start not in FROM_CHOICES:
            raise BadRequest(f"from must be one of {', '.join(FROM_CHOICES)}, got {start!r}")
        partition = _int_param(params, "partition", minimum=0)
        offset = _int_param(params, "offset", minimum=0)
        timestamp = _int_param(params, "timestamp", minimum=0)
        if start == "offset" and offset is None:
            raise BadRequest("from=offset needs offset")
        if start == "timestamp" and timestamp is None:
            raise BadRequest("from=timestamp needs timestamp (ms since the epoch)")
        limit = _int_param(params, "limit", minimum=1) or 50
        if limit > MAX_LIMIT:
            raise BadRequest(f"limit must be at most {MAX_LIMIT}, got {limit}")
        return cls(topic, partition, start, offset, timestamp, limit, params.get("q", ""))


def _int_param(params: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {value}")
    return value


def browse(configs: Mapping[str, Any], request: BrowseRequest) -> dict[str, Any]:
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
        {**configs, "enable.auto.commit": False, "group.id": None,
         "allow.auto.create.topics": False,   # browsing a typo must not create it
         "client.id": configs.get("client.id", "millrace-console") + "-browse"})
    try:
        return _browse(consumer, request)
    finally:
        consumer.close(timeout_ms=1000)


def _browse(consumer: KafkaConsumer[bytes, bytes], request: BrowseRequest
            ) -> dict[str, Any]:
    # one Metadata request for every topic: asking for the one topic would wait out the
    # API timeout when it does not exist
    known = consumer.list_topics(timeout_ms=METADATA_TIMEOUT_MS).get(request.topic)
    if not known:
        raise BadRequest(f"topic {request.topic!r} does not exist")
    numbers = sorted(p.partition for p in known)
    if request.partition is not None:
        if request.partition not in numbers:
            raise BadRequest(f"topic {request.topic!r} has no partition {request.partition}")
        numbers = [request.partition]
    tps = [TopicPartition(request.topic, n) for n in numbers]
    consumer.assign(tps)
    begin = consumer.beginning_offsets(tps)
    end = consumer.end_offsets(tps)
    starts = _start_offsets(consumer, request, tps, begin, end)
    pending = {tp for tp in tps if starts[tp] < end[tp]}
    for tp in tps:
        consumer.seek(tp, starts[tp])
    needle = request.query.encode()
    matches: list[dict[str, Any]] = []
    scanned = 0
    deadline = time.monotonic() + SCAN_TIMEOUT_S
    newest = request.start == "newest"
    while pending and scanned < SCAN_LIMIT and time.monotonic() < deadline:
        if not newest and len(matches) >= request.limit:
            break
        for tp, records in consumer.poll(POLL_MS).by_partition().items():
            for record in records:
                if tp not in pending or record.offset >= end[tp]:
                    pending.discard(tp)
                    break
                scanned += 1
                if not needle or _contains(record, needle):
                    matches.append(_record_json(record))
                if record.offset + 1 >= end[tp]:
                    pending.discard(tp)
        for tp in list(pending):
            if consumer.position(tp) >= end[tp]:
                pending.discard(tp)
        consumer.pause(set(tps) - pending)
    if newest:
        matches.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
    else:
        matches.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
    return {"records": matches[:request.limit], "scanned": scanned,
            "done": not pending or len(matches) >= request.limit}


def _start_offsets(consumer: KafkaConsumer[bytes, bytes], request: BrowseRequest,
                   tps: list[TopicPartition], begin: Mapping[TopicPartition, int],
                   end: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    if request.start == "oldest":
        return {tp: begin[tp] for tp in tps}
    if request.start == "offset":
        assert request.offset is not None
        return {tp: min(max(request.offset, begin[tp]), end[tp]) for tp in tps}
    if request.start == "newest":
        back = request.limit if not request.query else max(request.limit,
                                                           SCAN_LIMIT // len(tps))
        return {tp: max(begin[tp], end[tp] - back) for tp in tps}
    assert request.timestamp is not None
    found = consumer.offsets_for_times({tp: request.timestamp for tp in tps})
    starts = {}
    for tp in tps:
        at = found.get(tp)
        starts[tp] = at.offset if at is not None else end[tp]   # none that late: nothing
    return starts


def _contains(record: Any, needle: bytes) -> bool:
    if record.key is not None and needle in record.key:
        return True
    if record.value is not None and needle in record.value:
        return True
    return any(needle in name.encode() or (value is not None and needle in value)
               for name, value in record.headers)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _record_json(record: Any) -> dict[str, Any]:
    return {"partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp, "key": _b64(record.key),
            "value": _b64(record.value),
            "headers": [[name, _b64(value)] for name, value in record.headers]}


@dataclass(frozen=True)
class ProduceRequest:
    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]

    @classmethod
    def from_json(cls, body: Any) -> ProduceRequest:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        topic = body.get("topic")
        if not isinstance(topic, str) or not topic:
            raise BadRequest("topic is required")
        partition = body.get("partition")
        if partition is not None and (not isinstance(partition, int)
                                      or isinstance(partition, bool) or partition < 0):
            raise BadRequest(f"partition must be a non-negative integer, got {partition!r}")
        key, value = body.get("key"), body.get("value")
        for name, item in (("key", key), ("value", value)):
            if item is not None and not isinstance(item, str):
                raise BadRequest(f"{name} must be a string or null")
        headers = body.get("headers") or []
        if not isinstance(headers, list) or not all(
                isinstance(h, list) and len(h) == 2 and isinstance(h[0], str) and h[0]
                and isinstance(h[1], str) for h in headers):
            raise BadRequest("headers must be a list of [name, value] string pairs")
        return cls(topic, partition, None if key is None else key.encode(),
                   None if value is None else value.encode(),
                   [(name, text.encode()) for name, text in headers])


class Producer:
    """One producer for the console's produce form, made on first use."""

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self._configs = {key: value for key, value in configs.items()
                         if key != "default.api.timeout.ms"}   # an admin/consumer setting
        self._configs.update({"acks": "all",
                              "client.id": configs.get("client.id", "millrace-console")})
        self._producer: KafkaProducer[bytes, bytes] | None = None
        self._lock = threading.Lock()

    def send(self, request: ProduceRequest, timeout_s: float = 30.0) -> dict[str, int]:
        with self._lock:
            if self._producer is None:
                self._producer = KafkaProducer(self._configs)
            producer = self._producer
        future = producer.send(ProducerRecord(request.topic, request.value, key=request.key,
                                              partition=request.partition,
                                              headers=request.headers))
        metadata = future.get(timeout=timeout_s)
        return {"partition": metadata.partition, "offset": metadata.offset}

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                with contextlib.suppress(MillraceError):
                    self._producer.close(timeout=5)
                self._producer = None
