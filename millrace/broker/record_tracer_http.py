"""The HTTP routes of the ``RecordTracer`` (``record_tracer.py``), served by the broker's
HTTP listener (``BrokerHttpServer``, whose guard authenticates the caller and, under an
authorizer, wants Describe on the cluster):

- ``GET /v1/traces/{trace_id}`` -> ``{"broker": id, "records": [{"trace_id", "span_id",
  "topic", "partition", "offset", "events": [...]}]}`` (400 unless 32 lowercase hex);
- ``GET /v1/traces?topic=T&partition=P&offset=N`` -> the same, for that record;
- ``POST /v1/traces/arm`` ``{"topic", "ttl_ms"?}`` -> ``{"broker", "topic",
  "armed_until_ms", "partitions"}`` (429 beyond ``MAX_ARMED`` armed topics);
- ``POST /v1/traces/watch`` ``{"trace_id", "span_id"?, "topic", "partition", "offset",
  "ttl_ms"?}`` -> ``{"broker", "watching": true}``;
- ``POST /v1/traces/report`` ``{"topic", "partition", "from_offset", "until_offset",
  "stage", "lane", "detail", "t_us"?, "attrs"?}`` -> ``{"broker", "matched": n}``: a
  client that handled offsets [from, until) of the partition (a Spark micro-batch, a
  sink's commit) adds ``stage`` (``spark.*``, ``sink.*``, ``client.*``) to the traced
  records among them (``RecordTracer.report``; a retried report adds nothing); or
  ``{"ranges": [{"topic", "partition", "from_offset", "until_offset"}, ...], "stage",
  ...}`` for several partitions at once (a micro-batch in one POST per broker).

Arm and watch change what the broker does: under an authorizer the caller (the guard's
``request["user"]``; ``ANONYMOUS`` on a listener without authentication) needs Alter on
the cluster, asked first (403 before the body or the topic is looked at).  A report
needs Read on its topics instead (the reporter read those records), asked as soon as
the body names them and before anything else about them is looked at.  Then the body
must be JSON (415), at most 64 KiB (413, read in pieces: a chunked body is bounded too),
an object whose fields are checked (400 naming the field).  Errors are JSON
``{"error": "..."}``.

Thread ownership: the broker's event-loop thread (aiohttp's handlers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from millrace.broker.record_tracer import (
    DEFAULT_TTL_MS,
    MAX_TTL_MS,
    WATCH_TTL_MS,
    Authorize,
    RecordTracer,
    TooManyArmed,
    TracedRecord,
    check_report,
)

MAX_BODY_BYTES = 64 * 1024
TRACE_PATH = "/v1/traces/{trace_id}"
QUERY_PATH = "/v1/traces"
ARM_PATH = "/v1/traces/arm"
WATCH_PATH = "/v1/traces/watch"
REPORT_PATH = "/v1/traces/report"
MAX_REPORT_RANGES = 10_000

ReadTopic = Callable[[str, str, str], bool]  # (user, client host, topic) -> may Read it

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_ZERO_TRACE = "0" * 32


def trace_routes(tracer: RecordTracer, authorize: Authorize | None = None,
                 may_read: ReadTopic | None = None) -> list[web.RouteDef]:
    """``GET /v1/traces/{trace_id}``, ``GET /v1/traces?topic&partition&offset``,
    ``POST /v1/traces/arm``, ``/v1/traces/watch`` and ``/v1/traces/report`` (the
    listener's guard has authenticated the caller; ``authorize``, given under an
    authorizer, wants Alter on the cluster for arm and watch, asked before anything
    else; ``may_read``, given under an authorizer, wants Read on a report's topic)."""

    def records(found: list[TracedRecord]) -> web.Response:
        return web.json_response({"broker": tracer.broker_id,
                                  "records": [r.to_json() for r in found]})

    async def by_id(request: web.Request) -> web.Response:
        tracer.expire()
        trace_id = request.match_info["trace_id"]
        if _TRACE_ID.fullmatch(trace_id) is None:
            return _error(400, "trace_id must be 32 lowercase hex digits")
        return records(tracer.by_trace(trace_id))

    async def by_offset(request: web.Request) -> web.Response:
        tracer.expire()
        q = request.query
        topic = q.get("topic")
        if not topic:
            return _error(400, "topic is required")
        values = {}
        for name in ("partition", "offset"):
            raw = q.get(name)
            if raw is None or not raw.isdigit() or len(raw) > 19:
                return _error(400, f"{name} is required, a non-negative integer")
            values[name] = int(raw)
        return records(tracer.by_offset(topic, values["partition"], values["offset"]))

    async def arm(request: web.Request) -> web.Response:
        body = await _body(request, authorize)
        if isinstance(body, web.Response):
            return body
        topic = body.get("topic")
        if not isinstance(topic, str) or not topic:
            return _error(400, "topic must be a non-empty string")
        ttl = body.get("ttl_ms", DEFAULT_TTL_MS)
        if isinstance(ttl, bool) or not isinstance(ttl, int) or \
                not 1 <= ttl <= MAX_TTL_MS:
            return _error(400, f"ttl_ms must be an integer from 1 to {MAX_TTL_MS}")
        try:
            until_ms, partitions = tracer.arm(topic, ttl)
        except TooManyArmed as e:
            return _error(429, str(e))
        return web.json_response({"broker": tracer.broker_id, "topic": topic,
                                  "armed_until_ms": until_ms, "partitions": partitions})

    async def watch(request: web.Request) -> web.Response:
        body = await _body(request, authorize)
        if isinstance(body, web.Response):
            return body
        trace_id, span_id = body.get("trace_id"), body.get("span_id")
        if not isinstance(trace_id, str) or _TRACE_ID.fullmatch(trace_id) is None \
                or trace_id == _ZERO_TRACE:
            return _error(400, "trace_id must be 32 lowercase hex digits, not all zero")
        if span_id is not None and (not isinstance(span_id, str)
                                    or _SPAN_ID.fullmatch(span_id) is None):
            return _error(400, "span_id must be 16 lowercase hex digits")
        topic = body.get("topic")
        if not isinstance(topic, str) or not topic:
            return _error(400, "topic must be a non-empty string")
        for name in ("partition", "offset"):
            value = body.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return _error(400, f"{name} must be a non-negative integer")
        ttl = body.get("ttl_ms", WATCH_TTL_MS)
        if isinstance(ttl, bool) or not isinstance(ttl, int) or \
                not 1 <= ttl <= MAX_TTL_MS:
            return _error(400, f"ttl_ms must be an integer from 1 to {MAX_TTL_MS}")
        tracer.watch(trace_id, span_id, topic, body["partition"], body["offset"], ttl)
        return web.json_response({"broker": tracer.broker_id, "watching": True})

    async def report(request: web.Request) -> web.Response:
        body = await _body(request, None)
        if isinstance(body, web.Response):
            return body
        ranges = _report_ranges(body)
        if isinstance(ranges, web.Response):
            return ranges
        if may_read is not None:  # before anything about the topics is looked at
            user = request.get("user") or "ANONYMOUS"
            for topic in dict.fromkeys(r[0] for r in ranges):
                if not may_read(user, request.remote or "", topic):
                    return _error(403, f"User:{user} may not Read topic {topic!r}")
        for name in ("stage", "lane", "detail"):
            if name not in body:
                return _error(400, f"{name} is required")
        try:
            for _, partition, from_offset, until_offset in ranges:
                if isinstance(partition, bool) or not isinstance(partition, int) or \
                        partition < 0:
                    raise ValueError("partition must be a non-negative integer")
                check_report(from_offset, until_offset, body["stage"], body["lane"],
                             body["detail"], body.get("t_us"), body.get("attrs"))
        except ValueError as e:
            return _error(400, str(e))
        matched = sum(tracer.report(topic, partition, from_offset, until_offset,
                                    body["stage"], body["lane"], body["detail"],
                                    body.get("t_us"), body.get("attrs"))
                      for topic, partition, from_offset, until_offset in ranges)
        return web.json_response({"broker": tracer.broker_id, "matched": matched})

    return [web.get(QUERY_PATH, by_offset), web.post(ARM_PATH, arm),
            web.post(WATCH_PATH, watch), web.post(REPORT_PATH, report),
            web.get(TRACE_PATH, by_id)]


def _report_ranges(body: dict[str, Any]) -> list[tuple[str, Any, Any, Any]] | web.Response:
    """A report's (topic, partition, from, until): the body's own, or its ``ranges``
    (at most ``MAX_REPORT_RANGES``); only the topics are checked here (400)."""
    if "ranges" not in body:
        entries: Any = [body]
    else:
        entries = body["ranges"]
        if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_REPORT_RANGES \
                or not all(isinstance(e, dict) for e in entries):
            return _error(400, f"ranges must be a list of 1 to {MAX_REPORT_RANGES} objects "
                               "{topic, partition, from_offset, until_offset}")
    ranges = []
    for entry in entries:
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            return _error(400, "topic must be a non-empty string")
        for name in ("partition", "from_offset", "until_offset"):
            if name not in entry:
                return _error(400, f"{name} is required")
        ranges.append((topic, entry["partition"], entry["from_offset"],
                       entry["until_offset"]))
    return ranges


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _body(request: web.Request, authorize: Authorize | None
                ) -> dict[str, Any] | web.Response:
    """A POST's JSON object, after the caller's Alter-on-cluster check (403), the
    media type (415) and the size (413); else the error response."""
    if authorize is not None:
        user = request.get("user") or "ANONYMOUS"
        if not authorize(user, request.remote or ""):
            return _error(403, f"User:{user} may not Alter the cluster")
    if request.content_type != "application/json":
        return _error(415, "the body must be JSON (Content-Type: application/json)")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        return _error(413, f"the body must be at most {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(16 * 1024):
        size += len(chunk)
        if size > MAX_BODY_BYTES:  # chunked, or a Content-Length that lied
            return _error(413, f"the body must be at most {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError):
        return _error(400, "the body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    return body
