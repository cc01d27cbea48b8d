"""``SchemaRegistryServer``: one registry instance -- configuration, start-up, shutdown.

Start-up: bind the listener (a taken port fails at once), start the store (create the
topic if missing, read it to its end), join the group, then serve.  ``/readyz`` says 503
until the store has caught up once and a leader is known.

Configuration uses the names of Confluent's ``schema-registry.properties``:

    listeners                             http://127.0.0.1:8081 (one listener, http or https)
    kafkastore.bootstrap.servers          the Kafka cluster (required)
    kafkastore.topic                      _schemas
    kafkastore.topic.replication.factor   min(3, live brokers) when unset
    kafkastore.timeout.ms                 500 in Confluent; 30000 here: a write waits for
                                          acks=all and the read-back on a 2-core machine
    kafkastore.init.timeout.ms            60000
    kafkastore.<client key>               passed to the registry's Kafka clients
                                          (security.protocol, sasl.*, ssl.* ...)
    schema.registry.group.id              schema-registry
    leader.eligibility                    true
    schema.compatibility.level            backward
    host.name                             the host other instances forward to (the
                                          listener's host when unset)
    authentication.method                 NONE | BASIC
    authentication.jaas.config            a JAAS entry of PLAIN users (``user_<name>``)
                                          for BASIC, or
    authentication.scram.zookeeper.connect  SCRAM users from the brokers' ZooKeeper
    authorization.write.users             with BASIC: the users who may change the registry
                                          (register, delete, config, mode), comma-separated;
                                          unset: every authenticated user; the others read
    ssl.keystore.location / .password / .type, ssl.key.password    https listener
    ssl.truststore.location / .password / .type                   forwarding over https
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from millrace.broker.metrics.http_server import BadRequestFilter
from millrace.common.errors import ConfigError
from millrace.schema_registry.kafka_store import KafkaStore, KafkaStoreWriter, client_config
from millrace.schema_registry.leader import Identity, LeaderElector
from millrace.schema_registry.metrics import RegistryMetrics
from millrace.schema_registry.registry import LEVELS, SchemaRegistry
from millrace.schema_registry.rest import RestApp
from millrace.schema_registry.store import SchemaStore

log = logging.getLogger(__name__)
# a client's malformed request is one INFO line naming the error class, never a traceback
# with the request's bytes (they may hold an Authorization header): the broker's filter
_request_log = logging.getLogger(__name__ + ".requests")
_request_log.addFilter(BadRequestFilter())

DEFAULTS: dict[str, str] = {
    "listeners": "http://127.0.0.1:8081",
    "kafkastore.topic": "_schemas",
    "kafkastore.timeout.ms": "30000",
    "kafkastore.init.timeout.ms": "60000",
    "schema.registry.group.id": "schema-registry",
    "leader.eligibility": "true",
    "schema.compatibility.level": "backward",
    "authentication.method": "NONE",
}
KNOWN = {*DEFAULTS, "kafkastore.bootstrap.servers", "kafkastore.topic.replication.factor",
         "host.name", "authentication.jaas.config", "authentication.scram.zookeeper.connect",
         "authorization.write.users",
         "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type",
         "ssl.key.password", "ssl.truststore.location", "ssl.truststore.password",
         "ssl.truststore.type", "ssl.endpoint.identification.algorithm"}


class RegistryConfig:
    def __init__(self, props: Mapping[str, str]) -> None:
        merged = {**DEFAULTS, **{k.strip(): str(v).strip() for k, v in props.items()}}
        unknown = [k for k in merged if k not in KNOWN and not k.startswith("kafkastore.")]
        if unknown:
            raise ConfigError(f"unknown schema registry setting(s): {', '.join(sorted(unknown))}")
        self.values = merged
        if not merged.get("kafkastore.bootstrap.servers"):
            raise ConfigError("kafkastore.bootstrap.servers is required")
        listener = merged["listeners"].split(",")[0].strip()
        parts = urlsplit(listener)
        if parts.scheme not in ("http", "https") or parts.port is None:
            raise ConfigError(f"Invalid value {listener!r} for configuration listeners: "
                              "expected http://HOST:PORT or https://HOST:PORT")
        self.scheme = parts.scheme
        self.host = parts.hostname or "0.0.0.0"
        self.port = parts.port
        level = merged["schema.compatibility.level"].upper()
        if level not in LEVELS:
            raise ConfigError(f"Invalid value {level!r} for configuration "
                              f"schema.compatibility.level: expected one of {', '.join(LEVELS)}")
        self.level = level
        self.topic = merged["kafkastore.topic"]
        rf = merged.get("kafkastore.topic.replication.factor")
        self.replication_factor = self._int("kafkastore.topic.replication.factor") if rf else None
        self.timeout_s = self._int("kafkastore.timeout.ms") / 1000
        self.init_timeout_s = self._int("kafkastore.init.timeout.ms") / 1000
        self.group_id = merged["schema.registry.group.id"]
        self.eligible = merged["leader.eligibility"].lower() == "true"
        self.advertised_host = merged.get("host.name") or (
            self.host if self.host not in ("0.0.0.0", "::", "") else socket.gethostname())
        method = merged["authentication.method"].upper()
        if method not in ("NONE", "BASIC"):
            raise ConfigError(f"Invalid value {method!r} for configuration "
                              "authentication.method: expected NONE or BASIC")
        self.basic_auth = method == "BASIC"
        if self.basic_auth and not (merged.get("authentication.jaas.config")
                                    or merged.get("authentication.scram.zookeeper.connect")):
            raise ConfigError("authentication.method=BASIC needs authentication.jaas.config (a JAAS "
                              "entry of PLAIN users) or authentication.scram.zookeeper.connect")
        writers = merged.get("authorization.write.users")
        self.write_users = frozenset(u.strip() for u in writers.split(",") if u.strip()) \
            if writers is not None else None
        if self.write_users is not None and not self.basic_auth:
            raise ConfigError("authorization.write.users needs authentication.method=BASIC: "
                              "without credentials every request is anonymous")
        self.clients = client_config(merged["kafkastore.bootstrap.servers"], {
            k.removeprefix("kafkastore."): v for k, v in merged.items()
            if k.startswith("kafkastore.") and k not in KNOWN and k not in DEFAULTS})

    def _int(self, key: str) -> int:
        try:
            return int(self.values[key])
        except ValueError:
            raise ConfigError(f"Invalid value {self.values[key]!r} for configuration {key}: "
                              "expected an integer") from None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.advertised_host}:{self.port}"

    def server_tls(self) -> ssl.SSLContext | None:
        if self.scheme != "https":
            return None
        from millrace.security.ssl_factory import SslFactory

        return SslFactory.server_context(self.values)

    def forward_tls(self) -> ssl.SSLContext | None:
        if not self.values.get("ssl.truststore.location"):
            return None
        from millrace.security.ssl_factory import SslFactory

        return SslFactory.client_context(self.values)


class SchemaRegistryServer:
    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self.store = SchemaStore()
        self.kafka_store = KafkaStore(self.store, config.clients, topic=config.topic,
                                      replication_factor=config.replication_factor,
                                      timeout_s=config.timeout_s)
        self.writer = KafkaStoreWriter(self.kafka_store, f"{config.group_id}-writer")
        self.registry = SchemaRegistry(self.store, self.writer, config.level,
                                       catch_up=self.kafka_store.wait_until_caught_up)
        self.identity = Identity(config.advertised_host, config.port, config.scheme,
                                 config.eligible)
        self.elector: LeaderElector | None = None
        self.metrics: RegistryMetrics | None = None
        self.sock: socket.socket | None = None
        self.caught_up = False

    def bind(self) -> None:
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.config.host, self.config.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            raise ConfigError(f"cannot listen on {self.config.host}:{self.config.port} "
                              f"(listeners): {e.strerror or e}") from e
        self.sock = sock

    def readiness(self) -> list[str]:
        reasons = []
        if not self.caught_up:
            reasons.append(f"reading {self.config.topic}")
        elif not self.kafka_store.reading:
            reasons.append(f"the reader of {self.config.topic} stopped (see the log)")
        if self.elector is None or self.elector.leader is None:
            reasons.append("no leader elected")
        return reasons

    def start_store(self) -> None:
        self.kafka_store.timeout_s = self.config.init_timeout_s
        self.kafka_store.start()
        self.kafka_store.timeout_s = self.config.timeout_s
        self.caught_up = True
        self.elector = LeaderElector(self.config.clients, self.config.group_id, self.identity,
                                     on_elected=self.writer.open, on_deposed=self.writer.close)
        self.elector.start()

    def stop_store(self) -> None:
        if self.elector is not None:
            self.elector.stop()
        self.writer.close()
        self.kafka_store.close()

    async def serve(self, stop: asyncio.Event, on_started: Any = None) -> None:
        """Serve until ``stop`` is set."""
        if self.sock is None:
            self.bind()
        assert self.sock is not None
        loop = asyncio.get_running_loop()
        authenticate = self._authenticator()
        await loop.run_in_executor(None, self.start_store)
        try:
            self.metrics = RegistryMetrics(self)
            app = RestApp(self.registry, self.elector, metrics=self.metrics.render,
                          authenticate=authenticate, authorize=self._authorizer(),
                          forward_tls=self.config.forward_tls(),
                          ready=self.readiness, leader_wait_s=self.config.timeout_s)
            self.metrics.app = app
            runner = web.AppRunner(app.app, access_log=None, handle_signals=False,
                                   logger=_request_log)
            await runner.setup()
            site = web.SockSite(runner, self.sock, ssl_context=self.config.server_tls())
            await site.start()
            log.info("schema registry serving on %s (group %s, topic %s)", self.config.url,
                     self.config.group_id, self.config.topic)
            if on_started is not None:
                on_started(self)
            try:
                await stop.wait()
            finally:
                await runner.cleanup()
        finally:
            await loop.run_in_executor(None, self.stop_store)

    def _authorizer(self) -> Any:
        writers = self.config.write_users
        if writers is None:
            return None
        return lambda user, changes: not changes or user in writers

    def _authenticator(self) -> Any:
        if not self.config.basic_auth:
            return None
        from millrace.schema_registry.auth import registry_authenticator

        return registry_authenticator(self.config.values).authenticate
