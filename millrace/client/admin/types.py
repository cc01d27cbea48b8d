"""Value types of the admin API (Java ``org.apache.kafka.clients.admin``).

Requests: ``NewTopic``, ``NewPartitions``, ``ConfigResource`` + ``AlterConfigOp``,
``OffsetSpec``, ``OffsetAndMetadata``.  Answers: ``TopicListing``, ``TopicDescription``
(``TopicPartitionInfo`` per partition), ``Config`` of ``ConfigEntry``s,
``ConsumerGroupListing``, ``ConsumerGroupDescription`` (``MemberDescription`` with a
decoded ``MemberAssignment``), ``ListOffsetsResultInfo``, ``GroupOffset`` (a committed
offset with the log end offset and lag), ``PartitionAssignmentState`` (one row of
``kafka-consumer-groups --describe``) and ``ClusterDescription``; ``ElectionType`` for
``elect_leaders``.  Transactions: ``TransactionListing``, ``TransactionDescription``
(``TransactionState``), ``PartitionProducerState`` of ``ProducerState``s and the
``AbortTransactionSpec`` request.  SCRAM credentials (KIP-554): ``ScramMechanism``,
``ScramCredentialInfo``, ``UserScramCredentialsDescription`` and the alterations
``UserScramCredentialUpsertion`` / ``UserScramCredentialDeletion``.  ACLs (the bindings
and filters themselves are ``millrace.security.acl``'s): ``FilterResult``, one ACL a
``delete_acls`` filter matched.  Log dirs: ``LogDirDescription`` of ``ReplicaInfo``s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from millrace.client.cluster import Node, TopicPartition
from millrace.common.errors import KafkaError
from millrace.security.acl import AclBinding

__all__ = [
    "AbortTransactionSpec", "AlterConfigOp", "AlterConfigOpType", "ClusterDescription",
    "Config", "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource",
    "ConsumerGroupDescription", "ConsumerGroupListing", "ConsumerGroupOffsets",
    "ConsumerGroupState", "ElectionType", "FilterResult", "GroupOffset", "ListOffsetsResultInfo",
    "LogDirDescription", "MemberAssignment", "MemberDescription", "NewPartitions", "NewTopic",
    "Node",
    "OffsetAndMetadata", "OffsetSpec", "PartitionAssignmentState",
    "PartitionProducerState", "ProducerState", "ReplicaInfo", "ScramCredentialInfo",
    "ScramMechanism",
    "TopicDescription", "TopicListing", "TopicPartition", "TopicPartitionInfo",
    "TransactionDescription", "TransactionListing", "TransactionState",
    "UserScramCredentialAlteration", "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion", "UserScramCredentialsDescription",
]


# ---------------------------------------------------------------------- topics
@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 partitions / replication factor = the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, list[int]] | None = None


@dataclass(frozen=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions."""

    total_count: int
    new_assignments: list[list[int]] | None = None


@dataclass(frozen=True)
class TopicListing:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool


@dataclass(frozen=True)
class TopicPartitionInfo:
    partition: int
    leader: Node | None
    replicas: list[Node]
    isr: list[Node]
    leader_epoch: int = -1


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: list[TopicPartitionInfo]


# ---------------------------------------------------------------------- configs
class ConfigResourceType(IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


@dataclass(frozen=True)
class ConfigResource:
    """A topic (by name) or a broker (by node id as a string); hashable."""

    type: ConfigResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.type.name.lower()} {self.name}"


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, code: int) -> ConfigSource:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @property
    def is_dynamic(self) -> bool:
        return self in (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
                        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_sensitive: bool = False
    is_read_only: bool = False
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


class Config(Mapping[str, ConfigEntry]):
    """The described configuration of one resource: name -> ``ConfigEntry``."""

    def __init__(self, entries: list[ConfigEntry]) -> None:
        self._entries = {e.name: e for e in entries}

    def __getitem__(self, name: str) -> ConfigEntry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[ConfigEntry]:
        return list(self._entries.values())

    def __repr__(self) -> str:
        return f"Config({list(self._entries.values())!r})"


class AlterConfigOpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class AlterConfigOp:
    """One incremental change: SET name=value, DELETE name, APPEND/SUBTRACT list items."""

    name: str
    value: str | None = None
    op_type: AlterConfigOpType = AlterConfigOpType.SET


# ---------------------------------------------------------------------- leaders
class ElectionType(IntEnum):
    """Java ``org.apache.kafka.common.ElectionType``, with the codes ElectLeaders sends.

    PREFERRED: give leadership back to the first assigned replica, if it is alive and in
    sync.  UNCLEAN: a partition without a live in-sync replica takes any live replica as
    leader -- it may lose acknowledged records (needs ElectLeaders v1, Kafka 2.4)."""

    PREFERRED = 0
    UNCLEAN = 1


# ---------------------------------------------------------------------- reassignments
@dataclass(frozen=True)
class PartitionReassignment:
    """Java ``PartitionReassignment``: an ongoing reassignment (KIP-455) -- the current
    replica set (the target replicas first, then the original ones), the replicas being
    added and those being removed once the added ones are in sync."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


# ---------------------------------------------------------------------- groups
class ConsumerGroupState(StrEnum):
    UNKNOWN = "Unknown"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"

    @classmethod
    def parse(cls, text: str) -> ConsumerGroupState:
        for state in cls:
            if state.value.lower() == text.lower():
                return state
        return cls.UNKNOWN

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool
    state: ConsumerGroupState
    protocol_type: str = ""
    type: str = "classic"


@dataclass(frozen=True)
class MemberAssignment:
    topic_partitions: frozenset[TopicPartition] = frozenset()
    user_data: bytes | None = None


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: MemberAssignment


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: list[MemberDescription]
    partition_assignor: str
    state: ConsumerGroupState
    coordinator: Node | None
    protocol_type: str = ""


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


@dataclass(frozen=True)
class GroupOffset:
    """A committed offset with the partition's log end offset and the lag between them."""

    offset: int
    metadata: str
    leader_epoch: int | None
    log_end_offset: int | None = None

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None or self.offset < 0:
            return None
        return max(self.log_end_offset - self.offset, 0)


@dataclass(frozen=True)
class PartitionAssignmentState:
    """One row of ``kafka-consumer-groups --describe``: a partition a member owns or the
    group has an offset for.  None = unknown / no committed offset / no owner."""

    group: str
    topic: str
    partition: int
    offset: int | None
    log_end_offset: int | None
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.offset, 0)


# ---------------------------------------------------------------------- offsets
class OffsetSpec:
    """What ListOffsets asks for: the earliest, latest, max-timestamp or by-time offset."""

    EARLIEST_TIMESTAMP = -2
    LATEST_TIMESTAMP = -1
    MAX_TIMESTAMP = -3

    __slots__ = ("timestamp",)

    def __init__(self, timestamp: int) -> None:
        self.timestamp = timestamp

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(cls.EARLIEST_TIMESTAMP)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(cls.LATEST_TIMESTAMP)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(cls.MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if timestamp_ms < 0:
            raise ValueError(f"a timestamp must not be negative, got {timestamp_ms}")
        return cls(timestamp_ms)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetSpec) and other.timestamp == self.timestamp

    def __hash__(self) -> int:
        return hash(self.timestamp)

    def __repr__(self) -> str:
        names = {-2: "earliest", -1: "latest", -3: "max_timestamp"}
        return f"OffsetSpec.{names.get(self.timestamp, f'for_timestamp({self.timestamp})')}"


@dataclass(frozen=True)
class ListOffsetsResultInfo:
    """offset -1: no record at or after the timestamp asked for."""

    offset: int
    timestamp: int
    leader_epoch: int | None


# ---------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller: Node | None
    nodes: list[Node]


@dataclass(frozen=True)
class ConsumerGroupOffsets:
    """``kafka-consumer-groups --describe``: the group and one row per partition."""

    group: ConsumerGroupDescription
    partitions: list[PartitionAssignmentState]


# ---------------------------------------------------------------------- transactions
class TransactionState(StrEnum):
    """A transaction's state as its coordinator reports it (Java ``TransactionState``)."""

    ONGOING = "Ongoing"
    PREPARE_ABORT = "PrepareAbort"
    PREPARE_COMMIT = "PrepareCommit"
    COMPLETE_ABORT = "CompleteAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    EMPTY = "Empty"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, text: str) -> TransactionState:
        for state in cls:
            if state.value == text:
                return state
        return cls.UNKNOWN

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TransactionListing:
    """One transaction of ``list_transactions`` (Java ``TransactionListing``), with the id
    of the broker that listed it: its coordinator (Java keys ``allByBrokerId`` by it)."""

    transactional_id: str
    producer_id: int
    state: TransactionState
    coordinator_id: int = -1


@dataclass(frozen=True)
class TransactionDescription:
    """Java ``TransactionDescription``: ``transaction_start_time_ms`` is None when no
    transaction is open; ``topic_partitions`` those of the open (or ending) transaction."""

    coordinator_id: int
    state: TransactionState
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    """An active producer of a partition (Java ``ProducerState``); the Optional fields of
    Java are None here when the broker answered -1."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


@dataclass(frozen=True)
class PartitionProducerState:
    """Java ``DescribeProducersResult.PartitionProducerState``."""

    active_producers: list[ProducerState]


@dataclass(frozen=True)
class AbortTransactionSpec:
    """What ``abort_transaction`` needs to write an ABORT marker on one partition (Java
    ``AbortTransactionSpec``): the producer id and epoch of the open transaction and the
    coordinator epoch the leader last saw for it (``describe_producers`` has all three)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


# ---------------------------------------------------------------------- SCRAM credentials
class ScramMechanism(IntEnum):
    """Java admin ``ScramMechanism``: a SCRAM mechanism by the type byte KIP-554's APIs
    carry (UNKNOWN: a type this client does not know)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """``SCRAM-SHA-256``, ``SCRAM-SHA-512`` (``UNKNOWN`` for UNKNOWN)."""
        return self.name.replace("_", "-")

    @classmethod
    def from_mechanism_name(cls, name: str) -> ScramMechanism:
        return next((m for m in cls if m and m.mechanism_name == name.upper()), cls.UNKNOWN)

    @classmethod
    def from_type(cls, type_id: int) -> ScramMechanism:
        return cls(type_id) if type_id in cls._value2member_map_ else cls.UNKNOWN


@dataclass(frozen=True)
class ScramCredentialInfo:
    """Java ``ScramCredentialInfo``: a credential's mechanism and iteration count (all a
    describe ever reveals)."""

    mechanism: ScramMechanism
    iterations: int = 4096


@dataclass(frozen=True)
class UserScramCredentialsDescription:
    """Java ``UserScramCredentialsDescription``: a user's SCRAM credentials."""

    user: str
    credential_infos: list[ScramCredentialInfo]


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Java ``UserScramCredentialUpsertion``: set the user's credential of one mechanism.
    The salted password is computed here, in the client (PBKDF2 of ``password`` with
    ``salt``, a random one by default); the password never leaves the process."""

    user: str
    credential_info: ScramCredentialInfo
    password: str | bytes = field(repr=False)
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Java ``UserScramCredentialDeletion``: remove the user's credential of a mechanism."""

    user: str
    mechanism: ScramMechanism


UserScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


# ---------------------------------------------------------------------- ACLs
@dataclass(frozen=True)
class FilterResult:
    """Java ``DeleteAclsResult.FilterResult``: an ACL a ``delete_acls`` filter matched and
    the error that kept the broker from deleting it (None: deleted)."""

    binding: AclBinding
    error: KafkaError | None = None


# ---------------------------------------------------------------------- log dirs
@dataclass(frozen=True)
class ReplicaInfo:
    """Java ``ReplicaInfo``: one replica's log in a log dir -- its segments' bytes, how
    far its log end offset is behind the high watermark (a future log: behind the
    current log's end), and whether it is a future log (AlterReplicaLogDirs)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """Java ``LogDirDescription``: one log dir of a broker.  ``error`` is the dir's
    (KafkaStorageError: offline; then no replicas); ``total_bytes`` / ``usable_bytes``
    of its volume are None when the broker did not say (DescribeLogDirs before v4)."""

    error: KafkaError | None
    replica_infos: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None = None
    usable_bytes: int | None = None
