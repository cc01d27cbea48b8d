"""An in-memory schema registry behind a ``urllib`` handler: the unit tests' registry.

``FakeRegistry`` keeps subjects, versions and ids the way Confluent's registry does (one
global id per distinct schema, a new version only for a schema new to the subject) and
answers the REST paths ``SchemaRegistryClient`` uses, with Confluent's error bodies.
``FakeRegistry.client(conf)`` gives a real ``SchemaRegistryClient`` whose requests go
through ``urllib``'s machinery (Request, HTTPError for error statuses) to the fake, with
no socket.  ``requests`` records each (method, path, headers) for tests that count round
trips; ``unreachable`` names hosts that refuse connections.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
import urllib.response
from email.message import Message
from typing import Any

from millrace.client.schema_registry.client import SchemaRegistryClient
from millrace.client.schema_registry.schemas import Schema, parse_schema


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        self.status, self.code, self.message = status, code, message


class FakeRegistry:
    def __init__(self) -> None:
        self.schemas: dict[int, Schema] = {}
        self.ids_by_key: dict[tuple[str, str, tuple[Any, ...]], int] = {}
        self.subjects: dict[str, list[dict[str, Any]]] = {}  # versions: version, id, deleted
        self.config: dict[str | None, str] = {None: "BACKWARD"}
        self.mode = "READWRITE"
        self.incompatible: dict[str, list[str]] = {}  # subject -> reasons to answer
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.unreachable: set[str] = set()
        self.broken: tuple[int, bytes] | None = None  # answer this (status, body) instead
        self.next_id = 1

    def client(self, conf: dict[str, Any] | None = None) -> SchemaRegistryClient:
        conf = conf or {"url": "http://registry.test:8081"}
        return SchemaRegistryClient(conf, opener=urllib.request.build_opener(_Handler(self)))

    def count(self, method: str | None = None, prefix: str = "") -> int:
        return sum(1 for m, p, _h in self.requests
                   if (method is None or m == method) and p.startswith(prefix))

    # ------------------------------------------------------------------ the model
    def _key(self, schema: Schema) -> tuple[str, str, tuple[Any, ...]]:
        def resolve(ref: Any) -> Schema:
            return self.schemas[self._version(ref.subject, str(ref.version))["id"]]

        try:
            canonical = parse_schema(schema, resolve).canonical()
        except Exception as e:
            raise RegistryError(422, 42201, f"Invalid schema: {e}") from None
        return schema.schema_type, canonical, schema.references

    def _live(self, subject: str) -> list[dict[str, Any]]:
        versions = [v for v in self.subjects.get(subject, []) if not v["deleted"]]
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def _version(self, subject: str, version: str) -> dict[str, Any]:
        versions = self._live(subject)
        if version in ("latest", "-1"):
            return versions[-1]
        for v in versions:
            if str(v["version"]) == version:
                return v
        raise RegistryError(404, 40402, f"Version {version} not found.")

    def _answer(self, subject: str, v: dict[str, Any]) -> dict[str, Any]:
        return {"subject": subject, "version": v["version"], "id": v["id"],
                **self.schemas[v["id"]].to_json()}

    def register(self, subject: str, schema: Schema) -> int:
        key = self._key(schema)
        schema_id = self.ids_by_key.get(key)
        versions = self.subjects.setdefault(subject, [])
        if schema_id is not None:
            for v in versions:
                if v["id"] == schema_id and not v["deleted"]:
                    return schema_id
        if subject in self.incompatible and versions:
            raise RegistryError(409, 409, "Schema being registered is incompatible with an "
                                f"earlier schema: {self.incompatible[subject]}")
        if schema_id is None:
            schema_id = self.next_id
            self.next_id += 1
            self.ids_by_key[key] = schema_id
            self.schemas[schema_id] = schema
        number = max((v["version"] for v in versions), default=0) + 1
        versions.append({"version": number, "id": schema_id, "deleted": False})
        return schema_id

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        match (method, parts):
            case ("POST", ["subjects", subject, "versions"]):
                return {"id": self.register(subject, Schema.from_json(body))}
            case ("POST", ["subjects", subject]):
                key = self._key(Schema.from_json(body))
                for v in self._live(subject):
                    if self.ids_by_key.get(key) == v["id"]:
                        return self._answer(subject, v)
                raise RegistryError(404, 40403, "Schema not found")
            case ("GET", ["schemas", "ids", schema_id]):
                schema = self.schemas.get(int(schema_id))
                if schema is None:
                    raise RegistryError(404, 40403, f"Schema {schema_id} not found")
                return schema.to_json()
            case ("GET", ["subjects"]):
                return sorted(s for s, vs in self.subjects.items()
                              if any(not v["deleted"] for v in vs))
            case ("GET", ["subjects", subject, "versions"]):
                return [v["version"] for v in self._live(subject)]
            case ("GET", ["subjects", subject, "versions", version]):
                return self._answer(subject, self._version(subject, version))
            case ("DELETE", ["subjects", subject]):
                versions = self._live(subject)
                for v in versions:
                    v["deleted"] = True
                return [v["version"] for v in versions]
            case ("DELETE", ["subjects", subject, "versions", version]):
                v = self._version(subject, version)
                v["deleted"] = True
                return v["version"]
            case ("POST", ["compatibility", "subjects", subject, "versions", _version]):
                reasons = self.incompatible.get(subject)
                answer: dict[str, Any] = {"is_compatible": not reasons}
                if query.get("verbose") == "true":
                    answer["messages"] = reasons or []
                return answer
            case ("GET", ["config", *subject]):
                level = self.config.get(subject[0] if subject else None)
                if level is None:
                    raise RegistryError(404, 40408, "Subject does not have subject-level "
                                        "compatibility configured")
                return {"compatibilityLevel": level}
            case ("PUT", ["config", *subject]):
                self.config[subject[0] if subject else None] = body["compatibility"]
                return {"compatibility": body["compatibility"]}
            case ("GET", ["mode", *_subject]):
                return {"mode": self.mode}
            case ("PUT", ["mode", *_subject]):
                self.mode = body["mode"]
                return {"mode": self.mode}
            case ("GET", ["schemas", "types"]):
                return ["JSON", "PROTOBUF", "AVRO"]
        raise RegistryError(404, 404, f"HTTP 404 Not Found: {method} {path}")


class _Handler(urllib.request.BaseHandler):
    """Answers http(s) requests from the FakeRegistry (no sockets)."""

    handler_order = 100  # before urllib's own HTTPHandler

    def __init__(self, registry: FakeRegistry) -> None:
        self.registry = registry

    def _open(self, req: urllib.request.Request) -> urllib.response.addinfourl:
        url = urllib.parse.urlsplit(req.full_url)
        if url.hostname in self.registry.unreachable:
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        method = req.get_method()
        self.registry.requests.append((method, url.path, dict(req.header_items())))
        query = dict(urllib.parse.parse_qsl(url.query))
        data = req.data
        body = json.loads(data) if isinstance(data, bytes) and data else None
        try:
            status, answer = 200, self.registry.handle(method, url.path, query, body)
        except RegistryError as e:
            status, answer = e.status, {"error_code": e.code, "message": e.message}
        raw = json.dumps(answer).encode()
        if self.registry.broken is not None:
            status, raw = self.registry.broken
        headers = Message()
        headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
        response = urllib.response.addinfourl(io.BytesIO(raw), headers, req.full_url, status)
        response.msg = "OK" if status == 200 else "Error"  # type: ignore[attr-defined]
        return response

    def http_open(self, req: urllib.request.Request) -> urllib.response.addinfourl:
        return self._open(req)

    def https_open(self, req: urllib.request.Request) -> urllib.response.addinfourl:
        return self._open(req)
