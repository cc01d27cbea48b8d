"""``SchemaRegistryClient``: the Confluent Schema Registry REST API (v1), synchronously.

Confluent's client config names: ``url`` (one URL or a comma-separated list, tried in
order on connection errors), ``basic.auth.credentials.source`` (``USER_INFO``: the
``basic.auth.user.info`` ``user:password``; ``URL``: the ``user:password@`` of the URL),
``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``ssl.key.password`` and ``timeout`` (seconds, default 10).  HTTP with the standard library
(``urllib.request`` and an ``ssl`` context); every request carries the registry's content
type, ``application/vnd.schemaregistry.v1+json``.

Caches, so that a serializer's per-record cost is a dict lookup: schema id -> ``Schema``,
(subject, schema, normalize) -> id (register and look-up), (subject, version) ->
``RegisteredSchema`` for numbered versions (a version's schema never changes), and
``Schema`` -> its ``ParsedSchema`` with the references resolved.  ``latest`` and every
other answer that can change (subjects, versions, config, mode) are never cached.  The
caches are dicts written under a lock and read without one (thread-safe under the GIL);
concurrent misses may both ask the registry, which answers both the same.

Errors: an error answer raises ``SchemaRegistryError(http_status, error_code, message)``
with Confluent's error body (``{"error_code": 40401, "message": ...}``); a registry no URL
reaches raises it with ``http_status`` None and the URLs tried named.  Credentials never
appear in a message or a log line: URLs are shown without their user info.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from millrace.client.schema_registry.config import CLIENT_CONFIGS
from millrace.client.schema_registry.schemas import (
    InvalidSchemaError,
    ParsedSchema,
    Schema,
    SchemaReference,
    parse_schema,
)
from millrace.common.errors import ConfigError, MillraceError

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; "
           "qs=0.9, application/json; qs=0.5")



class SchemaRegistryError(MillraceError):
    """An error answer of the registry (``http_status`` None: no URL could be reached)."""

    SUBJECT_NOT_FOUND: ClassVar[int] = 40401
    VERSION_NOT_FOUND: ClassVar[int] = 40402
    SCHEMA_NOT_FOUND: ClassVar[int] = 40403
    UNKNOWN: ClassVar[int] = -1

    def __init__(self, http_status: int | None, error_code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP status code {http_status}, SR code {error_code})"
                         if http_status is not None else message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    subject: str
    version: int
    schema: Schema

    @property
    def schema_id(self) -> int:  # confluent-kafka's name
        return self.id


@dataclass(frozen=True)
class CompatibilityResult:
    is_compatible: bool
    messages: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.is_compatible


def _schema_of(body: Mapping[str, Any]) -> Schema:
    try:
        return Schema.from_json(body)
    except InvalidSchemaError as e:
        raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                  f"the registry answered a malformed schema: {e}") from None


def _registered(body: Any, subject: str | None = None) -> RegisteredSchema:
    if not isinstance(body, Mapping) or "id" not in body:
        raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                  f"the registry answered {body!r}, not a registered schema")
    return RegisteredSchema(int(body["id"]), str(body.get("subject", subject)),
                            int(body.get("version", -1)), _schema_of(body))


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _bool_param(value: bool) -> str:
    return "true" if value else "false"


class SchemaRegistryClient:
    """``SchemaRegistryClient({"url": "http://localhost:8081"})``; see the module doc."""

    def __init__(self, conf: Mapping[str, Any], *,
                 opener: urllib.request.OpenerDirector | None = None) -> None:
        """``opener``: the ``urllib`` opener to send requests with (tests pass one whose
        handler answers in memory); by default one with the TLS context of ``conf``."""
        unknown = sorted(k for k in conf if k not in CLIENT_CONFIGS)
        if unknown:
            raise ConfigError(f"Unknown schema registry configuration key(s): "
                              f"{', '.join(unknown)}")
        urls = conf.get("url")
        if not isinstance(urls, str) or not urls.strip():
            raise ConfigError("Missing required schema registry configuration url")
        self._urls: list[str] = []
        url_credentials: set[str] = set()
        for raw in urls.split(","):
            url, credentials = self._split_user_info(raw.strip())
            if url:
                self._urls.append(url)
            if credentials:
                url_credentials.add(credentials)
        source = str(conf.get("basic.auth.credentials.source")
                     or ("USER_INFO" if conf.get("basic.auth.user.info") else "URL")).upper()
        self._authorization: str | None = None
        if source == "USER_INFO":
            user_info = conf.get("basic.auth.user.info")
            if not user_info or ":" not in str(user_info):
                raise ConfigError("basic.auth.credentials.source=USER_INFO needs "
                                  "basic.auth.user.info as user:password")
            if url_credentials:
                raise ConfigError("basic.auth.user.info is set and the url carries user "
                                  "info too; keep one of the two")
            self._authorization = self._basic(str(user_info))
        elif source == "URL":
            if len(url_credentials) > 1:
                raise ConfigError("the urls carry different user info")
            if url_credentials:
                self._authorization = self._basic(url_credentials.pop())
        else:
            raise ConfigError(f"Invalid value {source} for configuration "
                              "basic.auth.credentials.source: expected USER_INFO or URL")
        self._timeout = float(conf.get("timeout", 10))
        if opener is None:
            handlers: list[urllib.request.BaseHandler] = []
            if any(u.startswith("https:") for u in self._urls):
                handlers.append(urllib.request.HTTPSHandler(context=self._ssl_context(conf)))
            opener = urllib.request.build_opener(*handlers)
        self._opener = opener

        self._lock = threading.Lock()  # guards the writes to the caches below
        self._schema_by_id: dict[int, Schema] = {}
        self._id_by_schema: dict[tuple[str, Schema, bool], int] = {}
        self._registered_by_schema: dict[tuple[str, Schema, bool], RegisteredSchema] = {}
        self._by_version: dict[tuple[str, int], RegisteredSchema] = {}
        self._parsed: dict[Schema, ParsedSchema] = {}
        self.requests = 0  # HTTP requests sent (tests count them)

    # ------------------------------------------------------------------ configuration
    @staticmethod
    def _split_user_info(url: str) -> tuple[str, str | None]:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ConfigError(f"Invalid schema registry url scheme {parts.scheme!r}: "
                              "expected http:// or https://")
        if "@" not in parts.netloc:
            return url.rstrip("/"), None
        user_info, _, host = parts.netloc.rpartition("@")
        return parts._replace(netloc=host).geturl().rstrip("/"), urllib.parse.unquote(user_info)

    @staticmethod
    def _basic(user_info: str) -> str:
        return "Basic " + base64.b64encode(user_info.encode("utf-8")).decode("ascii")

    @staticmethod
    def _ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext:
        """Server verification against ``ssl.ca.location`` (default: the system's CAs), and
        a client certificate for mutual TLS when ``ssl.certificate.location`` is set."""
        name = "ssl.ca.location"
        try:
            ctx = ssl.create_default_context(cafile=conf.get(name) or None)
            cert = conf.get(name := "ssl.certificate.location")
            if cert:
                ctx.load_cert_chain(cert, conf.get("ssl.key.location") or None,
                                    conf.get("ssl.key.password") or None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"Invalid value {conf.get(name)} for schema registry "
                              f"configuration {name}: {e}") from None
        return ctx

    @property
    def urls(self) -> list[str]:
        """The registry's URLs, without user info."""
        return list(self._urls)

    # ------------------------------------------------------------------ HTTP
    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the REST API (``path`` relative, e.g. ``subjects?deleted=true``): what
        the methods use, and for routes without a method of their own."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": _ACCEPT}
        if data is not None:
            headers["Content-Type"] = CONTENT_TYPE
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        failures: list[str] = []
        for base in self._urls:
            request = urllib.request.Request(f"{base}/{path}", data=data, method=method,
                                             headers=headers)
            self.requests += 1
            try:
                with self._opener.open(request, timeout=self._timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as e:
                raise self._error(e) from None
            except (urllib.error.URLError, OSError) as e:
                reason = getattr(e, "reason", e)
                failures.append(f"{base}: {reason}")
                log.debug("schema registry %s unreachable: %s", base, reason)
                continue
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                raise SchemaRegistryError(
                    None, SchemaRegistryError.UNKNOWN,
                    f"{method} {base}/{path} answered something that is not JSON: "
                    f"{raw[:200]!r}") from None
        raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                  "no schema registry reachable: " + "; ".join(failures))

    @staticmethod
    def _error(e: urllib.error.HTTPError) -> SchemaRegistryError:
        try:
            raw = e.read()
        except OSError:
            raw = b""
        try:
            body = json.loads(raw)
            return SchemaRegistryError(e.code, int(body["error_code"]), str(body["message"]))
        except (ValueError, TypeError, KeyError):
            text = raw.decode("utf-8", "replace").strip()[:200] or e.reason
            return SchemaRegistryError(e.code, SchemaRegistryError.UNKNOWN,
                                       f"{e.reason}: {text}" if text != e.reason else str(text))

    # ------------------------------------------------------------------ schemas
    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        """The id of ``schema`` under ``subject``, registering it (a new version) if new."""
        key = (subject, schema, normalize)
        schema_id = self._id_by_schema.get(key)
        if schema_id is not None:
            return schema_id
        body = self.request("POST", f"subjects/{_quote(subject)}/versions?normalize="
                             f"{_bool_param(normalize)}", schema.to_json())
        schema_id = int(body["id"])
        with self._lock:
            self._id_by_schema[key] = schema_id
            self._schema_by_id.setdefault(schema_id, schema)
        return schema_id

    def lookup_schema(self, subject: str, schema: Schema, normalize: bool = False,
                      deleted: bool = False) -> RegisteredSchema:
        """The version of ``subject`` that holds ``schema`` (40403 if none)."""
        key = (subject, schema, normalize)
        cached = self._registered_by_schema.get(key)
        if cached is not None and not deleted:
            return cached
        body = self.request("POST", f"subjects/{_quote(subject)}?normalize="
                             f"{_bool_param(normalize)}&deleted={_bool_param(deleted)}",
                             schema.to_json())
        registered = _registered(body, subject)
        with self._lock:
            if not deleted:
                self._registered_by_schema[key] = registered
            self._id_by_schema[key] = registered.id
            self._schema_by_id.setdefault(registered.id, registered.schema)
        return registered

    def get_schema(self, schema_id: int) -> Schema:
        schema = self._schema_by_id.get(schema_id)
        if schema is not None:
            return schema
        schema = _schema_of(self.request("GET", f"schemas/ids/{int(schema_id)}"))
        with self._lock:
            self._schema_by_id[schema_id] = schema
        return schema

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The newest version of ``subject`` (asked every time: it changes)."""
        return self._version(subject, "latest")

    def get_version(self, subject: str, version: int | str, deleted: bool = False
                    ) -> RegisteredSchema:
        if version == "latest" or version == -1:
            return self.get_latest_version(subject)
        key = (subject, int(version))
        cached = self._by_version.get(key)
        if cached is not None and not deleted:
            return cached
        registered = self._version(subject, int(version), deleted)
        if not deleted:  # a soft-deleted version must not answer a plain look-up later
            with self._lock:
                self._by_version[key] = registered
        return registered

    def _version(self, subject: str, version: int | str, deleted: bool = False
                 ) -> RegisteredSchema:
        query = "?deleted=true" if deleted else ""
        registered = _registered(self.request(
            "GET", f"subjects/{_quote(subject)}/versions/{version}{query}"), subject)
        with self._lock:
            self._schema_by_id.setdefault(registered.id, registered.schema)
        return registered

    def get_versions(self, subject: str) -> list[int]:
        return [int(v) for v in self.request("GET", f"subjects/{_quote(subject)}/versions")]

    def get_subjects(self) -> list[str]:
        return [str(s) for s in self.request("GET", "subjects")]

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Delete every version (soft; ``permanent`` after a soft delete); the versions."""
        versions = self.request("DELETE", f"subjects/{_quote(subject)}" +
                                 ("?permanent=true" if permanent else ""))
        self._forget(subject)
        return [int(v) for v in versions]

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        deleted = self.request("DELETE", f"subjects/{_quote(subject)}/versions/{version}" +
                                ("?permanent=true" if permanent else ""))
        self._forget(subject)
        return int(deleted)

    def _forget(self, subject: str) -> None:
        """Drop the subject's entries from the caches keyed by subject (ids stay valid)."""
        with self._lock:
            caches: tuple[dict[Any, Any], ...] = (
                self._id_by_schema, self._registered_by_schema, self._by_version)
            for cache in caches:
                for key in [k for k in cache if k[0] == subject]:
                    del cache[key]

    def parse(self, schema: Schema) -> ParsedSchema:
        """``schema`` parsed, its references fetched from the registry (cached)."""
        parsed = self._parsed.get(schema)
        if parsed is not None:
            return parsed

        def resolve(ref: SchemaReference) -> Schema:
            return self.get_version(ref.subject, ref.version).schema

        parsed = parse_schema(schema, resolve)
        with self._lock:
            self._parsed[schema] = parsed
        return parsed

    # ------------------------------------------------------------------ compatibility
    def test_compatibility(self, subject: str, schema: Schema,
                           version: int | str = "latest") -> bool:
        return self.test_compatibility_verbose(subject, schema, version).is_compatible

    def test_compatibility_verbose(self, subject: str, schema: Schema,
                                   version: int | str = "latest") -> CompatibilityResult:
        """Whether ``schema`` is compatible, and the registry's reasons when it is not."""
        body = self.request("POST", f"compatibility/subjects/{_quote(subject)}/versions/"
                             f"{version}?verbose=true", schema.to_json())
        messages = body.get("messages") or ()
        return CompatibilityResult(bool(body.get("is_compatible")),
                                   tuple(str(m) for m in messages))

    def get_compatibility(self, subject: str | None = None) -> str:
        path = f"config/{_quote(subject)}" if subject is not None else "config"
        body = self.request("GET", path)
        return str(body.get("compatibilityLevel") or body.get("compatibility"))

    def set_compatibility(self, subject: str | None = None, level: str | None = None) -> str:
        if not level:
            raise ValueError("set_compatibility needs a level (BACKWARD, FULL, NONE, ...)")
        path = f"config/{_quote(subject)}" if subject is not None else "config"
        body = self.request("PUT", path, {"compatibility": level.upper()})
        return str(body.get("compatibility"))

    def get_mode(self, subject: str | None = None) -> str:
        path = f"mode/{_quote(subject)}" if subject is not None else "mode"
        return str(self.request("GET", path)["mode"])

    def set_mode(self, mode: str, subject: str | None = None, force: bool = False) -> str:
        path = f"mode/{_quote(subject)}" if subject is not None else "mode"
        body = self.request("PUT", f"{path}?force={_bool_param(force)}", {"mode": mode})
        return str(body["mode"])

    def get_schema_types(self) -> list[str]:
        return [str(t) for t in self.request("GET", "schemas/types")]

    def close(self) -> None:
        """Nothing to release: every request opens and closes its own connection."""

    def __repr__(self) -> str:
        return f"SchemaRegistryClient({','.join(self._urls)})"
