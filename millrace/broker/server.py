"""``KafkaServer``: start-up, the main loop, and shutdown of one broker process.

Start-up order (as Kafka's ``KafkaServer.startup``): read the config; open the cluster
metadata and the log manager (which recovers logs after an unclean shutdown); build the
replica manager (hosting every assigned partition), the admin manager and the group
coordinator (which replays ``__consumer_offsets``) and the transaction coordinator
(``__transaction_state``); bind the listeners, register the
broker with its advertised endpoint, then start accepting.  Each service is built here
with what it needs and handed to the handlers as ``BrokerServices``; none of them holds
the server.  Shutdown reverses it: stop accepting, finish the group coordinator,
complete parked requests, flush and checkpoint every log, write the clean-shutdown
marker.

A failed log dir (Kafka's ``LogDirFailureHandler``): storage reports every I/O error in
a log dir to the log manager's ``LogDirFailureChannel``; the server listens there.  Kafka
takes the dir's partitions offline, tells the controller, and halts the broker once *all*
of its dirs are offline ("Shutdown broker because all log dirs in ... have failed").  A
millrace broker has one log dir (and no per-dir notification to the controller), so an
offline dir stops the broker: no controlled shutdown (its logs cannot be trusted to take
part), listeners closed, logs closed without writing anything more, the ZooKeeper session
closed so that the controller moves leadership and drops this broker from the ISRs at
once, and the process exits with status 1.  Until then every log of the dir refuses
reads and writes, so nothing that hit the error is acknowledged.  A start-up that meets
an I/O error in the log dir (a disk still full) stops the same way, before registering.

Threading model: one asyncio event loop thread runs the network, the handlers, the
purgatories and the periodic tasks (retention, flush, checkpoints); log appends are
synchronous file writes on that thread (page-cache speed; fsync only as configured).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Callable

from millrace.broker.admin_manager import AdminManager
from millrace.broker.api_version_manager import ApiVersionManager
from millrace.broker.config import HttpListener, KafkaConfig
from millrace.broker.group.offsets_log import ReplicatedOffsetsLog
from millrace.broker.group.service import GroupCoordinatorService
from millrace.broker.handlers import load_all
from millrace.broker.metadata import BrokerRegistration, EndPoint, LocalMetadataStore
from millrace.broker.metadata.zk_cluster_metadata import ZkClusterMetadata
from millrace.broker.metrics import loop_idle
from millrace.broker.metrics.broker_metrics import log_flush_timer
from millrace.broker.metrics.http_server import HttpBindError, bind_http_listeners
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.service import MetricsService
from millrace.broker.network import ListenerBindError, SocketServer
from millrace.broker.producer_id_manager import ProducerIdManager
from millrace.broker.quota.client_quota_manager import ClientQuotas
from millrace.broker.quota.quota_store import LocalQuotaStore
from millrace.broker.replica_manager import ReplicaManager
from millrace.broker.security.acl_service import AclService, authorizer_enabled
from millrace.broker.security.acl_store import LocalAclStore
from millrace.broker.security.credential_cache import build_local_credential_cache
from millrace.broker.security.listener_security import build_all
from millrace.broker.services import BrokerServices
from millrace.broker.topic_config import TopicConfigs
from millrace.broker.transaction.service import TransactionCoordinatorService
from millrace.broker.transaction.topic import TRANSACTION_STATE_TOPIC, transaction_topic_configs
from millrace.broker.zk_broker import (
    build_zk_services,
    controlled_shutdown,
    start_config_change_listener,
    start_controller,
    watch_session,
)
from millrace.common.errors import KafkaStorageError
from millrace.common.time import SYSTEM_TIME, Time
from millrace.storage import LogConfig, LogManager

log = logging.getLogger("millrace.broker")


class KafkaServer:
    def __init__(self, config: KafkaConfig, time: Time = SYSTEM_TIME) -> None:
        self.config = config
        self.time = time
        self.services: BrokerServices | None = None
        self.socket_server: SocketServer | None = None
        self.metrics_service: MetricsService | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop: asyncio.Event | None = None
        # why the broker is stopping on its own (a failed log dir); None: not failing
        self.failure: str | None = None
        # Each listener's TLS context and SASL settings, built now: a keystore that does
        # not load or a JAAS text that does not parse is a bad configuration (ConfigError
        # naming the key), refused before anything binds or touches the log dirs.
        self.listener_security = build_all(config)

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def build_services(config: KafkaConfig, time: Time) -> BrokerServices:
        """Every service, wired explicitly; logs recovered, partitions hosted, the
        internal topics created.  The group coordinator is built but not started.
        The metrics registry comes first: the components record into it from the
        start (log flushes during recovery included)."""
        metrics = KafkaMetricsRegistry()
        metadata = LocalMetadataStore(config.log_dirs[0], config.node_id, config["cluster.id"])
        topic_configs = TopicConfigs(config)

        def log_config_for(topic: str) -> LogConfig:
            info = metadata.topics.get(topic)
            return topic_configs.log_config(info.configs if info else {})

        log_manager = LogManager(config.log_dirs, log_config_for, time=time,
                                 producer_id_expiration_ms=config["producer.id.expiration.ms"],
                                 flush_timer=log_flush_timer(metrics))
        log_manager.startup()  # KafkaStorageError: the log dir failed (run() says so)
        replica_manager = ReplicaManager(config, time, metadata, log_manager, topic_configs,
                                         metrics)
        replica_manager.startup()
        admin_manager = AdminManager(config, metadata, replica_manager, topic_configs)
        if "__consumer_offsets" not in metadata.topics:
            admin_manager.create_topic(
                "__consumer_offsets", config["offsets.topic.num.partitions"],
                {"cleanup.policy": "compact",
                 "segment.bytes": str(config["offsets.topic.segment.bytes"])})
        if TRANSACTION_STATE_TOPIC not in metadata.topics:
            admin_manager.create_topic(
                TRANSACTION_STATE_TOPIC, config["transaction.state.log.num.partitions"],
                transaction_topic_configs(config, replication_factor=1))
        offsets_log = ReplicatedOffsetsLog(replica_manager, metadata,
                                           config["offsets.topic.num.partitions"],
                                           config["offsets.commit.timeout.ms"])
        group_coordinator = GroupCoordinatorService(config, time, offsets_log,
                                                    tracer=replica_manager.tracer)
        # Markers on __consumer_offsets complete transactional offset commits.
        replica_manager.txn_marker_listeners.append(group_coordinator.on_txn_marker)
        producer_id_manager = ProducerIdManager(metadata.reserve_producer_ids)
        txn_log = ReplicatedOffsetsLog(replica_manager, metadata,
                                       config["transaction.state.log.num.partitions"],
                                       config["offsets.commit.timeout.ms"],
                                       topic=TRANSACTION_STATE_TOPIC)
        quota_store = LocalQuotaStore(metadata)
        return BrokerServices(
            config=config, time=time, metadata=metadata, log_manager=log_manager,
            topic_configs=topic_configs, replica_manager=replica_manager,
            admin_manager=admin_manager,
            group_coordinator=group_coordinator,
            producer_id_manager=producer_id_manager,
            api_versions=ApiVersionManager(load_all(), config["transaction.version"]),
            transaction_coordinator=TransactionCoordinatorService(
                config, time, txn_log, metadata, producer_id_manager.generate_producer_id),
            credentials=build_local_credential_cache(config, metadata),
            quota_store=quota_store,
            client_quotas=ClientQuotas.fed_by(config, quota_store),
            acls=(AclService.build(config, LocalAclStore(metadata))
                  if authorizer_enabled(config) else None),
            metrics=metrics)

    async def startup(self) -> None:
        cfg = self.config
        clustered = bool(cfg["zookeeper.connect"])
        # The listeners first: a taken port fails here, before anything is read or
        # created in the log dirs (ListenerBindError, one line from serve_forever).
        socket_server = self.socket_server = SocketServer(cfg, self.time,
                                                          self.listener_security)
        await socket_server.bind()
        try:
            http_sockets = bind_http_listeners(cfg)
        except HttpBindError as e:
            await socket_server.shutdown()
            raise ListenerBindError(str(e)) from e
        # DescribeConfigs shows the ports bound (``:0`` resolved): what `groups describe`
        # dials for the coordinator's lag view
        cfg.values["http.listeners"] = [
            HttpListener(listener.scheme, listener.host, sock.getsockname()[1]).url
            for listener, sock in http_sockets]
        log.info("starting millrace broker node.id=%d log.dirs=%s%s", cfg.node_id,
                 ",".join(cfg.log_dirs),
                 f" zookeeper.connect={cfg['zookeeper.connect']}" if clustered else "")
        loop = asyncio.get_running_loop()
        if clustered:
            services = self.services = await loop.run_in_executor(
                None, build_zk_services, cfg, self.time, loop)
            await services.group_coordinator.start(partitions=[])
            await services.transaction_coordinator.start(partitions={})
        else:
            services = self.services = self.build_services(cfg, self.time)
            await services.group_coordinator.start()
            await services.transaction_coordinator.start()

        def offline(log_dir: str, why: str, _error: BaseException | None) -> None:
            loop.call_soon_threadsafe(self._on_offline_log_dir, log_dir, why)  # any thread

        services.log_manager.failure_channel.add_listener(offline)
        bound = socket_server.bound_addresses()
        endpoints = tuple(
            EndPoint(a.host or "localhost", a.port or socket_server.bound_port_of(a.name),
                     a.name, a.protocol)
            for a in cfg.advertised_listeners)
        inter = next(e for e in endpoints if e.listener_name == cfg.inter_broker_listener_name)
        host, port = inter.host, inter.port
        registration = BrokerRegistration(cfg.node_id, host, port, cfg["broker.rack"],
                                          endpoints=endpoints)
        await loop.run_in_executor(None, services.metadata.register_broker, registration)
        for bound_host, bound_port in bound:
            log.info("listening on %s:%d", bound_host, bound_port)
        await socket_server.start_serving(services)
        if services.cluster is not None:
            assert isinstance(services.metadata, ZkClusterMetadata)
            services.cluster.broker_epoch = services.metadata.broker_epoch
            start_config_change_listener(services, loop)
            watch_session(services, loop)
            await start_controller(services)
            self._tasks.append(loop.create_task(services.replica_manager.run_isr_expiration()))
        metrics = self.metrics_service = MetricsService(
            services, self.listener_security, http_sockets, failure=lambda: self.failure)
        await metrics.start()
        metrics.serving = True
        log.info("millrace broker %d started; cluster.id=%s advertised=%s:%d%s", cfg.node_id,
                 services.metadata.cluster_id, host, port,
                 "".join(f" {url}/metrics" for url in metrics.urls()))
        self._tasks.append(loop.create_task(services.replica_manager.run_periodic()))

    @property
    def bound_port(self) -> int:
        assert self.socket_server is not None
        return self.socket_server.bound_addresses()[0][1]

    def _on_offline_log_dir(self, log_dir: str, why: str) -> None:
        """A log dir went offline (on the event loop): stop the broker (module docstring)."""
        if self.failure is not None:
            return
        assert self.services is not None
        online = self.services.log_manager.online_log_dirs
        if online:
            self.failure = (f"Shutdown broker because log dir {log_dir} has failed ({why}); "
                            f"millrace cannot take one dir's partitions offline while "
                            f"{','.join(online)} serve")
        else:
            self.failure = (f"Shutdown broker because all log dirs in "
                            f"{','.join(self.config.log_dirs)} have failed ({why})")
        log.error("%s", self.failure)
        if self._stop is not None:
            self._stop.set()

    async def shutdown(self) -> None:
        log.info("stopping millrace broker %d", self.config.node_id)
        if self.metrics_service is not None:  # /readyz says so until the very end
            self.metrics_service.stopping = True
        cluster = self.services.cluster if self.services is not None else None
        if cluster is not None and self.failure is None:
            await controlled_shutdown(self.services)  # type: ignore[arg-type]
        if self.socket_server is not None:
            await self.socket_server.shutdown()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if cluster is not None:
            if cluster.controller is not None:
                await cluster.controller.shutdown()
            await cluster.fetcher_manager.shutdown()
        if self.services is not None:
            await self.services.group_coordinator.stop()
            await self.services.transaction_coordinator.stop()
            self.services.replica_manager.shutdown()
            self.services.log_manager.shutdown()
            if self.services.acls is not None:
                self.services.acls.stop()
        if cluster is not None:
            cluster.zk.close()  # the registration vanishes: the controller reacts
        if self.metrics_service is not None:
            await self.metrics_service.stop()
        log.info("millrace broker %d stopped", self.config.node_id)

    async def serve_forever(self, on_started: Callable[[KafkaServer], None] | None = None,
                            *, freeze_heap: bool = False) -> int:
        """Serve until SIGTERM/SIGINT (then 0) or a failed log dir (then 1: the exit
        status of the process, as Kafka's halt); ``on_started`` is called once the
        listeners accept (the CLI's ``--output json`` start-up line).

        ``freeze_heap`` (a process that is only this broker): once started, collect and
        then ``gc.freeze()`` the heap.  What start-up built (modules, codecs, the logs
        loaded) lives as long as the process, and the cyclic GC's full collections would
        walk all of it again and again under load, about a tenth of a produce request's
        time with 1,000 partitions.  Objects made later are collected as usual.  Not in
        a shared process (tests), where the frozen objects would include others'."""
        stop = self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        try:
            await self.startup()
        except ListenerBindError as e:
            self.failure = str(e)
            log.error("%s", e)  # nothing else was started: the one line is the story
            return 1
        except KafkaStorageError as e:
            # the log dir failed before the broker registered: nothing to hand over
            self.failure = (f"Shutdown broker because all log dirs in "
                            f"{','.join(self.config.log_dirs)} have failed: {e}")
            log.error("%s", self.failure)
            await self.shutdown()
            return 1
        if self.failure is not None:  # failed while starting, after the listener was set
            stop.set()
        else:
            if freeze_heap:
                gc.collect()
                gc.freeze()
            if on_started is not None:
                on_started(self)
        try:
            await stop.wait()
        finally:
            await self.shutdown()
        return 0 if self.failure is None else 1


def run(config: KafkaConfig) -> int:
    """Run a broker in the current thread until SIGTERM/SIGINT (exit status 0) or until
    its log dir fails (1)."""
    return loop_idle.run(KafkaServer(config).serve_forever(freeze_heap=True))
