"""``millrace console``: the web console's HTTP server (aiohttp) and its JSON API.

One process: an aiohttp application on the event loop, a ``ClusterWatcher`` polled every
``interval_s`` on a thread of its own (the admin client blocks), and a small pool of
worker threads for the requests that read or write records.  The page is the package's
``static/`` files; it loads nothing from anywhere else (``Content-Security-Policy:
default-src 'self'``).

Routes (the page's contract; ``static/app.js`` is the one client):

- ``GET /api/stream``: server-sent events, one ``state`` event with the snapshot on
  connect and after every poll (one stream per tab carries every view's updates).
- ``GET /api/state``, ``/api/topics/{name}``, ``/api/groups/{id}``,
  ``/api/messages?topic=..``: the snapshot, a topic's and a group's detail, a browse.
- ``GET /api/security``: ACLs, SCRAM users and quotas, each part with its own error
  (``security``).
- ``POST /api/journey``: send a traced record (``journey``); ``202`` with its trace id,
  then its journey arrives as SSE ``journey`` events, and at
  ``GET /api/journey/{trace_id}``.  ``GET /api/journey?topic=&partition=&offset=``:
  what is known of a record already in the log.
- ``POST /api/produce``, ``POST /api/topics``, ``DELETE /api/topics/{name}``,
  ``POST /api/topics/{name}/partitions``, ``POST /api/topics/{name}/configs`` (``{"set":
  {name: value}, "delete": [name]}``: IncrementalAlterConfigs), ``POST
  /api/groups/{id}/reset``,
  ``POST /api/users``, ``DELETE /api/users/{name}?mechanism=``: the writes, refused with
  403 under ``--read-only``.

Errors are JSON ``{"error": text, "denied": bool}``: 400 for a request the console or the
cluster refuses (the Kafka error's name in the text), 403 with ``denied`` true when the
cluster's authorizer said no (the page shows it as denied, not as a failure), 404 for an
unknown topic or group, 502/504 when the cluster cannot be reached.

Access.  Bound to a loopback address the console needs no login.  Bound to any other
address it requires one: ``POST /login`` with the token (compared in constant time) sets
a random session cookie (HttpOnly, SameSite=Strict; the newest ``MAX_SESSIONS`` are
kept); every route but ``/login``, ``/healthz`` and the static files answers 401 (the
page: a redirect to ``/login``) without it.  Writes take JSON bodies only and, when the browser
sends an ``Origin``, only from the console's own origin, so no other site can make a
logged-in browser write.  Bodies are capped at ``MAX_BODY`` bytes before anything else
reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from millrace.client.admin import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
    OffsetResetSpec,
)
from millrace.client.admin.broker_http import BrokerHttp
from millrace.common.errors import KafkaError, MillraceError
from millrace.console import security
from millrace.console.journey import JourneyRequest, JourneyTracker, OtlpExport
from millrace.console.messages import BadRequest, BrowseRequest, Producer, ProduceRequest, browse
from millrace.console.watcher import ClusterWatcher

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
MAX_SESSIONS = 1000
MAX_RUNNING_JOURNEYS = 4
SESSION_COOKIE = "millrace_console"
STATIC_FILES = {"app.js": "text/javascript", "style.css": "text/css",
                "index.html": "text/html"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ConsoleServer:
    """The console (module docstring).  ``start`` binds and begins polling; ``stop``
    closes everything."""

    def __init__(self, client_configs: Mapping[str, Any], *, host: str = "127.0.0.1",
                 port: int = 8080, read_only: bool = False, token: str | None = None,
                 interval_s: float = 1.0, protocol_only: bool = False,
                 otlp: Any = None) -> None:
        if not is_loopback(host) and not token:
            raise ValueError(f"the console bound to {host} (not loopback) needs a login "
                             "token")
        self.configs = dict(client_configs)
        self.configs.setdefault("client.id", "millrace-console")
        self.host, self.port = host, port
        self.read_only = read_only
        self._token = token
        self._sessions: dict[str, None] = {}   # session ids, oldest first
        self.interval_s = interval_s
        self.admin = KafkaAdminClient(self.configs)
        # protocol_only: never the brokers' HTTP views, as against any Kafka
        http = None if protocol_only else BrokerHttp(self.admin, self.configs, 2.0)
        self.watcher = ClusterWatcher(self.admin, read_only=read_only, broker_http=http)
        self.producer = Producer(self.configs)
        self.journeys = JourneyTracker(self.configs, self.admin, http, notify=self._notify,
                                       export=None if otlp is None else OtlpExport(otlp))
        self._running_journeys = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poll_pool = ThreadPoolExecutor(1, thread_name_prefix="console-poll")
        self._work_pool = ThreadPoolExecutor(4, thread_name_prefix="console-work")
        self._journey_pool = ThreadPoolExecutor(MAX_RUNNING_JOURNEYS,
                                                thread_name_prefix="console-journey")
        self._tick = asyncio.Event()
        self._closing = False
        self._poller: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ------------------------------------------------------------------ life
    def application(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY,
                              middlewares=[self._headers, self._access])
        app.add_routes([
            web.get("/", self._index), web.get("/static/{name}", self._static),
            web.get("/healthz", self._healthz),
            web.get("/login", self._login_page), web.post("/login", self._login),
            web.get("/api/state", self._state), web.get("/api/stream", self._stream),
            web.get("/api/topics/{name}", self._topic),
            web.get("/api/groups/{group}", self._group),
            web.get("/api/messages", self._messages),
            web.get("/api/journey", self._journey_lookup),
            web.get("/api/journey/{trace_id}", self._journey),
            web.post("/api/journey", self._write(self._trace)),
            web.post("/api/produce", self._write(self._produce)),
            web.post("/api/topics", self._write(self._create_topic)),
            web.delete("/api/topics/{name}", self._write(self._delete_topic)),
            web.post("/api/topics/{name}/partitions", self._write(self._add_partitions)),
            web.post("/api/topics/{name}/configs", self._write(self._alter_configs)),
            web.post("/api/groups/{group}/reset", self._write(self._reset_offsets)),
            web.get("/api/security", self._security),
            web.post("/api/users", self._write(self._create_user)),
            web.delete("/api/users/{name}", self._write(self._delete_user)),
        ])
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.application(), access_log=None,
                                     handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        await web.SockSite(self._runner, sock).start()
        self.port = int(sock.getsockname()[1])
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}/"
        self._loop = asyncio.get_running_loop()
        self._poller = asyncio.create_task(self._poll_forever())

    async def stop(self) -> None:
        self._closing = True
        self._tick.set()
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        if self._runner is not None:
            await self._runner.cleanup()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._close_clients)

    def _close_clients(self) -> None:
        self.journeys.close()
        self._poll_pool.shutdown(wait=True, cancel_futures=True)
        self._work_pool.shutdown(wait=True, cancel_futures=True)
        self._journey_pool.shutdown(wait=True, cancel_futures=True)
        self.journeys.close()   # a producer a journey made while closing
        self.producer.close()
        self.admin.close()

    async def _poll_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            started = loop.time()
            try:
                await loop.run_in_executor(self._poll_pool, self.watcher.poll)
            except Exception:  # a defect in the watcher must not end the console
                log.exception("polling the cluster failed")
            self._wake()
            await asyncio.sleep(max(0.0, self.interval_s - (loop.time() - started)))

    def _wake(self) -> None:
        """Every SSE stream sends what changed (the event loop's thread)."""
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    def _notify(self) -> None:
        """A journey changed (any thread)."""
        loop = self._loop
        if loop is not None and not self._closing:
            with contextlib.suppress(RuntimeError):   # the loop closed meanwhile
                loop.call_soon_threadsafe(self._wake)

    # ------------------------------------------------------------------ middleware
    @web.middleware
    async def _headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as e:
            response = e
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if isinstance(response, web.HTTPException):
            raise response
        return response

    @web.middleware
    async def _access(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if (self._token is None or request.path in ("/login", "/healthz")
                or request.path.startswith("/static/")):   # the login page's stylesheet
            return await handler(request)
        if request.cookies.get(SESSION_COOKIE, "") in self._sessions:
            return await handler(request)
        if request.path.startswith("/api/"):
            return _error(401, "login required")
        raise web.HTTPFound("/login")

    def _write(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if self.read_only:
                return _error(403, "the console is read-only (--read-only)")
            origin = request.headers.get("Origin")
            if origin is not None and urlsplit(origin).netloc != request.host:
                return _error(403, f"a write from another origin ({origin}) is refused")
            if request.method == "POST" and request.content_type != "application/json":
                return _error(415, "writes take a JSON body (Content-Type: application/json)")
            return await handler(request)
        return guarded

    # ------------------------------------------------------------------ pages
    async def _index(self, request: web.Request) -> web.StreamResponse:
        return _static_response("index.html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return _static_response(name)

    async def _healthz(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "ok"})

    async def _login_page(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=LOGIN_PAGE, content_type="text/html")

    async def _login(self, request: web.Request) -> web.StreamResponse:
        if self._token is None:
            raise web.HTTPFound("/")
        form = await request.post()
        given = form.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(
                given.encode(), self._token.encode()):
            await asyncio.sleep(0.5)   # a guess costs the guesser time
            return web.Response(text=LOGIN_PAGE.replace("<!--error-->",
                                                        "<p class=error>wrong token</p>"),
                                content_type="text/html", status=401)
        session = secrets.token_urlsafe(32)
        self._sessions[session] = None
        while len(self._sessions) > MAX_SESSIONS:   # the oldest login goes first
            del self._sessions[next(iter(self._sessions))]
        response = web.HTTPFound("/")
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="Strict")
        raise response

    # ------------------------------------------------------------------ reads
    async def _state(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.watcher.snapshot())

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent: dict[str, int] = {}   # trace id -> the version this stream has sent
        state = None
        try:
            await response.write(b"retry: 2000\n\n")
            while not self._closing:
                snapshot = self.watcher.snapshot()
                if snapshot is not state:
                    state = snapshot
                    payload = json.dumps(snapshot, separators=(",", ":"))
                    await response.write(f"event: state\ndata: {payload}\n\n".encode())
                for journey in self.journeys.recent():
                    if journey.version > sent.get(journey.trace_id, 0):
                        view = journey.to_json()
                        sent[journey.trace_id] = view["version"]
                        payload = json.dumps(view, separators=(",", ":"))
                        await response.write(f"event: journey\ndata: {payload}\n\n"
                                             .encode())
                await self._tick.wait()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def _topic(self, request: web.Request) -> web.StreamResponse:
        return await self._detail("topic", request.match_info["name"],
                                  self.watcher.topic_detail)

    async def _group(self, request: web.Request) -> web.StreamResponse:
        return await self._detail("group", request.match_info["group"],
                                  self.watcher.group_detail)

    async def _detail(self, what: str, key: str,
                      lookup: Callable[[str], dict[str, Any] | None]) -> web.StreamResponse:
        """A topic's or group's detail, read on the poll thread (the watcher's one
        writer); 404 when the console does not know it."""
        detail = await self._in_worker(lookup, key, pool=self._poll_pool)
        if isinstance(detail, web.Response):
            return detail
        if detail is None:
            return _error(404, f"no {what} {key!r} (or not visible to the console)")
        return web.json_response(detail)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        try:
            browse_request = BrowseRequest.from_params(request.query)
        except BadRequest as e:
            return _error(400, str(e))
        result = await self._in_worker(browse, self.configs, browse_request)
        return result if isinstance(result, web.Response) else web.json_response(result)

    async def _journey(self, request: web.Request) -> web.StreamResponse:
        trace_id = request.match_info["trace_id"]
        journey = self.journeys.get(trace_id)
        if journey is None:
            return _error(404, f"no journey {trace_id[:64]!r} (the console keeps the "
                               "newest ones it traced)")
        return web.json_response(journey.to_json())

    async def _journey_lookup(self, request: web.Request) -> web.StreamResponse:
        try:
            topic = request.query.get("topic", "")
            if not topic:
                raise BadRequest("topic is required")
            partition = _query_int(request.query, "partition")
            offset = _query_int(request.query, "offset")
        except BadRequest as e:
            return _error(400, str(e))
        result = await self._in_worker(self.journeys.lookup, topic, partition, offset)
        return result if isinstance(result, web.Response) else web.json_response(result)

    async def _security(self, request: web.Request) -> web.StreamResponse:
        view = await self._in_worker(security.security_view, self.admin)
        return view if isinstance(view, web.Response) else web.json_response(view)

    # ------------------------------------------------------------------ writes
    async def _produce(self, request: web.Request) -> web.StreamResponse:
        try:
            produce = ProduceRequest.from_json(await _json_body(request))
        except BadRequest as e:
            return _error(400, str(e))
        result = await self._in_worker(self.producer.send, produce)
        return result if isinstance(result, web.Response) else web.json_response(result)

    async def _trace(self, request: web.Request) -> web.StreamResponse:
        try:
            journey_request = JourneyRequest.from_json(await _json_body(request))
        except BadRequest as e:
            return _error(400, str(e))
        if self._running_journeys >= MAX_RUNNING_JOURNEYS:
            return _error(429, f"{MAX_RUNNING_JOURNEYS} journeys are being traced; try "
                               "again when one is done")
        journey = self.journeys.begin(journey_request)
        self._running_journeys += 1
        loop = asyncio.get_running_loop()

        def finished(done: asyncio.Future[None]) -> None:
            self._running_journeys -= 1
            if not done.cancelled() and done.exception() is not None:
                log.error("tracing journey %s failed", journey.trace_id,
                          exc_info=done.exception())
        loop.run_in_executor(self._journey_pool, self.journeys.run,
                             journey).add_done_callback(finished)
        return web.json_response({"trace_id": journey.trace_id}, status=202)

    async def _create_topic(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request)
            topic = NewTopic(_str(body, "name"), _positive(body, "partitions", -1),
                             _positive(body, "replication_factor", -1),
                             _string_map(body.get("configs") or {}))
        except BadRequest as e:
            return _error(400, str(e))
        return await self._admin_call(
            lambda: self.admin.create_topics([topic])[topic.name].result())

    async def _delete_topic(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        return await self._admin_call(lambda: self.admin.delete_topics([name])[name].result())

    async def _add_partitions(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        try:
            count = _positive(await _json_body(request), "count", None)
        except BadRequest as e:
            return _error(400, str(e))
        return await self._admin_call(lambda: self.admin.create_partitions(
            {name: NewPartitions(count)})[name].result())

    async def _alter_configs(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        try:
            ops = _config_ops(await _json_body(request))
        except BadRequest as e:
            return _error(400, str(e))
        resource = ConfigResource(ConfigResourceType.TOPIC, name)
        return await self._admin_call(lambda: self.admin.incremental_alter_configs(
            {resource: ops})[resource].result())

    async def _reset_offsets(self, request: web.Request) -> web.StreamResponse:
        group = request.match_info["group"]
        try:
            body = await _json_body(request)
            spec = _reset_spec(body)
            topic = body.get("topic") or None
            if topic is not None and not isinstance(topic, str):
                raise BadRequest("topic must be a string")
        except BadRequest as e:
            return _error(400, str(e))

        def reset() -> dict[str, Any]:
            moved = self.admin.reset_group_offsets(
                group, spec, topics=[topic] if topic else None)
            return {"ok": True, "offsets": [{"topic": tp.topic, "partition": tp.partition,
                                             "offset": offset}
                                            for tp, offset in sorted(moved.items())]}
        result = await self._in_worker(reset)
        return result if isinstance(result, web.Response) else web.json_response(result)

    async def _create_user(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request)
        except BadRequest as e:
            return _error(400, str(e))
        return await self._admin_call(lambda: security.create_user(self.admin, body))

    async def _delete_user(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        mechanism = request.query.get("mechanism", "SCRAM-SHA-256")
        return await self._admin_call(lambda: security.delete_user(self.admin, name,
                                                                   mechanism))

    async def _admin_call(self, call: Callable[[], object]) -> web.StreamResponse:
        result = await self._in_worker(call)
        return result if isinstance(result, web.Response) else web.json_response({"ok": True})

    async def _in_worker(self, call: Callable[..., Any], *args: Any,
                         pool: ThreadPoolExecutor | None = None) -> Any:
        """``call(*args)`` on a worker thread; a refusal becomes its error response."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(pool or self._work_pool, call, *args)
        except BadRequest as e:
            return _error(400, str(e))
        except (MillraceError, ValueError) as e:
            return _cluster_error(e)


# ---------------------------------------------------------------------- helpers
def _error(status: int, text: str, *, denied: bool = False) -> web.Response:
    return web.json_response({"error": text, "denied": denied}, status=status)


def _cluster_error(error: BaseException) -> web.Response:
    if isinstance(error, KafkaError):
        text = error.name if error.message == error.name else f"{error.name}: {error.message}"
        if error.name.endswith("AUTHORIZATION_FAILED"):
            return _error(403, text, denied=True)
        if error.name == "REQUEST_TIMED_OUT":
            return _error(504, text)
        return _error(400, text)
    if isinstance(error, TimeoutError):   # the client's own deadline (KafkaTimeoutError)
        return _error(504, str(error) or "timed out")
    if isinstance(error, ValueError):
        return _error(400, str(error))
    return _error(502, str(error) or type(error).__name__)


def _static_response(name: str) -> web.Response:
    body = resources.files("millrace.console").joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=STATIC_FILES[name],
                        headers={"Cache-Control": "no-cache"})


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _str(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{name} is required")
    return value


def _positive(body: Mapping[str, Any], name: str, default: int | None) -> int:
    value = body.get(name)
    if value is None or value == "":   # absent: the broker's default (-1), if there is one
        if default is None:
            raise BadRequest(f"{name} is required")
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest(f"{name} must be a positive integer, got {value!r}")
    return value


def _query_int(params: Mapping[str, str], name: str) -> int:
    raw = params.get(name, "")
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a non-negative integer, got {raw[:40]!r}") \
            from None
    if value < 0:
        raise BadRequest(f"{name} must be a non-negative integer, got {value}")
    return value


MAX_CONFIG_CHANGES = 100


def _config_ops(body: Mapping[str, Any]) -> list[AlterConfigOp]:
    """``{"set": {name: value}, "delete": [name]}`` as incremental changes (a delete puts
    the config back to its default)."""
    to_set = _string_map(body.get("set") or {}, "set")
    to_delete = body.get("delete") or []
    if not isinstance(to_delete, list) or not all(isinstance(n, str) and n
                                                  for n in to_delete):
        raise BadRequest("delete must be a list of config names")
    both = set(to_set) & set(to_delete)
    if both:
        raise BadRequest(f"a config both set and deleted: {', '.join(sorted(both))}")
    if not to_set and not to_delete:
        raise BadRequest("nothing to change: give set and/or delete")
    if len(to_set) + len(to_delete) > MAX_CONFIG_CHANGES:
        raise BadRequest(f"at most {MAX_CONFIG_CHANGES} config changes at once")
    return [*(AlterConfigOp(n, v) for n, v in to_set.items()),
            *(AlterConfigOp(n, None, AlterConfigOpType.DELETE) for n in to_delete)]


def _string_map(raw: Any, what: str = "configs") -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in raw.items()):
        raise BadRequest(f"{what} must be an object of strings")
    return raw


def _reset_spec(body: Mapping[str, Any]) -> OffsetResetSpec:
    to = body.get("to")
    value = body.get("value")
    if isinstance(value, str) and value.strip():
        try:
            value = int(value)
        except ValueError:
            raise BadRequest(f"value must be an integer, got {value!r}") from None
    if to == "earliest":
        return OffsetResetSpec.to_earliest()
    if to == "latest":
        return OffsetResetSpec.to_latest()
    if to in ("offset", "timestamp"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadRequest(f"to={to} needs a non-negative integer value")
        return (OffsetResetSpec.to_offset(value) if to == "offset"
                else OffsetResetSpec.to_datetime(value))
    raise BadRequest("to must be one of earliest, latest, offset, timestamp")


LOGIN_PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>millrace console: login</title>
<link rel=stylesheet href=/static/style.css></head>
<body class=login><form method=post action=/login data-testid=login>
<h1>millrace console</h1><!--error-->
<label>Token <input type=password name=token autocomplete=current-password autofocus></label>
<button type=submit>Log in</button></form></body></html>
"""
