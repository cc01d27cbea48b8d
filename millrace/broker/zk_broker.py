"""A broker in a ZooKeeper cluster: its services, its registration, its controlled shutdown.

With ``zookeeper.connect`` set, ``KafkaServer`` builds these instead of the single node's
(Kafka's ``KafkaServer.startup`` in ZooKeeper mode):

1. connect to ZooKeeper (optional chroot), create the persistent roots, get or create the
   cluster id and check it against ``meta.properties`` in the log dir;
2. open the logs (recovery), build a ``ReplicaManager`` whose partitions appear only when
   the controller's LeaderAndIsr assigns them, with replica fetchers and a ZooKeeper ISR
   manager, and the admin manager in cluster mode (topic changes are ZooKeeper writes the
   controller reacts to);
3. a group coordinator that loads the ``__consumer_offsets`` partitions this broker leads
   and unloads those it stops leading, and a transaction coordinator that does the same
   with ``__transaction_state`` (coordinator epoch = the partition's leader epoch);
4. after the listeners are bound: register ``/brokers/ids/<id>`` (the znode's czxid is the
   broker epoch), start the controller election, then serve.

``controlled_shutdown`` runs on SIGTERM before anything stops: the broker asks the
controller (ControlledShutdown) to move leadership of its partitions elsewhere, retrying
``controlled.shutdown.max.retries`` times, so clients see a leader change instead of an
outage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from millrace.broker.admin_manager import AdminManager
from millrace.broker.api_version_manager import ApiVersionManager
from millrace.broker.broker_channel import BrokerChannel
from millrace.broker.config import KafkaConfig
from millrace.broker.controller_service import ControllerService
from millrace.broker.group.offsets_log import ReplicatedOffsetsLog
from millrace.broker.group.service import GroupCoordinatorService
from millrace.broker.handlers import load_all
from millrace.broker.metadata.local_store import ensure_meta_properties
from millrace.broker.metadata.metadata_cache import MetadataCache
from millrace.broker.metadata.zk_cluster_metadata import ZkClusterMetadata
from millrace.broker.metrics.broker_metrics import log_flush_timer
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.partition import Partition
from millrace.broker.producer_id_manager import ProducerIdManager
from millrace.broker.quota.client_quota_manager import ClientQuotas
from millrace.broker.quota.quota_store import ZkQuotaStore
from millrace.broker.replica_fetcher import ReplicaFetcherManager
from millrace.broker.replica_manager import ReplicaManager
from millrace.broker.security.acl_service import AclService, authorizer_enabled
from millrace.broker.security.acl_store import ZkAclStore
from millrace.broker.security.credential_cache import (
    USER_CONFIG_TYPE,
    build_zk_credential_cache,
)
from millrace.broker.security.inter_broker import inter_broker_security
from millrace.broker.services import BrokerServices, ClusterServices
from millrace.broker.topic_config import TopicConfigs
from millrace.broker.transaction.service import TransactionCoordinatorService
from millrace.broker.transaction.topic import TRANSACTION_STATE_TOPIC
from millrace.broker.zk import KafkaZkClient
from millrace.broker.zk_alter_isr_manager import ZkAlterIsrManager
from millrace.common.errors import BrokerNotAvailableError, Errors
from millrace.common.time import Time
from millrace.protocol.types import ControlledShutdownRequest
from millrace.security.sanitizer import desanitize
from millrace.storage import LogConfig, LogManager

log = logging.getLogger("millrace.broker")

OFFSETS_TOPIC = "__consumer_offsets"
CONTROLLED_SHUTDOWN_VERSION = 3


def build_zk_services(config: KafkaConfig, time: Time,
                      loop: asyncio.AbstractEventLoop) -> BrokerServices:
    # first: the ZooKeeper client counts its session events from the first connection
    metrics = KafkaMetricsRegistry()
    zk = KafkaZkClient(config["zookeeper.connect"],
                       session_timeout_ms=config["zookeeper.session.timeout.ms"],
                       connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
                       time=time, metrics=metrics).start()
    zk.create_top_level_paths()
    cluster_id = zk.create_or_get_cluster_id(config["cluster.id"])
    ensure_meta_properties(config.log_dirs[0], config.node_id, cluster_id)
    listener = config.inter_broker_listener_name
    cache = MetadataCache(config.node_id)
    metadata = ZkClusterMetadata(zk, cache, cluster_id, listener)
    topic_configs = TopicConfigs(config)

    def log_config_for(topic: str) -> LogConfig:
        return topic_configs.log_config(metadata.topic_configs(topic))

    log_manager = LogManager(config.log_dirs, log_config_for, time=time,
                             producer_id_expiration_ms=config["producer.id.expiration.ms"],
                             flush_timer=log_flush_timer(metrics))
    try:
        log_manager.startup()
    except BaseException:  # a failed log dir: no session left open behind the error
        zk.close()
        raise
    rm = ReplicaManager(config, time, metadata, log_manager, topic_configs, metrics)
    rm.alter_isr_manager = ZkAlterIsrManager(zk, loop, rm.partition_changed, rm.isr_meters,
                                             rm.state_log)
    rm.fetcher_manager = ReplicaFetcherManager(config.node_id, rm.get_partition,
                                               rm.partition_changed, config, time,
                                               rm.topic_stats)
    rm.startup()
    admin = AdminManager(config, metadata, rm, topic_configs, cluster=True)
    group = GroupCoordinatorService(config, time, ReplicatedOffsetsLog(
        rm, metadata, config["offsets.topic.num.partitions"],
        config["offsets.commit.timeout.ms"]), tracer=rm.tracer)
    rm.leadership_listeners.append(_group_leadership(group, loop))
    rm.txn_marker_listeners.append(group.on_txn_marker)
    producer_id_manager = ProducerIdManager(metadata.reserve_producer_ids)
    txn = TransactionCoordinatorService(config, time, ReplicatedOffsetsLog(
        rm, metadata, config["transaction.state.log.num.partitions"],
        config["offsets.commit.timeout.ms"], topic=TRANSACTION_STATE_TOPIC), metadata,
        producer_id_manager.generate_producer_id)
    rm.leadership_listeners.append(_txn_leadership(txn, loop))
    quota_store = ZkQuotaStore(zk)
    return BrokerServices(
        config=config, time=time, metadata=metadata, log_manager=log_manager,
        topic_configs=topic_configs, replica_manager=rm, admin_manager=admin,
        group_coordinator=group,
        producer_id_manager=producer_id_manager,
        api_versions=ApiVersionManager(load_all(), config["transaction.version"]),
        transaction_coordinator=txn,
        credentials=build_zk_credential_cache(config, zk),
        quota_store=quota_store,
        client_quotas=ClientQuotas.fed_by(config, quota_store),  # reads ZooKeeper
        acls=AclService.build(config, ZkAclStore(zk)) if authorizer_enabled(config) else None,
        cluster=ClusterServices(broker_epoch=-1, metadata_cache=cache,
                                fetcher_manager=rm.fetcher_manager, zk=zk),
        metrics=metrics)


def _group_leadership(group: GroupCoordinatorService, loop: asyncio.AbstractEventLoop
                      ) -> Callable[[list[Partition], list[Partition]], None]:
    """The group coordinator follows leadership of ``__consumer_offsets``."""
    def changed(leaders: list[Partition], followers: list[Partition]) -> None:
        led = [p.index for p in leaders if p.topic == OFFSETS_TOPIC]
        followed = [p.index for p in followers if p.topic == OFFSETS_TOPIC]
        if followed:
            group.unload_partitions(followed)
        if led:
            loop.create_task(group.load_partitions(led))
    return changed


def _txn_leadership(txn: TransactionCoordinatorService, loop: asyncio.AbstractEventLoop
                    ) -> Callable[[list[Partition], list[Partition]], None]:
    """The transaction coordinator follows leadership of ``__transaction_state``; a
    partition's coordinator epoch is its leader epoch."""
    def changed(leaders: list[Partition], followers: list[Partition]) -> None:
        led = {p.index: p.leader_epoch for p in leaders if p.topic == TRANSACTION_STATE_TOPIC}
        followed = [p.index for p in followers if p.topic == TRANSACTION_STATE_TOPIC]
        if followed:
            txn.unload_partitions(followed)
        if led:
            loop.create_task(txn.load_partitions(led))
    return changed


def start_config_change_listener(services: BrokerServices,
                                 loop: asyncio.AbstractEventLoop) -> None:
    """Every broker applies topic config changes made through any broker: each change
    writes ``/config/changes/config_change_<n>`` naming ``topics/<t>``; on a new
    notification the broker re-reads that topic's overrides and updates its logs
    (Kafka's ZkConfigManager).  A notification naming ``users/<sanitized user>`` makes
    the broker re-read that user's SCRAM credentials into its ``CredentialCache``
    (Kafka's UserConfigHandler).  A notification naming a quota entity (``users/<u>``,
    ``users/<u>/clients/<c>``, ``clients/<c>``, ``ips/<ip>``) makes the broker re-read its
    quotas and publish them to the quota store's watchers: the client quota manager, the
    connection quotas for an IP (Kafka's QuotaConfigHandler and IpConfigHandler).
    Notifications present at start-up were already read with the topics' configs and
    the credentials; the quotas are re-read whole now, so a change made after the quota
    watchers' ``load()`` and before this listener started is published too."""
    cluster = services.cluster
    assert cluster is not None
    metadata = services.metadata
    assert isinstance(metadata, ZkClusterMetadata)
    state = {"last": max((seq for seq, _ in cluster.zk.get_config_change_notifications()),
                         default="")}
    # changes up to "last" are read now; later ones arrive as notifications
    loop.create_task(services.credentials.reload())
    quotas = services.quota_store
    assert isinstance(quotas, ZkQuotaStore)
    quota_reads = asyncio.Lock()  # each read published before the next starts: in order

    async def reload_quotas() -> None:
        async with quota_reads:
            try:
                quotas.publish_all(await loop.run_in_executor(None, quotas.read_all))
            except Exception:
                log.exception("re-reading the client quotas failed")

    loop.create_task(reload_quotas())

    def apply(entities: list[str]) -> None:
        rm = services.replica_manager
        for entity in entities:
            kind, _, name = entity.partition("/")
            if kind == "topics" and name:
                metadata.config_changed(name)
                info = metadata.topics.get(name)
                if info is not None:
                    rm.update_topic_config(info)
                    log.info("applied config change of topic %s", name)

    def read_new() -> list[str]:
        fresh = [(seq, path) for seq, path in cluster.zk.get_config_change_notifications()
                 if seq > state["last"] and path]
        if fresh:
            state["last"] = fresh[-1][0]
        return [path for _, path in fresh if path is not None]

    async def on_change() -> None:
        entities = await loop.run_in_executor(None, read_new)
        if entities:
            apply(entities)
            for user in changed_users(entities):
                await services.credentials.reload_user(user)
            async with quota_reads:
                try:
                    changed = await loop.run_in_executor(None, quotas.read_entities,
                                                         entities)
                except Exception:
                    log.exception("re-reading the client quotas of %s failed", entities)
                    return
                for entity, values in changed:
                    quotas.publish(entity, values)

    def notified(_seqs: list[str]) -> None:  # kazoo's thread
        loop.call_soon_threadsafe(lambda: loop.create_task(on_change()))

    cluster.zk.watch_config_changes(notified)


def changed_users(entity_paths: list[str]) -> list[str]:
    """The users (desanitized) whose own entity the notifications name, once each."""
    users = []
    for entity in entity_paths:
        kind, _, name = entity.partition("/")
        if kind == USER_CONFIG_TYPE and name and "/" not in name:
            try:
                users.append(desanitize(name))
            except ValueError:
                log.warning("ignoring a config change of a malformed user entity %r", name)
    return list(dict.fromkeys(users))


def watch_session(services: BrokerServices, loop: asyncio.AbstractEventLoop) -> None:
    """A ZooKeeper session that expires takes the broker's registration with it: the
    controller treats the broker as dead (its replicas leave the ISRs, its partitions get
    new leaders).  When kazoo has a new session, the broker registers again (a new broker
    epoch: the controller sees a restart and sends LeaderAndIsr) and joins the controller
    election again (Kafka's ``SessionExpirationHandler``)."""
    cluster = services.cluster
    metadata = services.metadata
    assert cluster is not None and isinstance(metadata, ZkClusterMetadata)
    lost = {"yes": False}

    async def reregister() -> None:
        try:
            epoch = await loop.run_in_executor(None, metadata.reregister)
        except Exception:
            log.exception("re-registration after session expiry failed")
            return
        cluster.broker_epoch = epoch
        log.info("re-registered after ZooKeeper session expiry (broker epoch %d)", epoch)
        if cluster.controller is not None:
            cluster.controller.enqueue(cluster.controller.elect)

    def on_state(state: str) -> None:  # kazoo's thread: never call the client here
        if state == "LOST":
            lost["yes"] = True
        elif state == "CONNECTED" and lost["yes"]:
            lost["yes"] = False
            loop.call_soon_threadsafe(lambda: loop.create_task(reregister()))

    cluster.zk.add_state_listener(on_state)


async def start_controller(services: BrokerServices) -> ControllerService:
    cluster = services.cluster
    assert cluster is not None
    controller = ControllerService(services.config, services.time, cluster.zk,
                                   services.config.inter_broker_listener_name,
                                   metrics=services.metrics)
    cluster.controller = controller
    await controller.startup()
    return controller


async def controlled_shutdown(services: BrokerServices) -> bool:
    """Ask the controller to move leadership away; True once nothing is left here."""
    config = services.config
    cluster = services.cluster
    if cluster is None or not config["controlled.shutdown.enable"]:
        return False
    backoff = config["controlled.shutdown.retry.backoff.ms"] / 1000
    for attempt in range(config["controlled.shutdown.max.retries"]):
        controller_id = cluster.metadata_cache.controller_id
        broker = cluster.metadata_cache.alive_broker(controller_id)
        if broker is None:
            log.info("controlled shutdown: no controller known yet (attempt %d)", attempt + 1)
            await asyncio.sleep(backoff)
            continue
        channel = BrokerChannel(broker.node_id, broker.host, broker.port,
                                client_id=f"broker-{config.node_id}-shutdown",
                                request_timeout_ms=config["controller.socket.timeout.ms"],
                                security=inter_broker_security(config))
        try:
            response = await channel.send(ControlledShutdownRequest(
                broker_id=config.node_id, broker_epoch=cluster.broker_epoch),
                CONTROLLED_SHUTDOWN_VERSION)
        except BrokerNotAvailableError as e:
            log.info("controlled shutdown: %s", e)
            response = None
        finally:
            channel.close()
        if response is not None and response.error_code == Errors.NONE \
                and not response.remaining_partitions:
            log.info("controlled shutdown succeeded")
            return True
        if response is not None:
            log.info("controlled shutdown: %d partition(s) still led here (error %d)",
                     len(response.remaining_partitions), response.error_code)
        await asyncio.sleep(backoff)
    log.warning("controlled shutdown did not complete; shutting down anyway")
    return False
