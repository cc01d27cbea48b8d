"""The Kafka admin client (Java ``org.apache.kafka.clients.admin``).

    from millrace.client.admin import KafkaAdminClient, NewTopic

    with KafkaAdminClient(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)]).all()
"""

from millrace.client.admin.client_quota import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
)
from millrace.client.admin.config import ADMIN_CONFIG, AdminClientConfig
from millrace.client.admin.kafka_admin_client import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AdminClient,
    KafkaAdminClient,
)
from millrace.client.admin.offset_reset import OffsetResetSpec, ResetKind
from millrace.client.admin.results import AdminResult, IllegalArgumentError
from millrace.client.admin.types import (
    AbortTransactionSpec,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    Config,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupOffsets,
    ConsumerGroupState,
    ElectionType,
    FilterResult,
    GroupOffset,
    ListOffsetsResultInfo,
    LogDirDescription,
    MemberAssignment,
    MemberDescription,
    NewPartitions,
    NewTopic,
    Node,
    OffsetAndMetadata,
    OffsetSpec,
    PartitionAssignmentState,
    PartitionProducerState,
    PartitionReassignment,
    ProducerState,
    ReplicaInfo,
    ScramCredentialInfo,
    ScramMechanism,
    TopicDescription,
    TopicListing,
    TopicPartition,
    TopicPartitionInfo,
    TransactionDescription,
    TransactionListing,
    TransactionState,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from millrace.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

__all__ = [
    "ADMIN_CONFIG", "READ_COMMITTED", "READ_UNCOMMITTED", "AbortTransactionSpec", "AdminClient", "AdminClientConfig", "AdminResult",
    "AlterConfigOp", "AlterConfigOpType", "Assignment", "ClientQuotaAlteration",
    "ClientQuotaEntity", "ClientQuotaFilter", "ClientQuotaFilterComponent", "ClientQuotaOp",
    "ClusterDescription", "Config",
    "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource",
    "ConsumerGroupDescription", "ConsumerGroupListing", "ConsumerGroupOffsets",
    "ConsumerGroupState", "ElectionType", "FilterResult", "GroupOffset",
    "IllegalArgumentError",
    "KafkaAdminClient", "ListOffsetsResultInfo", "LogDirDescription", "MemberAssignment",
    "MemberDescription",
    "NewPartitions", "NewTopic", "Node", "OffsetAndMetadata", "OffsetResetSpec", "OffsetSpec",
    "PartitionAssignmentState", "PartitionProducerState", "PartitionReassignment",
    "ProducerState", "ReplicaInfo", "ResetKind", "ScramCredentialInfo", "ScramMechanism",
    "Subscription",
    "TopicDescription", "TopicListing", "TopicPartition", "TopicPartitionInfo",
    "TransactionDescription", "TransactionListing", "TransactionState",
    "UserScramCredentialAlteration", "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion", "UserScramCredentialsDescription", "decode_assignment",
    "decode_subscription", "encode_assignment", "encode_subscription",
]
