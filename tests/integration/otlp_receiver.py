"""A tiny real OTLP/HTTP receiver for the export tests: an aiohttp server on loopback
answering POST /v1/traces the way a collector does, decoding each body with OpenTelemetry's
own protobuf classes."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from millrace.testing.broker_process import free_port


class OtlpReceiver:
    """POST /v1/traces -> the decoded ExportTraceServiceRequests, on its own loop thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otlp-receiver", daemon=True)
        self._runner: web.AppRunner | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        message = trace_service_pb2.ExportTraceServiceRequest()
        message.ParseFromString(body)
        self.requests.append(message)
        self.content_types.append(request.content_type)
        reply = trace_service_pb2.ExportTraceServiceResponse()
        return web.Response(body=reply.SerializeToString(),
                            content_type="application/x-protobuf")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        assert self._started.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def spans(self) -> list[trace_pb2.Span]:
        return [span for request in self.requests for rs in request.resource_spans
                for ss in rs.scope_spans for span in ss.spans]

    def spans_of(self, trace_id: str) -> list[trace_pb2.Span]:
        return [s for s in self.spans() if s.trace_id.hex() == trace_id]


def attributes(span: trace_pb2.Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out
