"""The admin client (Java ``org.apache.kafka.clients.admin.KafkaAdminClient``).

    from millrace.client.admin import KafkaAdminClient, NewTopic

    with KafkaAdminClient(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)]).all()
        print(admin.describe_topics(["events"]).all())

Every method is synchronous: it sends its requests over the shared ``NetworkClient`` and
returns when the answers are in, or raises ``KafkaTimeoutError`` once its deadline passes
(``timeout_ms``, default ``default.api.timeout.ms``).  Operations on several items answer
an ``AdminResult`` (item -> completed future; see ``results``); the others return their
value or raise.  Errors are the Kafka exceptions of ``millrace.common.errors``.

Threading: a client may be shared between threads; calls run one at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from millrace.client.admin import (
    _acls,
    _client_quotas,
    _configs,
    _group_offsets,
    _groups,
    _leaders,
    _log_dirs,
    _reassignments,
    _scram,
    _topics,
    _transactions,
)
from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.client_quota import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
)
from millrace.client.admin.config import AdminClientConfig
from millrace.client.admin.offset_reset import OffsetResetSpec
from millrace.client.admin.results import AdminResult
from millrace.client.admin.types import (
    AbortTransactionSpec,
    AlterConfigOp,
    ClusterDescription,
    Config,
    ConfigResource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupOffsets,
    ElectionType,
    FilterResult,
    GroupOffset,
    ListOffsetsResultInfo,
    LogDirDescription,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetSpec,
    PartitionProducerState,
    PartitionReassignment,
    TopicDescription,
    TopicListing,
    TopicPartition,
    TransactionDescription,
    TransactionListing,
    TransactionState,
    UserScramCredentialAlteration,
    UserScramCredentialsDescription,
)
from millrace.client.errors import IllegalStateError
from millrace.common.time import SYSTEM_TIME, Time
from millrace.security.acl import AclBinding, AclBindingFilter

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class KafkaAdminClient:
    """``KafkaAdminClient(bootstrap_servers="host:9092", **configs)`` or
    ``KafkaAdminClient({"bootstrap.servers": ..., ...})``; configs use Kafka's dotted names
    (``request_timeout_ms=...`` is accepted for ``request.timeout.ms``)."""

    def __init__(self, configs: Mapping[str, Any] | None = None, *,
                 bootstrap_servers: str | list[str] | None = None, time: Time = SYSTEM_TIME,
                 **kwargs: Any) -> None:
        props: dict[str, Any] = dict(configs or {})
        props.update({k.replace("_", "."): v for k, v in kwargs.items()})
        if bootstrap_servers is not None:
            props["bootstrap.servers"] = bootstrap_servers
        self.config = AdminClientConfig(props)
        self._default_timeout_ms: int = self.config["default.api.timeout.ms"]
        self._net = AdminNetwork(self.config.values, time=time)
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._net.close()

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _deadline(self, timeout_ms: int | None) -> int:
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        return self._net.now() + (self._default_timeout_ms if timeout_ms is None
                                  else timeout_ms)

    # ------------------------------------------------------------------ cluster
    def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        with self._lock:
            return _topics.describe_cluster(self._net, self._deadline(timeout_ms))

    # ------------------------------------------------------------------ topics
    def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False,
                      timeout_ms: int | None = None) -> AdminResult[str, None]:
        with self._lock:
            return _topics.create_topics(self._net, new_topics, validate_only,
                                         self._deadline(timeout_ms))

    def delete_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                      ) -> AdminResult[str, None]:
        with self._lock:
            return _topics.delete_topics(self._net, topics, self._deadline(timeout_ms))

    def list_topics(self, *, list_internal: bool = False, timeout_ms: int | None = None
                    ) -> list[TopicListing]:
        """Every topic, sorted by name; internal ones (``__consumer_offsets``) on request."""
        with self._lock:
            return _topics.list_topics(self._net, list_internal, self._deadline(timeout_ms))

    def describe_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                        ) -> AdminResult[str, TopicDescription]:
        with self._lock:
            return _topics.describe_topics(self._net, topics, self._deadline(timeout_ms))

    def create_partitions(self, new_partitions: Mapping[str, NewPartitions], *,
                          validate_only: bool = False, timeout_ms: int | None = None
                          ) -> AdminResult[str, None]:
        with self._lock:
            return _topics.create_partitions(self._net, new_partitions, validate_only,
                                             self._deadline(timeout_ms))

    # ------------------------------------------------------------------ leaders
    def elect_leaders(self, election_type: ElectionType,
                      partitions: Iterable[TopicPartition] | None = None, *,
                      timeout_ms: int | None = None) -> AdminResult[TopicPartition, None]:
        """Ask the controller to elect leaders (ElectLeaders; Java ``electLeaders``):
        PREFERRED gives leadership back to each partition's first assigned replica,
        UNCLEAN gives a leaderless partition any live replica.  ``partitions=None`` means
        every partition.  Per partition: None once elected, or Kafka's exception
        (``ElectionNotNeededError`` when the leader already was the one wanted)."""
        with self._lock:
            return _leaders.elect_leaders(self._net, ElectionType(election_type), partitions,
                                          self._deadline(timeout_ms))

    # ------------------------------------------------------------------ reassignments
    def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
            allow_replication_factor_change: bool = True, timeout_ms: int | None = None
    ) -> AdminResult[TopicPartition, None]:
        """Move partitions to new replica sets (AlterPartitionReassignments, KIP-455; Java
        ``alterPartitionReassignments``): per partition the target replicas, the preferred
        leader first, or None to cancel a reassignment in progress.  Per partition: None
        once the controller accepted it (the move itself runs on in the cluster: follow
        it with ``list_partition_reassignments``), or Kafka's exception."""
        with self._lock:
            return _reassignments.alter_partition_reassignments(
                self._net, reassignments, allow_replication_factor_change,
                self._deadline(timeout_ms))

    def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            timeout_ms: int | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (ListPartitionReassignments; Java
        ``listPartitionReassignments``) among ``partitions``, or all of them: replicas,
        adding and removing replicas per partition."""
        with self._lock:
            return _reassignments.list_partition_reassignments(self._net, partitions,
                                                               self._deadline(timeout_ms))

    # ------------------------------------------------------------------ records and offsets
    def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                     isolation_level: int = READ_UNCOMMITTED, timeout_ms: int | None = None
                     ) -> AdminResult[TopicPartition, ListOffsetsResultInfo]:
        with self._lock:
            return _topics.list_offsets(self._net, specs, isolation_level,
                                        self._deadline(timeout_ms))

    def delete_records(self, before_offsets: Mapping[TopicPartition, int], *,
                       timeout_ms: int | None = None) -> AdminResult[TopicPartition, int]:
        """Delete every record below the given offset (-1: the high watermark); each
        partition's value is its new low watermark."""
        with self._lock:
            return _topics.delete_records(self._net, before_offsets,
                                          self._deadline(timeout_ms))

    # ------------------------------------------------------------------ log dirs
    def describe_log_dirs(self, brokers: Iterable[int], *, timeout_ms: int | None = None
                          ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs, by path: the dir's error (None: online), its volume's
        total and usable bytes (None from brokers before DescribeLogDirs v4), and a
        ``ReplicaInfo`` (size, offset lag, is future) per partition it holds
        (DescribeLogDirs, one request per broker; Java ``describeLogDirs``).  Raises
        ``ClusterAuthorizationFailedError`` without Describe on the Cluster and
        ``BrokerNotAvailableError`` for an id not in the cluster."""
        with self._lock:
            return _log_dirs.describe_log_dirs(self._net, brokers, self._deadline(timeout_ms))

    # ------------------------------------------------------------------ configs
    def describe_configs(self, resources: Iterable[ConfigResource], *,
                         include_synonyms: bool = False, include_documentation: bool = False,
                         timeout_ms: int | None = None) -> AdminResult[ConfigResource, Config]:
        with self._lock:
            return _configs.describe_configs(self._net, resources, include_synonyms,
                                             include_documentation, self._deadline(timeout_ms))

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
                                  *, validate_only: bool = False, timeout_ms: int | None = None
                                  ) -> AdminResult[ConfigResource, None]:
        with self._lock:
            return _configs.incremental_alter_configs(self._net, changes, validate_only,
                                                      self._deadline(timeout_ms))

    # ------------------------------------------------------------------ groups
    def list_groups(self, *, states: Iterable[str] | None = None,
                    timeout_ms: int | None = None) -> list[ConsumerGroupListing]:
        """Groups of every broker, sorted by id; ``states`` filters (e.g. ``["Empty"]``)."""
        with self._lock:
            return _groups.list_groups(self._net, states, self._deadline(timeout_ms))

    def describe_groups(self, group_ids: Iterable[str], *, timeout_ms: int | None = None
                        ) -> AdminResult[str, ConsumerGroupDescription]:
        """Members and their decoded assignments; an unknown group is state Dead."""
        with self._lock:
            return _groups.describe_groups(self._net, group_ids, self._deadline(timeout_ms))

    def delete_groups(self, group_ids: Iterable[str], *, timeout_ms: int | None = None
                      ) -> AdminResult[str, None]:
        with self._lock:
            return _groups.delete_groups(self._net, group_ids, self._deadline(timeout_ms))

    def list_group_offsets(self, group_id: str,
                           partitions: Iterable[TopicPartition] | None = None, *,
                           include_lag: bool = True, require_stable: bool = False,
                           timeout_ms: int | None = None) -> dict[TopicPartition, GroupOffset]:
        """Committed offsets (all, or of ``partitions``) with log end offsets and lag."""
        with self._lock:
            return _group_offsets.list_group_offsets(self._net, group_id, partitions,
                                                     include_lag, require_stable,
                                                     self._deadline(timeout_ms))

    def describe_group_offsets(self, group_id: str, *, timeout_ms: int | None = None
                               ) -> ConsumerGroupOffsets:
        """The ``kafka-consumer-groups --describe`` view: per partition the committed and
        log end offsets, the lag and the member that owns it."""
        with self._lock:
            return _group_offsets.describe_group_offsets(self._net, group_id,
                                                         self._deadline(timeout_ms))

    def alter_group_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                            timeout_ms: int | None = None) -> AdminResult[TopicPartition, None]:
        """Commit offsets for a group that has no members (else UnknownMemberIdError)."""
        wanted = {tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                  for tp, o in offsets.items()}
        with self._lock:
            return _groups.commit_offsets(self._net, group_id, wanted,
                                          self._deadline(timeout_ms))

    def reset_group_offsets(self, group_id: str, spec: OffsetResetSpec, *,
                            topics: Iterable[str] | None = None,
                            partitions: Iterable[TopicPartition] | None = None,
                            execute: bool = True, timeout_ms: int | None = None
                            ) -> dict[TopicPartition, int]:
        """Move the group's offsets of ``topics`` / ``partitions`` (neither: every partition
        it has an offset for) as ``spec`` says; returns the new offsets.  ``execute=False``
        is a dry run.  A group with members raises ``GroupNotEmptyError``."""
        with self._lock:
            return _group_offsets.reset_group_offsets(self._net, group_id, spec, topics,
                                                      partitions, execute,
                                                      self._deadline(timeout_ms))

    # ------------------------------------------------------------------ transactions
    def list_transactions(self, *, states: Iterable[TransactionState | str] | None = None,
                          producer_ids: Iterable[int] | None = None,
                          duration_ms: int | None = None,
                          transactional_id_pattern: str | None = None,
                          timeout_ms: int | None = None) -> list[TransactionListing]:
        """The transactions of every broker (ListTransactions; Java ``listTransactions``),
        sorted by transactional id, each with the broker that coordinates it.  Filters:
        ``states`` (e.g. ``["Ongoing"]``), ``producer_ids``, ``duration_ms`` (only those
        open longer, KIP-994) and a regular expression the whole id must match."""
        with self._lock:
            return _transactions.list_transactions(
                self._net, states, producer_ids, duration_ms, transactional_id_pattern,
                self._deadline(timeout_ms))

    def describe_transactions(self, transactional_ids: Iterable[str], *,
                              timeout_ms: int | None = None
                              ) -> AdminResult[str, TransactionDescription]:
        """Each id's state as its coordinator holds it (DescribeTransactions; Java
        ``describeTransactions``); an unknown id fails with
        ``TransactionalIdNotFoundError``."""
        with self._lock:
            return _transactions.describe_transactions(self._net, transactional_ids,
                                                       self._deadline(timeout_ms))

    def describe_producers(self, partitions: Iterable[TopicPartition], *,
                           broker_id: int | None = None, timeout_ms: int | None = None
                           ) -> AdminResult[TopicPartition, PartitionProducerState]:
        """The active producers of each partition, asked of its leader or of
        ``broker_id`` (DescribeProducers; Java ``describeProducers``)."""
        with self._lock:
            return _transactions.describe_producers(self._net, partitions, broker_id,
                                                    self._deadline(timeout_ms))

    def abort_transaction(self, spec: AbortTransactionSpec, *,
                          timeout_ms: int | None = None) -> None:
        """Write an ABORT marker for the spec's open transaction on its partition
        (WriteTxnMarkers to the leader; Java ``abortTransaction``): for hanging
        transactions only, those their coordinator no longer ends itself."""
        with self._lock:
            _transactions.abort_transaction(self._net, spec, self._deadline(timeout_ms))


    # ------------------------------------------------------------------ SCRAM credentials
    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                        timeout_ms: int | None = None
                                        ) -> AdminResult[str, UserScramCredentialsDescription]:
        """The SCRAM credentials (mechanism and iterations, never salt or keys) of
        ``users``, or of every user holding one (DescribeUserScramCredentials, KIP-554;
        Java ``describeUserScramCredentials``).  A user without credentials fails with
        ``ResourceNotFoundError``."""
        with self._lock:
            return _scram.describe_user_scram_credentials(self._net, users,
                                                          self._deadline(timeout_ms))

    def alter_user_scram_credentials(self, alterations: Iterable[UserScramCredentialAlteration],
                                     *, timeout_ms: int | None = None
                                     ) -> AdminResult[str, None]:
        """Create, replace or delete SCRAM credentials (AlterUserScramCredentials,
        KIP-554; Java ``alterUserScramCredentials``): ``UserScramCredentialUpsertion``
        (the salted password is computed here) and ``UserScramCredentialDeletion``; one
        result per user, the user's alterations applied all or none."""
        with self._lock:
            return _scram.alter_user_scram_credentials(self._net, alterations,
                                                       self._deadline(timeout_ms))

    # ------------------------------------------------------------------ ACLs
    def create_acls(self, bindings: Iterable[AclBinding], *, timeout_ms: int | None = None
                    ) -> AdminResult[AclBinding, None]:
        """Create ACLs (CreateAcls; Java ``createAcls``): one result per binding.  A broker
        without an authorizer fails each with ``SecurityDisabledError``."""
        with self._lock:
            return _acls.create_acls(self._net, bindings, self._deadline(timeout_ms))

    def describe_acls(self, flt: AclBindingFilter = AclBindingFilter.ANY, *,
                      timeout_ms: int | None = None) -> list[AclBinding]:
        """The ACLs matching ``flt`` (DescribeAcls; Java ``describeAcls``); raises the
        broker's error (``SecurityDisabledError`` without an authorizer)."""
        with self._lock:
            return _acls.describe_acls(self._net, flt, self._deadline(timeout_ms))

    def delete_acls(self, filters: Iterable[AclBindingFilter], *,
                    timeout_ms: int | None = None
                    ) -> AdminResult[AclBindingFilter, list[FilterResult]]:
        """Delete the ACLs matching each filter (DeleteAcls; Java ``deleteAcls``): per
        filter, the ACLs it matched, each with the error that kept it (None: deleted)."""
        with self._lock:
            return _acls.delete_acls(self._net, filters, self._deadline(timeout_ms))

    # ------------------------------------------------------------------ client quotas
    def describe_client_quotas(self, flt: ClientQuotaFilter | None = None, *,
                               timeout_ms: int | None = None
                               ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas of the entities ``flt`` matches (every entity by default):
        entity -> key -> value (DescribeClientQuotas, KIP-546; Java
        ``describeClientQuotas``).  Raises the broker's error."""
        with self._lock:
            return _client_quotas.describe_client_quotas(
                self._net, flt or ClientQuotaFilter.all(), self._deadline(timeout_ms))

    def alter_client_quotas(self, entries: Iterable[ClientQuotaAlteration], *,
                            validate_only: bool = False, timeout_ms: int | None = None
                            ) -> AdminResult[ClientQuotaEntity, None]:
        """Set or remove quotas (AlterClientQuotas, KIP-546; Java ``alterClientQuotas``):
        one result per entity; an op whose value is None removes its key."""
        with self._lock:
            return _client_quotas.alter_client_quotas(self._net, entries, validate_only,
                                                      self._deadline(timeout_ms))


AdminClient = KafkaAdminClient
