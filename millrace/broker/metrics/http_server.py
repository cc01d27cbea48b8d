"""``BrokerHttpServer``: the broker's HTTP listeners (``http.listeners``), served by
aiohttp inside the broker's own event loop (an ``AppRunner`` with one ``TCPSite`` per
listener; Redpanda serves the same on its admin port, 9644).

Routes:

- ``GET /metrics``: every metric in the Prometheus text format, or OpenMetrics when the
  scraper's ``Accept`` asks for it (``prometheus.exposition``), gzip-compressed when it
  accepts gzip;
- ``GET /healthz``: 200 while the process serves (a liveness probe);
- ``GET /readyz``: 200 when the broker is ready for clients, else 503 with the reasons
  (a readiness probe): registered and accepting, every log dir online and, in a
  cluster, holding the controller's metadata (an UpdateMetadata received, this broker
  among the live ones);
- ``GET /v1/consumer-groups[/{group}]``: consumer lag and Burrow's status of the groups
  this broker coordinates (``lag_http``), when the lag monitor runs;
- ``/v1/partitions/{topic}/state-changes`` (``PartitionStateLog``) and ``/v1/traces...``
  (``RecordTracer``: GETs, and POSTs of at most 64 KiB of JSON that want Alter on the
  cluster besides; the guard leaves the authenticated user in ``request["user"]``).

With ``http.authentication.method=BASIC`` every route but the probes needs HTTP basic
credentials of one of the broker's SASL users (``HttpBasicAuthenticator``; 401 after
``connection.failed.authentication.delay.ms``) and, when an authorizer is configured,
``Describe`` on the cluster (403 otherwise) — what the metrics reveal (topic and group
names) is what ``Describe`` protects.  ``https://`` listeners use the TLS context of the
broker's first SSL / SASL_SSL listener.

Bad input: aiohttp refuses malformed requests and oversize headers with 400, unknown
paths with 404 and other methods with 405; no request body is read but the record
tracer's (bounded).  aiohttp logs each
malformed request at ERROR with a traceback (and the offending bytes, which may be an
``Authorization`` header); its request handlers log through ``_request_log`` instead,
where a client's bad request is one INFO line naming the error class only, and a
handler's own failure keeps its traceback.  A scrape renders on
the event loop: each one costs a few milliseconds for hundreds of partitions.

Thread ownership: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from millrace.broker.config import HttpListener, KafkaConfig
from millrace.broker.metrics.prometheus import collector_registry, exposition
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.security.basic_auth import HttpBasicAuthenticator
from millrace.common.errors import ConfigError

log = logging.getLogger(__name__)

Readiness = Callable[[], list[str]]  # why the broker is not ready; [] when it is
Authorize = Callable[[str, str], bool]  # (user, client host) -> may Describe the cluster
PROBES = frozenset({"/healthz", "/readyz"})


class BadRequestFilter(logging.Filter):
    """A client's malformed request (an ``HttpProcessingError`` aiohttp answered with
    400) becomes one INFO line without traceback or request bytes (module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            record.msg = f"{record.msg}: bad HTTP request ({type(error).__name__}, " \
                         f"answered {error.code})"
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
        return True


_request_log = logging.getLogger(__name__ + ".requests")
_request_log.addFilter(BadRequestFilter())


class HttpBindError(Exception):
    """An ``http.listeners`` address could not be bound."""


def bind_http_listeners(config: KafkaConfig) -> list[tuple[HttpListener, socket.socket]]:
    """Bind every HTTP listener now (the broker binds all its ports before it touches
    its log dirs, so a taken port fails start-up at once); served later."""
    bound: list[tuple[HttpListener, socket.socket]] = []
    for listener in config.http_listeners:
        host = listener.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, listener.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            for _, other in bound:
                other.close()
            raise HttpBindError(f"cannot listen on {listener.url} (http.listeners): "
                                f"{e.strerror or e}") from e
        bound.append((listener, sock))
    return bound


def _json(status: int, body: object) -> web.Response:
    return web.Response(status=status, text=json.dumps(body, indent=1) + "\n",
                        content_type="application/json")


class BrokerHttpServer:
    def __init__(self, config: KafkaConfig, sockets: list[tuple[HttpListener, socket.socket]],
                 registry: KafkaMetricsRegistry, readiness: Readiness, *,
                 tls: ssl.SSLContext | None = None,
                 authenticator: HttpBasicAuthenticator | None = None,
                 authorize: Authorize | None = None,
                 routes: Iterable[web.RouteDef] = ()) -> None:
        self.sockets = sockets
        if any(ls.scheme == "https" for ls, _ in sockets) and tls is None:
            raise ConfigError("Invalid value for configuration http.listeners: an https:// "
                              "listener needs the TLS settings of an SSL or SASL_SSL "
                              "listener, and the broker has none")
        self.registry = registry
        self.prometheus = collector_registry(registry)
        self.readiness = readiness
        self.tls = tls
        self.authenticator = authenticator
        self.authorize = authorize
        self.failed_delay_s = config["connection.failed.authentication.delay.ms"] / 1000
        self.bound: list[tuple[HttpListener, int]] = []
        app = web.Application(middlewares=[self._guard])
        app.add_routes([web.get("/metrics", self._metrics),
                        web.get("/healthz", self._healthz),
                        web.get("/readyz", self._readyz), *routes])
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     logger=_request_log)

    async def start(self) -> None:
        await self._runner.setup()
        for listener, sock in self.sockets:
            site = web.SockSite(self._runner, sock,
                                ssl_context=self.tls if listener.scheme == "https" else None)
            await site.start()
            port = int(sock.getsockname()[1])
            self.bound.append((listener, port))
            log.info("serving HTTP on %s://%s:%d (/metrics, /healthz, /readyz)",
                     listener.scheme, listener.host or "0.0.0.0", port)

    def urls(self) -> list[str]:
        out = []
        for listener, port in self.bound:
            host = listener.host or "127.0.0.1"
            host = f"[{host}]" if ":" in host else host
            out.append(f"{listener.scheme}://{host}:{port}")
        return out

    async def stop(self) -> None:
        await self._runner.cleanup()
        for _, sock in self.sockets:
            sock.close()

    # ------------------------------------------------------------------ routes
    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        if self.authenticator is None or request.path in PROBES:
            return await handler(request)
        user = await self.authenticator.authenticate(request.headers.get("Authorization"))
        if user is None:
            await asyncio.sleep(self.failed_delay_s)
            return web.Response(status=401, text="authentication failed\n",
                                headers={"WWW-Authenticate": 'Basic realm="millrace"'})
        if self.authorize is not None and not self.authorize(user, request.remote or ""):
            return web.Response(status=403, text=f"User:{user} may not Describe the "
                                                 "cluster\n")
        request["user"] = user  # for routes that ask more (the record tracer's POSTs)
        return await handler(request)

    async def _metrics(self, request: web.Request) -> web.Response:
        body, content_type = exposition(self.prometheus, request.headers.get("Accept"))
        response = web.Response(body=body, headers={"Content-Type": content_type})
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            response.enable_compression()
        return response

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        reasons = self.readiness()
        if reasons:
            return _json(503, {"ready": False, "reasons": reasons})
        return _json(200, {"ready": True})
