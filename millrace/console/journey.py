"""The journey of a record: the console sends one traced record and gathers, from every
place it passed, what happened to it and when.

``JourneyTracker.start`` takes a ``JourneyRequest`` (topic, key, value, headers,
partition, acks) and returns the new trace id at once; the rest runs on a worker thread:

1. every broker is asked to trace the topic for a while (``POST /v1/traces/arm`` on its
   HTTP listener; a broker that refuses or has none is noted, and the journey goes on
   with the client's part);
2. the console's producer for that ``acks`` sends the record with ``send_traced``: the
   producer records its own stages (interceptors, serializer, partitioner, accumulator,
   batch ready, drain, request, response, callback) and puts a W3C ``traceparent``
   header on the record, which is how the brokers recognise it;
3. every broker is told the record's offset (``POST /v1/traces/watch``), so that the
   group coordinator, which may not lead the partition, records the commits that cover it;
4. a consumer of the console's own group (``CONSUMER_GROUP``) reads the record back
   (``consumer.poll``) and commits past it (``consumer.commit``);
5. for ``FOLLOW_S`` seconds the brokers' records are read again (``GET
   /v1/traces/<id>``), so that a follower's copy, the high watermark and other groups'
   fetches and commits appear as they happen.

``view(trace_id)`` merges the client's stages and every broker's events into one list
sorted by time, each with its ``lane`` (the producer's application and I/O threads, each
broker, each consumer).  ``lookup(topic, partition, offset)`` answers "trace offset N of
partition P" for a record already in the log: what the brokers recorded of it, if it was
traced, and what the cluster can still tell (its timestamp, its header, whether the high
watermark has passed it, which groups have committed past it).

With ``export`` (``OtlpExport``, the console's ``--otlp``), each finished journey is also
exported over OTLP: the producer's ``send`` span with the brokers' events as its children,
and the console consumer's ``poll`` and ``commit`` spans linked to it.

Every change to a journey bumps its ``version`` and calls ``notify``, which the server
turns into an SSE ``journey`` event: the page draws the journey live.

Thread ownership: ``start``'s work runs on the console's worker threads, one journey per
thread; the journeys' map is guarded by a lock, each journey's fields by its own.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from millrace.client.admin import KafkaAdminClient
from millrace.client.admin.broker_http import BrokerHttp, BrokerHttpDenied, BrokerHttpUnavailable
from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.tracing import RecordJourney, parse_traceparent
from millrace.common.errors import KafkaError, MillraceError
from millrace.common.topic_partition import TopicPartition
from millrace.console.messages import BadRequest, ProduceRequest
from millrace.record import TimestampType

CONSUMER_GROUP = "millrace-console-journey"
ARM_TTL_MS = 120_000
FOLLOW_S = 15.0
FOLLOW_EVERY_S = 0.25
SEND_TIMEOUT_S = 30.0
READ_BACK_TIMEOUT_S = 15.0
MAX_JOURNEYS = 50
MAX_GROUPS_ASKED = 100   # a lookup asks each group for its offset: bounded work
ACKS = ("0", "1", "all")


@dataclass(frozen=True)
class JourneyRequest:
    record: ProduceRequest
    acks: str

    @classmethod
    def from_json(cls, body: Any) -> JourneyRequest:
        record = ProduceRequest.from_json(body)
        acks = str(body.get("acks", "all"))
        if acks == "-1":
            acks = "all"
        if acks not in ACKS:
            raise BadRequest(f"acks must be one of 0, 1, all (or -1), got {acks!r}")
        return cls(record, acks)


class Journey:
    """One traced record: the client's stages, each broker's events, what went wrong."""

    def __init__(self, traced: RecordJourney, request: JourneyRequest) -> None:
        self.traced = traced       # the producer's record of its stages
        self.trace_id = traced.trace_id
        self.request = request
        self.started_ms = int(time.time() * 1000)
        self.lock = threading.Lock()
        self.version = 0
        self.client_stages: list[dict[str, Any]] = []
        self.broker_events: dict[int, list[dict[str, Any]]] = {}
        self.notes: list[str] = []
        self.denied: list[str] = []
        self.record: dict[str, Any] = {}
        self.state = "sending"

    def to_json(self) -> dict[str, Any]:
        with self.lock:
            stages = [*self.client_stages,
                      *(e for events in self.broker_events.values() for e in events)]
            stages.sort(key=lambda s: (s.get("t_us", 0), _STAGE_ORDER.get(s["stage"], 99)))
            return {"trace_id": self.trace_id, "state": self.state, "version": self.version,
                    "started_ms": self.started_ms,
                    "acks": self.request.acks,
                    "record": dict(self.record), "stages": stages,
                    "notes": list(self.notes), "denied": list(self.denied)}


# the order of the seeds' stages, for events that share a microsecond
_STAGE_ORDER = {name: i for i, name in enumerate((
    "producer.interceptors", "producer.serialize", "producer.partition",
    "accumulator.append", "batch.ready", "sender.drain", "request.sent", "broker.receive",
    "broker.append", "replica.fetch", "follower.append", "replica.caught-up", "hw.advance",
    "broker.response", "response.received", "producer.callback", "consumer.fetch",
    "consumer.poll", "group.commit", "consumer.commit"))}


class JourneyTracker:
    """Sends traced records and keeps their journeys (module docstring)."""

    def __init__(self, configs: Mapping[str, Any], admin: KafkaAdminClient,
                 broker_http: BrokerHttp | None,
                 notify: Callable[[], None] = lambda: None,
                 export: Callable[[Journey], None] | None = None) -> None:
        self._configs = {key: value for key, value in configs.items()
                         if key != "default.api.timeout.ms"}
        self._client_id = str(configs.get("client.id", "millrace-console")) + "-journey"
        self._admin = admin
        self._http = broker_http
        self._http_lock = threading.Lock()   # BrokerHttp: one thread at a time
        self._notify = notify
        self._export = export
        self._producers: dict[str, KafkaProducer[bytes, bytes]] = {}
        self._lock = threading.Lock()
        self._journeys: OrderedDict[str, Journey] = OrderedDict()
        self._closed = False

    # ------------------------------------------------------------------ starting
    def begin(self, request: JourneyRequest) -> Journey:
        """A new journey for ``request`` (its trace id chosen), not yet sent."""
        journey = Journey(RecordJourney.start(), request)
        journey.record = {"topic": request.record.topic}
        self._keep(journey)
        return journey

    def run(self, journey: Journey) -> None:
        """Steps 1-5 of the module docstring (a worker thread; returns when done)."""
        request = journey.request
        topic = request.record.topic
        try:
            brokers = self._brokers()
            self._broadcast(journey, brokers, "/v1/traces/arm",
                            {"topic": topic, "ttl_ms": ARM_TTL_MS})
            metadata = self._send(journey)
            partition, offset = metadata
            self._broadcast(journey, brokers, "/v1/traces/watch",
                            {"trace_id": journey.trace_id,
                             "span_id": journey.traced.span_id, "topic": topic,
                             "partition": partition, "offset": offset})
            self._read_back(journey, topic, partition, offset)
            self._follow(journey, brokers)
            if self._export is not None:
                try:
                    self._export(journey)
                except Exception as e:   # the collector's trouble is not the journey's
                    self._change(journey, note=f"OTLP export failed: {_one_line(e)}")
                else:
                    self._change(journey, note="exported over OTLP")
        except Exception as e:   # the journey says why; the console goes on
            if isinstance(e, KafkaError) and e.name.endswith("AUTHORIZATION_FAILED"):
                self._change(journey, denied=f"the record was not sent: {_one_line(e)}")
            self._change(journey, note=f"the journey stopped: {_one_line(e)}",
                         state="failed")
            if not isinstance(e, MillraceError | BadRequest | OSError):
                raise   # a defect: logged by the server too
            return
        self._change(journey, state="done")

    def _send(self, journey: Journey) -> tuple[int, int]:
        record = journey.request.record
        producer = self._producer(journey.request.acks)
        future, traced = producer.send_traced(
            ProducerRecord(record.topic, record.value, key=record.key,
                           partition=record.partition, headers=record.headers),
            journey=journey.traced)
        try:
            metadata = future.get(timeout=SEND_TIMEOUT_S)
        finally:
            traced.wait(5.0)   # the callback stage follows the future by a moment
            self._change(journey, client=traced.to_json()["stages"])
        self._change(journey, record={"topic": record.topic, "partition": metadata.partition,
                                      "offset": metadata.offset,
                                      "traceparent": traced.traceparent},
                     state="sent")
        return metadata.partition, metadata.offset

    def _read_back(self, journey: Journey, topic: str, partition: int, offset: int) -> None:
        """The console's own consumer polls the record and commits past it."""
        tp = TopicPartition(topic, partition)
        consumer_id = self._client_id + "-consumer"
        consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
            {**self._configs, "group.id": CONSUMER_GROUP, "enable.auto.commit": False,
             "client.id": consumer_id})
        lane = f"consumer {consumer_id}"
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            deadline = time.monotonic() + READ_BACK_TIMEOUT_S
            while time.monotonic() < deadline:
                started = _now_us()
                records = consumer.poll(200).records(tp)
                found = next((r for r in records if r.offset == offset), None)
                if found is None:
                    if records and records[-1].offset > offset:
                        self._change(journey, note=f"offset {offset} was not returned "
                                                   "(compacted or aborted?)")
                        return
                    continue
                done = _now_us()
                self._change(journey, client=[_stage(
                    "consumer.poll", done, lane, f"poll returned offset {offset} "
                    f"({len(records)} record(s))", duration_us=done - started,
                    group=CONSUMER_GROUP, client_id=consumer_id, partition=partition,
                    offset=offset)])
                started = _now_us()
                consumer.commit_sync({tp: offset + 1})
                done = _now_us()
                # timed from its start: the coordinator applies it before it returns
                self._change(journey, client=[_stage(
                    "consumer.commit", started, lane, f"committed offset {offset + 1} for "
                    f"group {CONSUMER_GROUP}", duration_us=done - started,
                    group=CONSUMER_GROUP, client_id=consumer_id,
                    committed_offset=offset + 1)])
                return
            self._change(journey, note=f"the console's consumer did not read offset "
                                       f"{offset} within {READ_BACK_TIMEOUT_S:.0f} s")
        finally:
            with contextlib.suppress(MillraceError):
                consumer.close(timeout_ms=2000)

    def _follow(self, journey: Journey, brokers: list[tuple[int, str]]) -> None:
        """Read the brokers' records of the journey again and again for ``FOLLOW_S``."""
        if self._http is None or not brokers:
            return
        path = "/v1/traces/" + quote(journey.trace_id, safe="")
        deadline = time.monotonic() + FOLLOW_S
        while not self._closed:
            for broker, host in brokers:
                try:
                    with self._http_lock:
                        view = self._http.get(broker, host, path)
                except BrokerHttpUnavailable:
                    continue   # noted when arming failed; a broker may be down now
                events = [e for r in view.get("records", []) if isinstance(r, dict)
                          for e in r.get("events", []) if isinstance(e, dict)]
                self._change(journey, broker=(broker, events))
            if time.monotonic() >= deadline:
                return
            time.sleep(FOLLOW_EVERY_S)

    # ------------------------------------------------------------------ a record in the log
    def lookup(self, topic: str, partition: int, offset: int) -> dict[str, Any]:
        """What is known of the record at ``offset`` (module docstring)."""
        tp = TopicPartition(topic, partition)
        consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
            {**self._configs, "group.id": None, "enable.auto.commit": False,
             "allow.auto.create.topics": False, "client.id": self._client_id + "-lookup"})
        try:
            known = consumer.list_topics(timeout_ms=10_000).get(topic)
            if not known:
                raise BadRequest(f"topic {topic!r} does not exist")
            if partition not in {p.partition for p in known}:
                raise BadRequest(f"topic {topic!r} has no partition {partition}")
            consumer.assign([tp])
            begin = consumer.beginning_offsets([tp])[tp]
            end = consumer.end_offsets([tp])[tp]
            if not begin <= offset < end:
                raise BadRequest(f"offset {offset} is not in the log of {topic}-{partition} "
                                 f"(it holds {begin} to {end - 1})" if end > begin else
                                 f"{topic}-{partition} holds no records")
            consumer.seek(tp, offset)
            found = None
            deadline = time.monotonic() + READ_BACK_TIMEOUT_S
            while found is None and time.monotonic() < deadline:
                for record in consumer.poll(200).records(tp):
                    if record.offset >= offset:
                        found = record
                        break
        finally:
            with contextlib.suppress(MillraceError):
                consumer.close(timeout_ms=2000)
        if found is None:
            raise BadRequest(f"offset {offset} of {topic}-{partition} could not be read")
        stages: list[dict[str, Any]] = []
        facts: list[str] = []
        if found.offset != offset:
            facts.append(f"offset {offset} is not a record here (compacted, or a "
                         f"transaction marker); the next record is at {found.offset}")
        trace_id = None
        header = dict(found.headers).get("traceparent")
        if header is not None:
            context = parse_traceparent(header)
            if context is not None:
                trace_id = context[0]
        kind = "log append time" if found.timestamp_type is TimestampType.LOG_APPEND_TIME else "create time"
        stages.append(_stage("record.timestamp", found.timestamp * 1000, "log",
                             f"the record's timestamp ({kind})", offset=found.offset))
        if end > found.offset:
            facts.append(f"the high watermark ({end}) has passed it: every in-sync "
                         "replica has it, and consumers may read it")
        stages.extend(self._broker_lookup(topic, partition, found.offset, facts))
        facts.extend(self._groups_past(tp, found.offset))
        stages.sort(key=lambda s: s["t_us"])
        return {"record": {"topic": topic, "partition": partition, "offset": found.offset,
                           "timestamp": found.timestamp, "trace_id": trace_id},
                "stages": stages, "facts": facts}

    def _broker_lookup(self, topic: str, partition: int, offset: int,
                       facts: list[str]) -> list[dict[str, Any]]:
        if self._http is None:
            facts.append("the brokers' records were not read (--protocol-only)")
            return []
        query = urlencode({"topic": topic, "partition": partition, "offset": offset})
        events: list[dict[str, Any]] = []
        traced = False
        for broker, host in self._brokers():
            try:
                with self._http_lock:
                    view = self._http.get(broker, host, "/v1/traces?" + query)
            except BrokerHttpUnavailable as e:
                facts.append(f"broker {broker}: {e}")
                continue
            for record in view.get("records", []):
                if isinstance(record, dict):
                    traced = True
                    events.extend(_in_lane(e, broker) for e in record.get("events", [])
                                  if isinstance(e, dict))
        if not traced:
            facts.append("no broker recorded its journey: it was not traced (its topic "
                         "was not armed when it was written)")
        return events

    def _groups_past(self, tp: TopicPartition, offset: int) -> list[str]:
        out = []
        try:
            listings = self._admin.list_groups()
            if len(listings) > MAX_GROUPS_ASKED:
                out.append(f"only the first {MAX_GROUPS_ASKED} of {len(listings)} groups "
                           "were asked for their offsets")
            for listing in listings[:MAX_GROUPS_ASKED]:
                group = listing.group_id
                committed = self._admin.list_group_offsets(
                    group, [tp], include_lag=False).get(tp)
                if committed is not None and committed.offset > offset:
                    out.append(f"group {group} has committed past it "
                               f"(offset {committed.offset})")
        except MillraceError as e:
            out.append(f"the groups' offsets were not read: {_one_line(e)}")
        return out

    # ------------------------------------------------------------------ the journeys
    def get(self, trace_id: str) -> Journey | None:
        with self._lock:
            return self._journeys.get(trace_id)

    def recent(self) -> list[Journey]:
        with self._lock:
            return list(self._journeys.values())

    def close(self) -> None:
        self._closed = True
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            with contextlib.suppress(MillraceError):
                producer.close(timeout=5)

    def _keep(self, journey: Journey) -> None:
        with self._lock:
            self._journeys[journey.trace_id] = journey
            while len(self._journeys) > MAX_JOURNEYS:
                self._journeys.popitem(last=False)

    def _producer(self, acks: str) -> KafkaProducer[bytes, bytes]:
        with self._lock:
            producer = self._producers.get(acks)
            if producer is None:
                producer = self._producers[acks] = KafkaProducer(
                    {**self._configs, "acks": acks, "client.id": self._client_id})
            return producer

    def _brokers(self) -> list[tuple[int, str]]:
        cluster = self._admin.describe_cluster()
        return [(node.id, node.host) for node in cluster.nodes]

    def _broadcast(self, journey: Journey, brokers: list[tuple[int, str]], path: str,
                   body: Mapping[str, Any]) -> None:
        if self._http is None:
            if path.endswith("/arm"):
                self._change(journey, note="the brokers' part is not shown: the console "
                                           "reads the cluster only through the Kafka "
                                           "protocol (--protocol-only)")
            return
        for broker, host in brokers:
            try:
                with self._http_lock:
                    self._http.post(broker, host, path, body)
            except BrokerHttpDenied as e:
                self._change(journey, denied=f"{path}: {e}")
            except BrokerHttpUnavailable as e:
                self._change(journey, note=f"{path}: {e}")

    def _change(self, journey: Journey, *, client: list[dict[str, Any]] | None = None,
                broker: tuple[int, list[dict[str, Any]]] | None = None,
                note: str | None = None, denied: str | None = None,
                record: dict[str, Any] | None = None, state: str | None = None) -> None:
        with journey.lock:
            before = (len(journey.client_stages), sum(map(len,
                                                          journey.broker_events.values())),
                      len(journey.notes), len(journey.denied), journey.state)
            if client is not None:
                seen = {(s["stage"], s.get("lane")) for s in journey.client_stages}
                journey.client_stages.extend(s for s in client
                                             if (s["stage"], s.get("lane")) not in seen)
            if broker is not None:
                journey.broker_events[broker[0]] = [_in_lane(e, broker[0])
                                                    for e in broker[1]]
            if note is not None:
                journey.notes.append(note)
            if denied is not None:
                journey.denied.append(denied)
            if record is not None:
                journey.record = record
            if state is not None:
                journey.state = state
            after = (len(journey.client_stages), sum(map(len,
                                                         journey.broker_events.values())),
                     len(journey.notes), len(journey.denied), journey.state)
            if after == before and record is None:
                return
            journey.version += 1
        self._notify()


class OtlpExport:
    """Exports a finished journey through ``provider`` (``millrace.client.otel``'s
    ``journey_tracer_provider``) and flushes it."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def __call__(self, journey: Journey) -> None:
        from millrace.client.otel import export_consumed, export_journey

        with journey.lock:
            events = [e for found in journey.broker_events.values() for e in found]
            consumed = [s for s in journey.client_stages
                        if s["stage"] in ("consumer.poll", "consumer.commit")]
            record = dict(journey.record)
        traced = journey.traced
        export_journey(traced, events, self.provider)
        if consumed and "offset" in record:
            export_consumed(traced.trace_id, traced.span_id, topic=record["topic"],
                            partition=record["partition"], offset=record["offset"],
                            group=CONSUMER_GROUP, client_id=consumed[0].get("client_id"),
                            stages=consumed, tracer_provider=self.provider)
        if not self.provider.force_flush(10_000):
            raise TimeoutError("the OTLP exporter did not flush within 10 s")


def _stage(stage: str, t_us: int, lane: str, detail: str, *, duration_us: int = 0,
           **attrs: Any) -> dict[str, Any]:
    return {"stage": stage, "t_us": t_us, "duration_us": duration_us, "lane": lane,
            "detail": detail, **attrs}


def _in_lane(event: dict[str, Any], broker: int) -> dict[str, Any]:
    """A broker's event in its lane: the reporter's own (a pipeline's), else the broker's."""
    return {**event, "lane": event.get("lane") or f"broker {event.get('broker', broker)}"}


def _now_us() -> int:
    return time.time_ns() // 1000


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
