"""``BrokerServices``: the broker's services, built once at start-up and handed to handlers.

``KafkaServer.startup`` builds each service explicitly with what it needs (no service
holds the server), in dependency order: config and time; the cluster metadata; the log
manager (which recovers the logs); the replica manager; the admin manager; the group
coordinator (which replays ``__consumer_offsets``); the producer-id manager; the
transaction coordinator (which replays ``__transaction_state``).  Handlers reach them
through ``RequestContext.services``; the client quota configs (``quota_store``: load()
at start-up, watch() for every change made through any broker) and their enforcement
(``client_quotas``, fed by the store; the network layer charges requests to it); the
ACL service (``acls``) is None unless ``authorizer.class.name`` turns authorization on;
the metrics registry (``metrics``) holds every metric under its Kafka name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.broker.admin_manager import AdminManager
from millrace.broker.api_version_manager import ApiVersionManager
from millrace.broker.config import KafkaConfig
from millrace.broker.controller_service import ControllerService
from millrace.broker.group.service import GroupCoordinatorService
from millrace.broker.metadata import ClusterMetadata
from millrace.broker.metadata.metadata_cache import MetadataCache
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.producer_id_manager import ProducerIdManager
from millrace.broker.quota.client_quota_manager import ClientQuotas
from millrace.broker.quota.quota_store import QuotaStore
from millrace.broker.replica_fetcher import ReplicaFetcherManager
from millrace.broker.replica_manager import ReplicaManager
from millrace.broker.security.acl_service import AclService
from millrace.broker.security.credential_cache import CredentialCache
from millrace.broker.topic_config import TopicConfigs
from millrace.broker.transaction.service import TransactionCoordinatorService
from millrace.broker.zk import KafkaZkClient
from millrace.common.time import Time
from millrace.storage import LogManager


@dataclass(slots=True)
class ClusterServices:
    """What a broker in a ZooKeeper cluster has besides the single node's services: its
    registration epoch (KIP-380: a request meant for an older incarnation is refused),
    the controller's view pushed by UpdateMetadata, and its replica fetchers."""

    broker_epoch: int
    metadata_cache: MetadataCache
    fetcher_manager: ReplicaFetcherManager
    zk: KafkaZkClient
    controller: ControllerService | None = None  # set once the election service starts


@dataclass(frozen=True, slots=True)
class BrokerServices:
    config: KafkaConfig
    time: Time
    metadata: ClusterMetadata
    log_manager: LogManager
    topic_configs: TopicConfigs
    replica_manager: ReplicaManager
    admin_manager: AdminManager
    group_coordinator: GroupCoordinatorService
    producer_id_manager: ProducerIdManager
    api_versions: ApiVersionManager
    transaction_coordinator: TransactionCoordinatorService
    credentials: CredentialCache  # SCRAM credentials the SASL listeners check
    quota_store: QuotaStore  # client quota configs: stored, published to watchers
    client_quotas: ClientQuotas  # enforcement: usage against quota_store's quotas
    cluster: ClusterServices | None = None  # None: the single-node embedded broker
    acls: AclService | None = None  # None: no authorizer configured (everything allowed)
    # every metric under its Kafka MBean name; components record into what they own
    metrics: KafkaMetricsRegistry = field(default_factory=KafkaMetricsRegistry)
