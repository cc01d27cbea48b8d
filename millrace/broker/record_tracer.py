"""``RecordTracer``: what this broker did with *traced* records, so that a console can
draw a record's journey (issue 28).  One per broker, owned by the ``ReplicaManager``
(as its ``PartitionStateLog``); its routes (``record_tracer_http.py``) are served by
the broker's HTTP listener, started by ``MetricsService``.

A record is traced when it carries a valid W3C ``traceparent`` header
(``00-<32 hex trace id>-<16 hex span id>-<2 hex flags>``, lowercase, ids not all zero)
and is appended to a partition of an *armed* topic.  ``arm(topic, ttl_ms)`` arms a topic
on this broker until now + ttl (1..600000 ms, default 60000; at most ``MAX_ARMED``
topics at once): every partition of the topic hosted here gets a ``PartitionTrace`` on
``Partition.trace``.  Arming is by name and applies to the partitions hosted here when
it is asked (a topic this broker hosts no partition of answers ``"partitions": 0``, as
a broker that does not lead a partition simply has nothing to say about it; partitions
created later are not armed until the next arm).  ``watch(...)`` registers one record
on a broker that did not see its append (the group coordinator, a record already in
the log) so that its later events are recorded there too (for ``WATCH_TTL_MS`` or the
ttl given).

**Untraced traffic pays nothing measurable.**  With nothing armed the hot paths cost one
check each: ``partition.trace is not None`` on the leader append, the follower append,
the fetch read and the high-watermark move; the truthiness of ``RecordTracer.armed`` per
Produce request and of ``RecordTracer.active`` per offset commit.  Expiry is lazy: a
hook that sees its ``PartitionTrace`` expired detaches it, and every HTTP call and
every Produce after the earliest deadline expires what is due.

**Bounded memory**: at most ``MAX_RECORDS`` traced records per broker (the oldest is
dropped), ``MAX_EVENTS`` events per record, ``MAX_ARMED`` armed topics.

Events are dicts ``{"t_us", "stage", "broker", "detail", ...attrs}``, ``t_us`` the wall
clock in epoch microseconds (``time.time_ns() // 1000``) so that events of several
processes on one host line up with the producer's.  Stages (the console relies on the
names): ``broker.receive``, ``broker.append``, ``hw.advance``, ``broker.response``,
``replica.fetch``, ``replica.caught-up`` and ``consumer.fetch`` on the leader,
``follower.append`` on a follower, ``group.commit`` on the group coordinator; and the
stages a client reports for a range of offsets it handled (``report``: ``spark.*``,
``sink.*``, ``client.*``, each with the reporter's ``lane``).  The
"first only" rules: one ``replica.fetch`` / ``replica.caught-up`` per follower, one
``consumer.fetch`` per client id, one ``group.commit`` per group, one ``hw.advance``.
Compressed batches are decompressed to find the header (only on armed partitions).

Thread ownership: the broker's event-loop thread (the hooks run in the replica manager,
the partitions and the handlers; the HTTP routes in aiohttp's handlers on the same loop).
"""

from __future__ import annotations

import logging
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from millrace.common.errors import CorruptBatchError, Errors
from millrace.common.trace_context import TRACEPARENT, now_us, parse_traceparent
from millrace.record.batch import RecordBatch, iter_batches

if TYPE_CHECKING:
    from millrace.broker.context import RequestContext
    from millrace.broker.delayed_fetch import FetchPartitionData
    from millrace.broker.partition import Partition
    from millrace.storage import LogAppendInfo

log = logging.getLogger(__name__)

DEFAULT_TTL_MS = 60_000
MAX_TTL_MS = 600_000
WATCH_TTL_MS = DEFAULT_TTL_MS
MAX_ARMED = 64
MAX_RECORDS = 1000
MAX_EVENTS = 64
READ_COMMITTED = 1


REPORT_STAGE = re.compile(r"(spark|sink|client)\.[a-z0-9_.-]{1,40}")
MAX_REPORT_TEXT = 200   # characters of a report's lane, detail and string attributes
MAX_REPORT_ATTRS = 16
_REPORT_ATTR = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")
_RESERVED = frozenset({"t_us", "stage", "broker", "detail", "lane"})

Key = tuple[str, str, str, int, int]  # trace id, span id, topic, partition, offset
Authorize = Callable[[str, str], bool]  # (user, client host) -> may Alter the cluster


def _address(ctx: RequestContext | None) -> str:
    if ctx is None:
        return ""
    host = ctx.client_host
    return f"[{host}]:{ctx.client_port}" if ":" in host else f"{host}:{ctx.client_port}"


class _Times(Protocol):
    arrived: float
    dequeued: float


class TracedRecord:
    """One traced record as this broker knows it, and what happened to it here."""

    __slots__ = ("events", "offset", "partition", "seen", "span_id", "topic", "trace_id",
                 "until_us")

    def __init__(self, trace_id: str, span_id: str, topic: str, partition: int, offset: int,
                 until_us: int) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.until_us = until_us  # events are recorded until then
        self.events: list[dict[str, Any]] = []
        self.seen: set[tuple[str, object]] = set()  # the "first only" rules

    @property
    def key(self) -> Key:
        return self.trace_id, self.span_id, self.topic, self.partition, self.offset

    def first(self, *what: object) -> bool:
        """True the first time ``what`` is asked (and while events may be added)."""
        key = (str(what[0]), what[1] if len(what) > 1 else None)
        if key in self.seen or len(self.events) >= MAX_EVENTS:
            return False
        self.seen.add(key)
        return True

    def add(self, event: dict[str, Any]) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)

    def to_json(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "span_id": self.span_id, "topic": self.topic,
                "partition": self.partition, "offset": self.offset,
                "events": sorted(self.events, key=lambda e: e["t_us"])}


class ProduceTrace:
    """One Produce request while something is armed: who sent it, when it arrived, and
    the traced records its appends created (for ``broker.response``)."""

    __slots__ = ("acks", "api_version", "client_address", "client_id", "queue_us",
                 "receive_us", "records")

    def __init__(self, client_id: str, client_address: str, api_version: int, acks: int,
                 receive_us: int, queue_us: int | None) -> None:
        self.client_id = client_id
        self.client_address = client_address
        self.api_version = api_version
        self.acks = acks
        self.receive_us = receive_us
        self.queue_us = queue_us
        self.records: list[TracedRecord] = []


class PartitionTrace:
    """What ``Partition.trace`` holds while the partition's topic is armed here or one
    of its records is watched; its methods are the partition's hooks."""

    __slots__ = ("armed_until_us", "partition", "topic", "tracer", "until_us")

    def __init__(self, tracer: RecordTracer, topic: str, partition: int) -> None:
        self.tracer = tracer
        self.topic = topic
        self.partition = partition
        self.armed_until_us = 0  # new traceparent records are picked up until then
        self.until_us = 0        # the hooks run until then (armed or watched)

    def _live(self, p: Partition, now: int) -> bool:
        if now > self.until_us:
            if p.trace is self:
                p.trace = None
            return False
        return True

    def _records(self, now: int) -> list[TracedRecord]:
        return [r for r in self.tracer.active.get((self.topic, self.partition), ())
                if r.until_us >= now]

    # ------------------------------------------------------------------ leader
    def leader_appended(self, p: Partition, records: bytes | bytearray | memoryview,
                        info: LogAppendInfo, request: ProduceTrace | None,
                        started_us: int) -> None:
        now = self.tracer.clock_us()
        if not self._live(p, now) or now > self.armed_until_us:
            return
        tracer = self.tracer
        hw = p.log.high_watermark
        for offset, trace_id, span_id in scan_traceparents(records, info.first_offset):
            record = tracer.track(trace_id, span_id, self.topic, self.partition, offset,
                                  self.armed_until_us)
            if record is None:
                continue  # seen already (a duplicate the idempotent producer resent)
            if request is not None:
                queue = request.queue_us
                record.add(tracer.event(
                    request.receive_us, "broker.receive",
                    f"produce v{request.api_version} from {request.client_id!r} at "
                    f"{request.client_address}", client_id=request.client_id,
                    client_address=request.client_address, api_version=request.api_version))
                request.records.append(record)
            else:
                queue = None
            append_us = now - started_us
            record.add(tracer.event(
                now, "broker.append",
                f"appended at offset {offset} in leader epoch {p.leader_epoch} "
                f"({append_us} us)", offset=offset, leader_epoch=p.leader_epoch,
                queue_us=queue, append_us=append_us))
            if offset < hw and record.first("hw"):
                record.add(tracer.event(now, "hw.advance",
                                        f"high watermark {hw} passed offset {offset}",
                                        high_watermark=hw))

    def high_watermark_advanced(self, p: Partition, hw: int) -> None:
        now = self.tracer.clock_us()
        if not self._live(p, now):
            return
        for record in self._records(now):
            if record.offset < hw and record.first("hw"):
                record.add(self.tracer.event(
                    now, "hw.advance", f"high watermark {hw} passed offset {record.offset}",
                    high_watermark=hw))

    def fetched(self, p: Partition, fetch_offset: int, data: FetchPartitionData,
                replica_id: int, isolation: int, request: RequestContext | None) -> None:
        """A read for a fetch (a follower's or a consumer's) answered ``data``."""
        now = self.tracer.clock_us()
        if not self._live(p, now):
            return
        tracer = self.tracer
        returned = bool(data.records) and not data.error
        if replica_id >= 0:
            for record in self._records(now):
                if fetch_offset > record.offset:
                    if record.first("caught-up", replica_id):
                        record.add(tracer.event(
                            now, "replica.caught-up",
                            f"broker {replica_id} fetched from {fetch_offset}: it has "
                            f"offset {record.offset}", replica=replica_id,
                            fetch_offset=fetch_offset))
                elif returned and record.first("fetch", replica_id):
                    record.add(tracer.event(
                        now, "replica.fetch",
                        f"broker {replica_id} fetched from {fetch_offset}",
                        replica=replica_id, fetch_offset=fetch_offset))
            return
        if not returned:
            return
        bound = data.last_stable_offset if isolation == READ_COMMITTED else \
            data.high_watermark
        client_id = request.client_id if request is not None else ""
        for record in self._records(now):
            if fetch_offset <= record.offset < bound and \
                    record.first("consumer", client_id):
                level = "read_committed" if isolation == READ_COMMITTED \
                    else "read_uncommitted"
                address = _address(request)
                record.add(tracer.event(
                    now, "consumer.fetch",
                    f"consumer {client_id!r} at {address} fetched from {fetch_offset} "
                    f"({level})", client_id=client_id, client_address=address,
                    fetch_offset=fetch_offset, isolation=level))

    # ------------------------------------------------------------------ follower
    def follower_appended(self, p: Partition, records: bytes | bytearray | memoryview
                          ) -> None:
        now = self.tracer.clock_us()
        if not self._live(p, now):
            return
        tracer = self.tracer
        armed = now <= self.armed_until_us
        for offset, trace_id, span_id in scan_traceparents(records, None):
            record = tracer.get(trace_id, span_id, self.topic, self.partition, offset)
            if record is None and armed:
                record = tracer.track(trace_id, span_id, self.topic, self.partition,
                                      offset, self.armed_until_us)
            if record is None or record.until_us < now or not record.first("follower"):
                continue
            record.add(tracer.event(
                now, "follower.append",
                f"replicated at offset {offset} from leader {p.leader_id}",
                offset=offset, leader=p.leader_id))


def scan_traceparents(records: bytes | bytearray | memoryview, first_offset: int | None
                      ) -> Iterable[tuple[int, str, str]]:
    """(offset, trace id, span id) of each record with a valid ``traceparent`` in the
    batches of ``records``.  ``first_offset`` given: the offsets the log assigned start
    there (the batch headers may not say); else each record's own offset.  Control
    batches are skipped, compressed ones decompressed; a batch that does not decode is
    skipped (the log accepted it; tracing never fails an append)."""
    out: list[tuple[int, str, str]] = []
    next_offset = first_offset
    try:
        for pos, header in iter_batches(records):
            base = header.base_offset
            if next_offset is not None:
                shift = next_offset - base
                next_offset += header.last_offset_delta + 1
            else:
                shift = 0
            if header.is_control:
                continue
            try:
                decoded = RecordBatch(records, pos).record_list()
            except Exception:  # a codec's own error included: tracing never fails
                log.debug("a batch at position %d did not decode for tracing", pos)
                continue
            for record in decoded:
                for name, value in record.headers:
                    if name == TRACEPARENT:
                        ids = parse_traceparent(value)
                        if ids is not None:
                            out.append((record.offset + shift, ids[0], ids[1]))
                        break
    except CorruptBatchError:
        pass
    return out


class RecordTracer:
    def __init__(self, broker_id: int,
                 partitions: Callable[[str], Iterable[Partition]],
                 clock_us: Callable[[], int] = now_us) -> None:
        self.broker_id = broker_id
        self._partitions = partitions  # this broker's partitions of a topic
        self.clock_us = clock_us
        self.armed: dict[str, int] = {}  # topic -> armed until (epoch us)
        # (topic, partition) -> the records still collecting events here
        self.active: dict[tuple[str, int], list[TracedRecord]] = {}
        self._records: OrderedDict[Key, TracedRecord] = OrderedDict()  # oldest first
        self._next_expiry_us = 0
        self._attached: set[str] = set()  # topics with a PartitionTrace on a partition

    # ------------------------------------------------------------------ arming
    def arm(self, topic: str, ttl_ms: int = DEFAULT_TTL_MS) -> tuple[int, int]:
        """Arm ``topic`` until now + ``ttl_ms``: (armed until in epoch ms, partitions
        armed here).  ValueError for a bad ttl, ``TooManyArmed`` beyond ``MAX_ARMED``."""
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or \
                not 1 <= ttl_ms <= MAX_TTL_MS:
            raise ValueError(f"ttl_ms must be an integer from 1 to {MAX_TTL_MS}")
        if not topic or not isinstance(topic, str):
            raise ValueError("topic must be a non-empty string")
        now = self.clock_us()
        self.expire(now)
        if topic not in self.armed and len(self.armed) >= MAX_ARMED:
            raise TooManyArmed(f"at most {MAX_ARMED} topics may be armed at once; "
                               "wait for an arm to expire")
        until = max(self.armed.get(topic, 0), now + ttl_ms * 1000)
        self.armed[topic] = until
        self._next_expiry_us = min(self.armed.values())
        armed = 0
        for p in self._partitions(topic):
            trace = self._attach(p)
            trace.armed_until_us = max(trace.armed_until_us, until)
            trace.until_us = max(trace.until_us, until)
            armed += 1
        for (t, _), records in self.active.items():
            if t == topic:
                for record in records:
                    record.until_us = max(record.until_us, until)
        log.info("tracing armed for topic %s for %d ms", topic, ttl_ms)
        return until // 1000, armed

    def _attach(self, p: Partition) -> PartitionTrace:
        trace = p.trace
        if trace is None or trace.tracer is not self:
            trace = p.trace = PartitionTrace(self, p.topic, p.index)
            self._attached.add(p.topic)
        return trace

    def expire(self, now: int | None = None) -> None:
        """Disarm the topics whose time is up and detach the partitions' traces with
        nothing left to do."""
        now = self.clock_us() if now is None else now
        for topic in [t for t, until in self.armed.items() if until < now]:
            del self.armed[topic]
        self._next_expiry_us = min(self.armed.values(), default=0)
        for key in [k for k, rs in self.active.items() if all(r.until_us < now for r in rs)]:
            del self.active[key]
        for topic in list(self._attached):
            left = False
            for p in self._partitions(topic):
                if p.trace is not None and p.trace.until_us < now:
                    p.trace = None
                left = left or p.trace is not None
            if not left:
                self._attached.discard(topic)

    def watch(self, trace_id: str, span_id: str | None, topic: str, partition: int,
              offset: int, ttl_ms: int = WATCH_TTL_MS) -> TracedRecord:
        """Record the later events of a record whose append this broker did not see."""
        if not 1 <= ttl_ms <= MAX_TTL_MS:
            raise ValueError(f"ttl_ms must be an integer from 1 to {MAX_TTL_MS}")
        now = self.clock_us()
        self.expire(now)
        until = now + ttl_ms * 1000
        span = span_id or ""
        record = self.get(trace_id, span, topic, partition, offset)
        if record is None and not span:   # no span named: the record of that trace there
            record = next((r for r in self.active.get((topic, partition), ())
                           if r.trace_id == trace_id and r.offset == offset), None)
        if record is None:
            record = self.track(trace_id, span, topic, partition, offset, until)
            assert record is not None
        record.until_us = max(record.until_us, until)
        for p in self._partitions(topic):
            if p.index == partition:
                trace = self._attach(p)
                trace.until_us = max(trace.until_us, until)
        return record

    # ------------------------------------------------------------------ records
    def get(self, trace_id: str, span_id: str, topic: str, partition: int, offset: int
            ) -> TracedRecord | None:
        return self._records.get((trace_id, span_id, topic, partition, offset))

    def track(self, trace_id: str, span_id: str, topic: str, partition: int, offset: int,
              until_us: int) -> TracedRecord | None:
        """A new traced record (None if it is known already); the oldest is dropped
        beyond ``MAX_RECORDS``."""
        key = (trace_id, span_id, topic, partition, offset)
        if key in self._records:
            return None
        record = TracedRecord(trace_id, span_id, topic, partition, offset, until_us)
        self._records[key] = record
        self.active.setdefault((topic, partition), []).append(record)
        while len(self._records) > MAX_RECORDS:
            _, old = self._records.popitem(last=False)
            active = self.active.get((old.topic, old.partition))
            if active is not None:
                active.remove(old)
                if not active:
                    del self.active[(old.topic, old.partition)]
        return record

    def event(self, t_us: int, stage: str, detail: str, **attrs: Any) -> dict[str, Any]:
        return {"t_us": t_us, "stage": stage, "broker": self.broker_id, "detail": detail,
                **attrs}

    def by_trace(self, trace_id: str) -> list[TracedRecord]:
        return [r for r in self._records.values() if r.trace_id == trace_id]

    def by_offset(self, topic: str, partition: int, offset: int) -> list[TracedRecord]:
        return [r for r in self._records.values()
                if (r.topic, r.partition, r.offset) == (topic, partition, offset)]

    # ------------------------------------------------------------------ request hooks
    def produce_request(self, ctx: RequestContext, acks: int,
                        times: _Times | None, clock_s: Callable[[], float]
                        ) -> ProduceTrace | None:
        """A Produce request while some topic is armed (``armed`` is truthy): who sent
        it and when it arrived (``times``: the network layer's ``RequestTimes`` in
        ``clock_s`` seconds, when request metrics are on), or None once every arm has
        expired."""
        now = self.clock_us()
        if now > self._next_expiry_us:
            self.expire(now)
            if not self.armed:
                return None
        if times is not None:
            ago = clock_s() - times.arrived
            receive = now - int(ago * 1_000_000)
            queue: int | None = int((times.dequeued - times.arrived) * 1_000_000)
        else:  # request metrics off: the handler's start is all that is known
            receive, queue = now, None
        return ProduceTrace(ctx.client_id, _address(ctx), ctx.version, acks, receive, queue)

    def produce_responded(self, request: ProduceTrace,
                          errors: Mapping[tuple[str, int], int]) -> None:
        """The Produce request's answer is complete (``errors`` per partition)."""
        now = self.clock_us()
        for record in request.records:
            code = errors.get((record.topic, record.partition), Errors.NONE)
            name = _error_name(code)
            if record.first("response"):
                detail = f"produce answered ({name}, acks={request.acks})" if request.acks \
                    else "appended; acks=0 gets no response"
                record.add(self.event(now, "broker.response", detail, acks=request.acks,
                                      error=name))

    def offsets_committed(self, group: str, member_id: str, generation: int,
                          offsets: Iterable[tuple[str, int, int]]) -> None:
        """A group's applied commits (topic, partition, committed offset); called only
        while ``active`` is truthy."""
        now = self.clock_us()
        for topic, partition, committed in offsets:
            for record in self.active.get((topic, partition), ()):
                if committed > record.offset and record.until_us >= now and \
                        record.first("group", group):
                    record.add(self.event(
                        now, "group.commit",
                        f"group {group!r} committed offset {committed} (member "
                        f"{member_id!r}, generation {generation})", group=group,
                        member_id=member_id, generation=generation,
                        committed_offset=committed))

    def report(self, topic: str, partition: int, from_offset: int, until_offset: int,
               stage: str, lane: str, detail: str, t_us: int | None = None,
               attrs: Mapping[str, str | int | float | bool] | None = None) -> int:
        """A client handled offsets ``from_offset`` (inclusive) to ``until_offset``
        (exclusive) of a partition (a Spark micro-batch planned, a sink's transaction
        committed): add ``stage`` to each traced record of that range here, once per
        (stage, lane) and record, within ``MAX_EVENTS``.  The number of records matched;
        ValueError for a bad argument (``check_report``).  Costs one truthiness check
        while nothing is traced."""
        if not self.active:
            return 0
        check_report(from_offset, until_offset, stage, lane, detail, t_us, attrs)
        records = self.active.get((topic, partition))
        if not records:
            return 0
        now = self.clock_us()
        event = self.event(now if t_us is None else t_us, stage, detail, lane=lane,
                           **(attrs or {}))
        matched = 0
        for record in records:
            if from_offset <= record.offset < until_offset and record.until_us >= now:
                matched += 1
                if record.first(stage, lane):
                    record.add(dict(event))
        return matched

    def commit_applied(self, body: Any, response: Any) -> None:
        """An OffsetCommit or TxnOffsetCommit the group coordinator applied: the
        partitions its ``response`` accepted, with the member and generation of
        ``body``."""
        accepted = {(t.name, p.partition_index) for t in response.topics
                    for p in t.partitions if p.error_code == Errors.NONE}
        generation: Any = getattr(body, "generation_id_or_member_epoch", None)
        if generation is None:  # TxnOffsetCommit
            generation = getattr(body, "generation_id", -1)
        self.offsets_committed(
            body.group_id, getattr(body, "member_id", "") or "", int(generation),
            [(t.name, p.partition_index, int(p.committed_offset)) for t in body.topics
             for p in t.partitions if (t.name, p.partition_index) in accepted])


def check_report(from_offset: int, until_offset: int, stage: str, lane: str, detail: str,
                 t_us: int | None = None,
                 attrs: Mapping[str, str | int | float | bool] | None = None) -> None:
    """ValueError naming the first bad argument of a ``report``."""
    for name, offset in (("from_offset", from_offset), ("until_offset", until_offset)):
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"{name} must be a non-negative integer")
    if until_offset < from_offset:
        raise ValueError("until_offset must not be below from_offset")
    if not isinstance(stage, str) or REPORT_STAGE.fullmatch(stage) is None:
        raise ValueError("stage must be spark.*, sink.* or client.* (lowercase letters, "
                         "digits, '_', '.', '-'; at most 40 after the prefix)")
    for name, text in (("lane", lane), ("detail", detail)):
        if not isinstance(text, str) or len(text) > MAX_REPORT_TEXT:
            raise ValueError(f"{name} must be a string of at most {MAX_REPORT_TEXT} "
                             "characters")
    if not lane:
        raise ValueError("lane must not be empty")
    if t_us is not None and (isinstance(t_us, bool) or not isinstance(t_us, int)
                             or t_us < 0):
        raise ValueError("t_us must be a non-negative integer (epoch microseconds)")
    if attrs is None:
        return
    if not isinstance(attrs, Mapping) or len(attrs) > MAX_REPORT_ATTRS:
        raise ValueError(f"attrs must be an object of at most {MAX_REPORT_ATTRS} entries")
    for key, value in attrs.items():
        if not isinstance(key, str) or _REPORT_ATTR.fullmatch(key) is None \
                or key in _RESERVED:
            raise ValueError(f"attrs: {str(key)[:40]!r} is not an attribute name (a letter "
                             "or '_', then up to 39 of [A-Za-z0-9_.-]; not t_us, stage, "
                             "broker, detail or lane)")
        if isinstance(value, str):
            if len(value) > MAX_REPORT_TEXT:
                raise ValueError(f"attrs: {key} must be at most {MAX_REPORT_TEXT} "
                                 "characters")
        elif not isinstance(value, (bool, int, float)) or \
                (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(f"attrs: {key} must be a string, finite number or boolean")


class TooManyArmed(Exception):
    """``MAX_ARMED`` topics are armed already (HTTP 429)."""


def _error_name(code: int) -> str:
    member = Errors._value2member_map_.get(code)
    return member.name if member is not None else "UNKNOWN_SERVER_ERROR"
