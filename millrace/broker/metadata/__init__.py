"""Cluster metadata: the ``ClusterMetadata`` interface and its single-node store.

``cluster_metadata`` declares what the broker reads and writes (topics with their replica
assignment, partition leader / leader epoch / ISR, topic configs, broker registrations,
producer-id blocks, cluster id); ``local_store`` implements it for the embedded single
broker.  A ZooKeeper-backed store implements the same interface for a cluster.
"""

from millrace.broker.metadata.cluster_metadata import (
    INTERNAL_TOPICS,
    SECURITY_PROTOCOL_IDS,
    SECURITY_PROTOCOL_NAMES,
    BrokerRegistration,
    ClusterMetadata,
    EndPoint,
    PartitionState,
    TopicInfo,
    validate_topic_name,
)
from millrace.broker.metadata.local_store import LocalMetadataStore

__all__ = [
    "INTERNAL_TOPICS",
    "SECURITY_PROTOCOL_IDS",
    "SECURITY_PROTOCOL_NAMES",
    "BrokerRegistration",
    "ClusterMetadata",
    "EndPoint",
    "LocalMetadataStore",
    "PartitionState",
    "TopicInfo",
    "validate_topic_name",
]
