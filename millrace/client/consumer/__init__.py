"""The Kafka consumer (Java ``org.apache.kafka.clients.consumer``).

``KafkaConsumer`` reads with the pull model: ``poll`` fetches from the partition leaders,
the group coordinator spreads partitions over the members of a group (``group.id``) and
keeps their committed offsets.  The machinery -- ``Fetcher``, ``SubscriptionState``,
``ConsumerCoordinator``, the heartbeat thread -- lives in ``_internals``; the partition
assignors in ``assignors``.
"""

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.assignors import (
    ConsumerGroupMetadata,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.consumer.consumer_record import (
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
)
from millrace.client.consumer.errors import (
    CommitFailedError,
    InvalidOffsetError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RecordDeserializationError,
    WakeupError,
)
from millrace.client.consumer.interceptor import ConsumerInterceptor
from millrace.client.consumer.kafka_consumer import KafkaConsumer
from millrace.client.consumer.listener import (
    ConsumerRebalanceListener,
    FunctionRebalanceListener,
)

__all__ = [
    "CommitFailedError", "ConsumerConfig", "ConsumerGroupMetadata", "ConsumerInterceptor",
    "ConsumerPartitionAssignor", "ConsumerRebalanceListener", "ConsumerRecord",
    "ConsumerRecords", "CooperativeStickyAssignor", "FunctionRebalanceListener",
    "InvalidOffsetError", "KafkaConsumer", "NoOffsetForPartitionError", "OffsetAndMetadata",
    "OffsetAndTimestamp", "OffsetOutOfRangeError", "RangeAssignor",
    "RecordDeserializationError", "RoundRobinAssignor", "StickyAssignor", "TopicPartition",
    "WakeupError",
]
