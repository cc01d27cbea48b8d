"""The registry's REST API (Confluent Schema Registry v1), served by aiohttp.

Routes (``{v}`` is a version number, ``latest`` or -1)::

    GET    /                                     {}
    GET    /schemas/types                        ["AVRO", "JSON", "PROTOBUF"]
    GET    /schemas/ids/{id}[?subject=&format=]  {"schema", "schemaType"?, "references"?}
    GET    /schemas/ids/{id}/schema              the schema text itself
    GET    /schemas/ids/{id}/subjects            ["s", ...]
    GET    /schemas/ids/{id}/versions            [{"subject", "version"}, ...]
    GET    /subjects[?deleted=&subjectPrefix=]   ["s", ...]
    POST   /subjects/{s}[?deleted=]              is this schema registered: the version
    DELETE /subjects/{s}[?permanent=]            [versions deleted]
    GET    /subjects/{s}/versions[?deleted=]     [1, 2, ...]
    POST   /subjects/{s}/versions[?normalize=]   register: {"id", "subject", "version", "schema"...}
    GET    /subjects/{s}/versions/{v}[?deleted=] {"subject", "version", "id", "schema"...}
    GET    /subjects/{s}/versions/{v}/schema     the schema text itself
    GET    /subjects/{s}/versions/{v}/referencedby  [ids]
    DELETE /subjects/{s}/versions/{v}[?permanent=]  the version deleted
    POST   /compatibility/subjects/{s}/versions[/{v}][?verbose=]  {"is_compatible", "messages"?}
    GET|PUT|DELETE /config[/{s}]                 {"compatibilityLevel"} / {"compatibility"}
    GET|PUT|DELETE /mode[/{s}]                   {"mode"}
    GET    /metrics                              Prometheus text
    GET    /healthz, /readyz                     probes (no authentication)

Responses carry ``application/vnd.schemaregistry.v1+json``; requests may send that, the v1
``+json`` types, ``application/json`` or ``application/octet-stream`` (what clients send).
Errors are Confluent's body ``{"error_code", "message"}`` with its status; a request body
over ``MAX_BODY`` bytes is refused with 413 before it is read; a body that is not JSON is
42201 (schema) / 400.

Writes go to the leader: on any other instance the request is forwarded as it came (method,
path, query, body, ``Authorization``), and the leader's answer is passed back; when no
leader is known the request waits up to ``leader_wait_s`` for one, then fails with 50004.
Registry calls block (they wait for the topic), so they run on the default executor.

Thread ownership: the handlers run on the server's event loop; registry calls on executor
threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from millrace.client.schema_registry.schemas import (
    SCHEMA_TYPES,
    InvalidSchemaError,
    Schema,
)
from millrace.schema_registry import errors
from millrace.schema_registry.leader import LeaderElector
from millrace.schema_registry.registry import SchemaRegistry, parse_version

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY = 16 * 1024 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticate = Callable[[str | None], Awaitable[str | None]]
F = TypeVar("F", bound=Callable[..., Any])
Authorize = Callable[[str, bool], bool]  # (user, the request changes the registry) -> allowed


def changes_registry(handler: F) -> F:
    """Marks a route that writes (register, delete, config, mode): the one authorization
    asks about."""
    handler.changes_registry = True  # type: ignore[attr-defined]
    return handler


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(body).encode(),
                        content_type=CONTENT_TYPE)


def _error(e: errors.RegistryError) -> web.Response:
    return _json(e.body(), e.http_status)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


class RestApp:
    def __init__(self, registry: SchemaRegistry, elector: LeaderElector | None, *,
                 metrics: Callable[[], bytes] | None = None,
                 authenticate: Authenticate | None = None, failed_auth_delay_s: float = 0.1,
                 authorize: Authorize | None = None,
                 forward_tls: ssl.SSLContext | None = None, leader_wait_s: float = 30.0,
                 ready: Callable[[], list[str]] | None = None) -> None:
        self.registry = registry
        self.elector = elector
        self.metrics = metrics
        self.authenticate = authenticate
        self.authorize = authorize
        self.failed_auth_delay_s = failed_auth_delay_s
        self.forward_tls = forward_tls
        self.leader_wait_s = leader_wait_s
        self.ready = ready or (lambda: [])
        self.requests = 0
        self.errors_by_code: dict[int, int] = {}
        self.started = time.time()
        self._session: aiohttp.ClientSession | None = None
        self.app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY)
        r = self.app.router
        r.add_get("/", self._root)
        r.add_get("/healthz", self._healthz)
        r.add_get("/readyz", self._readyz)
        r.add_get("/metrics", self._metrics)
        r.add_get("/schemas/types", self._types)
        r.add_get("/schemas/ids/{id}", self._schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self._schema_text_by_id)
        r.add_get("/schemas/ids/{id}/subjects", self._subjects_of_id)
        r.add_get("/schemas/ids/{id}/versions", self._versions_of_id)
        r.add_get("/subjects", self._subjects)
        r.add_post("/subjects/{subject}", self._lookup)
        r.add_delete("/subjects/{subject}", self._delete_subject)
        r.add_get("/subjects/{subject}/versions", self._versions)
        r.add_post("/subjects/{subject}/versions", self._register)
        r.add_get("/subjects/{subject}/versions/{version}", self._version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self._version_text)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self._referenced_by)
        r.add_delete("/subjects/{subject}/versions/{version}", self._delete_version)
        r.add_post("/compatibility/subjects/{subject}/versions", self._compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self._compatibility)
        for path in ("/config", "/config/{subject}"):
            r.add_get(path, self._get_config)
            r.add_put(path, self._put_config)
            r.add_delete(path, self._delete_config)
        for path in ("/mode", "/mode/{subject}"):
            r.add_get(path, self._get_mode)
            r.add_put(path, self._put_mode)
        r.add_delete("/mode/{subject}", self._delete_mode)
        self.app.on_cleanup.append(self._close_session)

    # ------------------------------------------------------------------ plumbing
    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests += 1
        if self.authenticate is not None and request.path not in ("/healthz", "/readyz"):
            user = await self.authenticate(request.headers.get("Authorization"))
            if user is None:
                await asyncio.sleep(self.failed_auth_delay_s)
                self._count(401)
                return web.Response(status=401, headers={
                    "WWW-Authenticate": 'Basic realm="millrace-schema-registry"'},
                    body=json.dumps({"error_code": 401, "message": "Unauthorized"}).encode(),
                    content_type=CONTENT_TYPE)
            if self.authorize is not None and \
                    not self.authorize(user, getattr(handler, "changes_registry", False)):
                # before the handler looks anything up: a denial says nothing of what exists
                self._count(40301)
                return _json({"error_code": 40301, "message": f"User {user} is not "
                              "authorized to change the schema registry"}, 403)
        try:
            return await handler(request)
        except errors.RegistryError as e:
            self._count(e.error_code)
            return _error(e)
        except web.HTTPRequestEntityTooLarge:
            self._count(413)
            return _json({"error_code": 413, "message": f"request body over {MAX_BODY} bytes"},
                         413)
        except web.HTTPException as e:
            if e.status >= 400:
                self._count(e.status)
                return _json({"error_code": e.status, "message": e.reason}, e.status)
            raise

    def _count(self, code: int) -> None:
        self.errors_by_code[code] = self.errors_by_code.get(code, 0) + 1

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: fn(*args, **kwargs))

    async def _body(self, request: web.Request) -> Any:
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY,
                                                actual_size=request.content_length)
        raw = await request.read()
        try:
            return json.loads(raw) if raw else {}
        except ValueError as e:
            raise errors.BadRequest(f"the request body is not JSON: {e}") from None

    async def _schema_body(self, request: web.Request) -> tuple[Schema, dict[str, Any]]:
        body = await self._body(request)
        try:
            return Schema.from_json(body), body
        except InvalidSchemaError as e:
            raise errors.InvalidSchema(str(e)) from None

    async def _leader_or_forward(self, request: web.Request,
                                 raw: bytes | None = None) -> web.Response | None:
        """None when this instance leads; else the leader's answer to the same request."""
        if self.elector is None:
            return None
        leader, is_leader = await self._call(self.elector.wait_for_leader, self.leader_wait_s)
        if is_leader:
            return None
        if leader is None:
            raise errors.UnknownLeader("no leader is known for the schema registry "
                                       "(an election is in progress?)")
        if raw is None:
            raw = await request.read()
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"Content-Type": request.headers.get("Content-Type", CONTENT_TYPE)}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        url = leader.url + request.rel_url.path_qs
        try:
            async with self._session.request(
                    request.method, url, data=raw, headers=headers,
                    ssl=(self.forward_tls or True) if leader.scheme == "https" else False,
                    timeout=aiohttp.ClientTimeout(total=60)) as response:
                body = await response.read()
                return web.Response(status=response.status, body=body,
                                    content_type=CONTENT_TYPE)
        except (TimeoutError, aiohttp.ClientError) as e:
            raise errors.ForwardingError(f"Error while forwarding the request to the leader "
                                         f"{leader.url}: {type(e).__name__}: {e}") from None

    async def _close_session(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    # ------------------------------------------------------------------ probes, metrics
    async def _root(self, request: web.Request) -> web.Response:
        return _json({})

    async def _healthz(self, request: web.Request) -> web.Response:
        return _json({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        reasons = self.ready()
        return _json({"ready": not reasons, "reasons": reasons}, 503 if reasons else 200)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics is None:
            raise web.HTTPNotFound()
        return web.Response(body=self.metrics(), content_type="text/plain",
                            charset="utf-8")

    async def _types(self, request: web.Request) -> web.Response:
        return _json(list(SCHEMA_TYPES))

    # ------------------------------------------------------------------ schemas by id
    def _id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise errors.SchemaNotFound(f"Schema {request.match_info['id']} not found") \
                from None

    async def _schema_by_id(self, request: web.Request) -> web.Response:
        schema = self.registry.schema_by_id(self._id(request))
        return _json(schema.to_json())

    async def _schema_text_by_id(self, request: web.Request) -> web.Response:
        schema = self.registry.schema_by_id(self._id(request))
        return web.Response(text=schema.schema_str, content_type=CONTENT_TYPE)

    async def _subjects_of_id(self, request: web.Request) -> web.Response:
        used = self.registry.usages(self._id(request), deleted=_flag(request, "deleted"))
        return _json(sorted({v.subject for v in used}))

    async def _versions_of_id(self, request: web.Request) -> web.Response:
        used = self.registry.usages(self._id(request), deleted=_flag(request, "deleted"))
        return _json([{"subject": v.subject, "version": v.version} for v in used])

    # ------------------------------------------------------------------ subjects
    async def _subjects(self, request: web.Request) -> web.Response:
        return _json(self.registry.subjects(deleted=_flag(request, "deleted"),
                                            prefix=request.query.get("subjectPrefix", "")))

    async def _versions(self, request: web.Request) -> web.Response:
        return _json(self.registry.versions(request.match_info["subject"],
                                            deleted=_flag(request, "deleted")))

    async def _version(self, request: web.Request) -> web.Response:
        v = self.registry.get_version(request.match_info["subject"],
                                      request.match_info["version"],
                                      deleted=_flag(request, "deleted"))
        return _json(v.to_json())

    async def _version_text(self, request: web.Request) -> web.Response:
        v = self.registry.get_version(request.match_info["subject"],
                                      request.match_info["version"],
                                      deleted=_flag(request, "deleted"))
        return web.Response(text=v.schema.schema_str, content_type=CONTENT_TYPE)

    async def _referenced_by(self, request: web.Request) -> web.Response:
        return _json(self.registry.referenced_by(request.match_info["subject"],
                                                 request.match_info["version"]))

    async def _lookup(self, request: web.Request) -> web.Response:
        schema, _ = await self._schema_body(request)
        v = await self._call(self.registry.lookup, request.match_info["subject"], schema,
                             deleted=_flag(request, "deleted"))
        return _json(v.to_json())

    @changes_registry
    async def _register(self, request: web.Request) -> web.Response:
        raw = await request.read() if request.can_read_body else b""
        forwarded = await self._leader_or_forward(request, raw)
        if forwarded is not None:
            return forwarded
        schema, body = await self._schema_body(request)
        schema_id, version = body.get("id"), body.get("version")
        for name, value in (("id", schema_id), ("version", version)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise errors.BadRequest(f"\"{name}\" must be an integer")
        if version is not None and version <= 0:
            version = None  # clients send 0/-1 for "not given"
        if schema_id is not None and schema_id <= 0:
            schema_id = None
        v = await self._call(self.registry.register, request.match_info["subject"], schema,
                             schema_id=schema_id, version=version)
        return _json(v.to_json())

    @changes_registry
    async def _delete_subject(self, request: web.Request) -> web.Response:
        forwarded = await self._leader_or_forward(request)
        if forwarded is not None:
            return forwarded
        deleted = await self._call(self.registry.delete_subject, request.match_info["subject"],
                                   permanent=_flag(request, "permanent"))
        return _json(deleted)

    @changes_registry
    async def _delete_version(self, request: web.Request) -> web.Response:
        forwarded = await self._leader_or_forward(request)
        if forwarded is not None:
            return forwarded
        parse_version(request.match_info["version"])  # 42202 before anything else
        deleted = await self._call(self.registry.delete_version, request.match_info["subject"],
                                   request.match_info["version"],
                                   permanent=_flag(request, "permanent"))
        return _json(deleted)

    # ------------------------------------------------------------------ compatibility
    async def _compatibility(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        version = request.match_info.get("version")
        schema, _ = await self._schema_body(request)
        if version is not None:
            try:
                self.registry.get_version(subject, version)
            except errors.SubjectNotFound:
                if parse_version(version) != -1:
                    raise
                return _json({"is_compatible": True})  # nothing to be incompatible with
        reasons = await self._call(self.registry.incompatibilities, subject, schema, version)
        body: dict[str, Any] = {"is_compatible": not reasons}
        if _flag(request, "verbose"):
            body["messages"] = reasons
        return _json(body)

    # ------------------------------------------------------------------ config and mode
    async def _get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        level = self.registry.level(subject,
                                    default_to_global=_flag(request, "defaultToGlobal"))
        return _json({"compatibilityLevel": level})

    @changes_registry
    async def _put_config(self, request: web.Request) -> web.Response:
        forwarded = await self._leader_or_forward(request)
        if forwarded is not None:
            return forwarded
        body = await self._body(request)
        level = body.get("compatibility") if isinstance(body, dict) else None
        if level is None and isinstance(body, dict):
            level = body.get("compatibilityLevel")
        if not isinstance(level, str):
            raise errors.InvalidCompatibilityLevel("the body needs {\"compatibility\": LEVEL}")
        done = await self._call(self.registry.set_level, request.match_info.get("subject"),
                                level.upper())
        return _json({"compatibility": done})

    @changes_registry
    async def _delete_config(self, request: web.Request) -> web.Response:
        forwarded = await self._leader_or_forward(request)
        if forwarded is not None:
            return forwarded
        previous = await self._call(self.registry.delete_level,
                                    request.match_info.get("subject"))
        return _json({"compatibilityLevel": previous})

    async def _get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        return _json({"mode": self.registry.mode(
            subject, default_to_global=_flag(request, "defaultToGlobal"))})

    @changes_registry
    async def _put_mode(self, request: web.Request) -> web.Response:
        forwarded = await self._leader_or_forward(request)
        if forwarded is not None:
            return forwarded
        body = await self._body(request)
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str):
            raise errors.InvalidMode("the body needs {\"mode\": MODE}")
        done = await self._call(self.registry.set_mode, request.match_info.get("subject"),
                                mode.upper(), force=_flag(request, "force"))
        return _json({"mode": done})

    @changes_registry
    async def _delete_mode(self, request: web.Request) -> web.Response:
        forwarded = await self._leader_or_forward(request)
        if forwarded is not None:
            return forwarded
        previous = await self._call(self.registry.delete_mode, request.match_info["subject"])
        return _json({"mode": previous})
