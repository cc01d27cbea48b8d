"""``KafkaServer``: start-up, the main loop, and shutdown of one broker process.

Start-up order (as Kafka's ``KafkaServer.startup``): read the config; open the metadata
store and the log manager (which recovers logs after an unclean shutdown); build the
replica manager and the group coordinator (which replays ``__consumer_offsets``);
then open the listeners.  Shutdown reverses it: stop accepting, finish the group
coordinator, flush and checkpoint every log, write the clean-shutdown marker.

Threading model: one asyncio event loop thread runs the network, the handlers, the
purgatory and the periodic tasks (retention, flush, checkpoints); log appends are
synchronous file writes on that thread (page-cache speed; fsync only as configured).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from millrace.broker.config import KafkaConfig
from millrace.broker.handlers import load_all
from millrace.broker.metadata import MetadataStore, TopicInfo
from millrace.broker.network import BrokerConnection, reap_idle_connections, start_listeners
from millrace.broker.replica_manager import ReplicaManager
from millrace.common.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from millrace.common.time import SYSTEM_TIME, Time
from millrace.protocol import API, ApiKey

log = logging.getLogger("millrace.broker")

# The highest version of each API this broker serves (None = the declared maximum).
# InitProducerId v6 is marked unstable upstream and not advertised by Kafka either.
VERSION_CAPS: dict[int, int] = {
    ApiKey.PRODUCE: 12, ApiKey.FETCH: 17, ApiKey.LIST_OFFSETS: 10, ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9, ApiKey.INIT_PRODUCER_ID: 5, ApiKey.WRITE_TXN_MARKERS: 1,
}
# Advertised minimum below what we accept (librdkafka < 2.11.1 feature detection).
ADVERTISED_MIN: dict[int, int] = {ApiKey.PRODUCE: 0}


class KafkaServer:
    def __init__(self, config: KafkaConfig, time: Time = SYSTEM_TIME) -> None:
        self.config = config
        self.time = time
        self.connections: set[BrokerConnection] = set()
        self.metadata: MetadataStore
        self.replica_manager: ReplicaManager
        self.group_coordinator: Any = None
        self.producer_id_manager: Any = None
        self._servers: list[asyncio.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.advertised_host = "localhost"
        self.advertised_port = 9092
        handlers = load_all()
        self.enabled_versions: dict[int, tuple[int, int]] = {}
        self.advertised_versions: dict[int, tuple[int, int]] = {}
        for key, api in API.items():
            if key not in handlers:
                continue
            hi = min(api.versions.high, VERSION_CAPS.get(key, api.versions.high))
            self.enabled_versions[key] = (api.versions.low, hi)
            self.advertised_versions[key] = (ADVERTISED_MIN.get(key, api.versions.low), hi)

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        cfg = self.config
        log.info("starting millrace broker node.id=%d log.dirs=%s", cfg.node_id,
                 ",".join(cfg.log_dirs))
        self.metadata = MetadataStore(cfg.log_dirs[0], cfg.node_id, cfg["cluster.id"])
        self.replica_manager = ReplicaManager(self)
        self.replica_manager.startup()
        for name in ("__consumer_offsets",):
            if name not in self.metadata.topics:
                self.create_topic(name, cfg["offsets.topic.num.partitions"],
                                  {"cleanup.policy": "compact",
                                   "segment.bytes": str(cfg["offsets.topic.segment.bytes"])})
        await self._start_group_coordinator()
        self._servers = await start_listeners(self)
        first = self._servers[0].sockets[0].getsockname()
        adv = cfg.advertised_listeners[0]
        self.advertised_host = adv.host or "localhost"
        self.advertised_port = adv.port or int(first[1])
        for srv in self._servers:
            for sock in srv.sockets:
                host, port = sock.getsockname()[:2]
                log.info("listening on %s:%d", host, port)
        log.info("millrace broker %d started; cluster.id=%s advertised=%s:%d", cfg.node_id,
                 self.metadata.cluster_id, self.advertised_host, self.advertised_port)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(reap_idle_connections(self)))
        self._tasks.append(loop.create_task(self.replica_manager.run_periodic()))

    async def _start_group_coordinator(self) -> None:
        try:
            from millrace.broker.group.service import GroupCoordinatorService
        except ImportError:  # the coordinator package is optional until it lands
            log.warning("group coordinator not available")
            return
        self.group_coordinator = GroupCoordinatorService(
            self.config, self.time, self.replica_manager.offsets_log())
        await self.group_coordinator.start()

    @property
    def bound_port(self) -> int:
        return int(self._servers[0].sockets[0].getsockname()[1])

    async def shutdown(self) -> None:
        log.info("stopping millrace broker %d", self.config.node_id)
        for srv in self._servers:
            srv.close()
        for c in list(self.connections):
            c.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        self.replica_manager.shutdown()
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 2)
        log.info("millrace broker %d stopped", self.config.node_id)

    async def serve_forever(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await self.startup()
        try:
            await stop.wait()
        finally:
            await self.shutdown()

    # ------------------------------------------------------------------ topic operations
    def create_topic(self, name: str, partitions: int, configs: dict[str, str],
                     replication_factor: int = -1, validate_only: bool = False) -> TopicInfo:
        if name in self.metadata.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self.config["num.partitions"]
        if partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        rf = self.config["default.replication.factor"] if replication_factor == -1 else (
            replication_factor)
        if rf < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if rf > 1 and name not in ("__consumer_offsets", "__transaction_state"):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: 1.")
        self.replica_manager.validate_topic_config(configs)
        from millrace.broker.metadata import validate_topic_name
        validate_topic_name(name)
        if validate_only:
            from millrace.broker.metadata import TopicInfo as _T
            return _T(name, __import__("uuid").UUID(int=0), partitions, dict(configs))
        info = self.metadata.create_topic(name, partitions, configs)
        self.replica_manager.create_partitions(info, 0, partitions)
        log.info("created topic %s with %d partition(s)", name, partitions)
        return info

    def delete_topic(self, name: str) -> None:
        if name not in self.metadata.topics:
            raise UnknownTopicOrPartitionError("This server does not host this topic.")
        self.replica_manager.delete_topic(name)
        self.metadata.delete_topic(name)
        log.info("deleted topic %s", name)


def run(config: KafkaConfig) -> None:
    """Run a broker in the current thread until SIGTERM/SIGINT."""
    asyncio.run(KafkaServer(config).serve_forever())
