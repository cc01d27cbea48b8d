"""ZooKeeper mode: Kafka's coordination znodes over a kazoo session.

- ``zk_data``: every path and JSON format of Kafka's layout, as pure functions (Scala
  ``kafka.zk.ZkData``), unit-tested against Kafka's bytes;
- ``zookeeper_client.ZooKeeperClient``: one session (chroot, fenced multi-ops, watches as
  plain callbacks on kazoo's threads);
- ``kafka_zk_client.KafkaZkClient``: the reads and writes the broker and the controller
  make (registration and broker epochs, controller election and its epoch fence, topics,
  partition states with their versions, notifications, configs, producer-id blocks);
- ``errors``: ``ControllerMovedError`` and the ZooKeeper outcomes callers act on.

Threading: every call blocks its caller until ZooKeeper answers; watch callbacks arrive on
kazoo's threads and are to be handed to the broker's event loop with
``loop.call_soon_threadsafe`` (never block or call the client from inside one).
"""

from millrace.broker.zk.errors import (
    ControllerMovedError,
    ZkBadVersionError,
    ZkError,
    ZkNodeExistsError,
    ZkNoNodeError,
)
from millrace.broker.zk.kafka_zk_client import (
    ControllerElection,
    KafkaZkClient,
    UpdateLeaderAndIsrResult,
)
from millrace.broker.zk.zk_data import (
    BrokerAndEpoch,
    BrokerInfo,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    TopicIdReplicaAssignment,
)
from millrace.broker.zk.zookeeper_client import ZkWatch, ZooKeeperClient

__all__ = [
    "BrokerAndEpoch",
    "BrokerInfo",
    "ControllerElection",
    "ControllerMovedError",
    "EndPoint",
    "KafkaZkClient",
    "LeaderIsrAndControllerEpoch",
    "ProducerIdsBlock",
    "ReplicaAssignment",
    "TopicIdReplicaAssignment",
    "UpdateLeaderAndIsrResult",
    "ZkBadVersionError",
    "ZkError",
    "ZkNoNodeError",
    "ZkNodeExistsError",
    "ZkWatch",
    "ZooKeeperClient",
]
