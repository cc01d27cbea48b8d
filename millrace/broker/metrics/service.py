"""``MetricsService``: what the broker runs for its metrics besides recording them — the
tick task that moves every meter's rates and histogram's window every ``TICK_S``, the
event loop's idle share, the consumer-lag monitor of the groups this broker coordinates
(``ConsumerLagMonitor``), the readiness rules, and the HTTP listeners
(``BrokerHttpServer``).

Started by ``KafkaServer`` once the broker accepts connections and stopped last on
shutdown, so that ``/readyz`` answers "not ready" with the reason (a failed log dir,
shutting down) while the broker stops.

Thread ownership: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from millrace.broker.config import HttpListener
from millrace.broker.metrics import loop_idle
from millrace.broker.metrics.broker_metrics import register_broker_metrics
from millrace.broker.metrics.consumer_lag import ConsumerLagMonitor
from millrace.broker.metrics.http_server import BrokerHttpServer
from millrace.broker.metrics.lag_http import lag_routes
from millrace.broker.metrics.yammer import TICK_S
from millrace.broker.record_tracer_http import trace_routes
from millrace.broker.security.authorizer import Action
from millrace.broker.security.basic_auth import HttpBasicAuthenticator
from millrace.broker.security.listener_security import ListenerSecurity
from millrace.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from millrace.security.kafka_principal import KafkaPrincipal

if TYPE_CHECKING:
    from millrace.broker.services import BrokerServices

log = logging.getLogger(__name__)


class MetricsService:
    def __init__(self, services: BrokerServices,
                 listener_security: dict[str, ListenerSecurity],
                 sockets: list[tuple[HttpListener, socket.socket]], *,
                 failure: Callable[[], str | None]) -> None:
        self.services = services
        self.failure = failure
        self.serving = False  # registered and accepting (set by the server)
        self.stopping = False
        self._task: asyncio.Task[None] | None = None
        self._idle: loop_idle.IdleShare | None = None
        register_broker_metrics(services.metrics, services)  # the gauges over its state
        selector = loop_idle.current_selector()
        if selector is not None:
            idle = self._idle = loop_idle.IdleShare(selector)
            services.metrics.gauge("kafka.network", "SocketServer",
                                   "NetworkProcessorAvgIdlePercent", lambda: idle.value)
        # built now, started with the service (the group coordinator runs by then)
        self.consumer_lag: ConsumerLagMonitor | None = None
        if services.config["metrics.enabled"]:
            self.consumer_lag = ConsumerLagMonitor.from_services(services)
            self.consumer_lag.register_metrics(services.metrics)
        config = services.config
        self.http: BrokerHttpServer | None = None
        if sockets:
            tls = next((sec.ssl_context for sec in listener_security.values()
                        if sec.ssl_context is not None), None)
            authenticator = None
            if config["http.authentication.method"] == "BASIC":
                plain: dict[str, str] = {}
                for sec in listener_security.values():
                    plain.update(sec.plain_users)
                authenticator = HttpBasicAuthenticator(plain,
                                                       services.credentials.scram_credential)
            self.http = BrokerHttpServer(config, sockets, services.metrics, self.readiness,
                                         tls=tls,
                                         authenticator=authenticator,
                                         authorize=self._may_describe_cluster
                                         if services.acls is not None else None,
                                         routes=[*(lag_routes(self.consumer_lag)
                                                   if self.consumer_lag is not None
                                                   else ()),
                                                 *services.replica_manager.state_log
                                                 .routes(),
                                                 *trace_routes(
                                                     services.replica_manager.tracer,
                                                     self._may_alter_cluster
                                                     if services.acls is not None
                                                     else None,
                                                     self._may_read_topic
                                                     if services.acls is not None
                                                     else None)])

    def _may_describe_cluster(self, user: str, host: str) -> bool:
        acls = self.services.acls
        if acls is None:
            return True
        return acls.authorizer.authorize(KafkaPrincipal("User", user), host, Action(
            AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, True, True))

    def _may_alter_cluster(self, user: str, host: str) -> bool:
        """Arming record tracing and watching records (``RecordTracer.routes``)."""
        acls = self.services.acls
        if acls is None:
            return True
        return acls.authorizer.authorize(KafkaPrincipal("User", user), host, Action(
            AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, True, True))

    def _may_read_topic(self, user: str, host: str, topic: str) -> bool:
        """Reporting a stage of the records of a topic (``/v1/traces/report``)."""
        acls = self.services.acls
        if acls is None:
            return True
        return acls.authorizer.authorize(KafkaPrincipal("User", user), host, Action(
            AclOperation.READ, ResourceType.TOPIC, topic, True, True))

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick(), name="metrics-tick")
        if self.consumer_lag is not None:
            self.consumer_lag.start()
        if self.http is not None:
            await self.http.start()

    def urls(self) -> list[str]:
        return self.http.urls() if self.http is not None else []

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.consumer_lag is not None:
            await self.consumer_lag.stop()
        if self.http is not None:
            await self.http.stop()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.services.metrics.tick()
                if self._idle is not None:
                    self._idle.sample()
            except Exception:  # a metric must never take the broker down
                log.exception("metrics tick failed")

    def readiness(self) -> list[str]:
        """Why the broker is not ready for clients ([] when it is)."""
        reasons: list[str] = []
        failure = self.failure()
        if failure is not None:
            reasons.append(failure)
        elif self.stopping:
            reasons.append("shutting down")
        elif not self.serving:
            reasons.append("starting: not registered and accepting yet")
        services = self.services
        online = set(services.log_manager.online_log_dirs)
        offline = [d for d in services.config.log_dirs if d not in online]
        if offline:
            reasons.append(f"log dirs offline: {', '.join(offline)}")
        cluster = services.cluster
        if cluster is not None:
            cache = cluster.metadata_cache
            if cache.controller_epoch < 0:
                reasons.append("no metadata from the controller yet (no UpdateMetadata "
                               "received)")
            elif cache.alive_broker(services.config.node_id) is None:
                reasons.append("not among the live brokers in the controller's metadata")
        return reasons
