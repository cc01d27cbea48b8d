"""``KafkaZkClient``: Kafka's ZooKeeper layout read and written over one session (Scala
``kafka.zk.KafkaZkClient``).  The JSON lives in ``zk_data``; the session, fenced multi-ops
and watches in ``zookeeper_client``.

The rules it keeps (reference ``cluster.md`` §1):

- **Broker epoch.**  ``register_broker`` creates the ephemeral ``/brokers/ids/<id>`` as
  ``multi(create empty, setData json @0)`` and returns the znode's czxid: every
  registration gets a larger one, so a bounced broker is told apart from its previous
  incarnation (KIP-380).  A node that is already there is ours to replace only if it
  belongs to the session *we* registered with before and our session has changed since
  (the expired-session leftover of ZOOKEEPER-2985, KAFKA-7165); anyone else's is a
  conflict (two brokers with one id).
- **Controller epoch.**  Election reads ``/controller_epoch`` (e, v), then in one multi
  creates the ephemeral ``/controller`` and sets the epoch to e+1 at version v.  Losing the
  race fails the multi as a whole (NODEEXISTS or BADVERSION); the winner keeps the epoch
  znode's new version, ``epoch_zk_version``, and passes it to every write it makes as a
  controller, which ``ZooKeeperClient.multi`` turns into a ``check`` op (KAFKA-6082).
- **Partition epoch.**  A partition ``state`` znode is only ever rewritten conditionally
  on the version read with it; that version is the partition epoch of LeaderAndIsr and
  AlterPartition.  A lost race is ``ZkBadVersionError``: re-read, decide again.
- **ACLs.**  A pattern's ACL znode is rewritten only conditionally on the version read
  with it (or created if absent, or deleted at that version once empty); the caller
  (``acl_store.ZkAclStore``) re-reads and retries when the answer is "moved".
- **Producer-id blocks.**  ``/latest_producer_id_block`` names the last block handed out;
  the next block is written conditionally on the version read, so two brokers racing for
  a block get different ones (the loser re-reads and takes the next).

Thread ownership: any thread; each call blocks until ZooKeeper answers.  Watch callbacks
run on kazoo's threads (see ``zookeeper_client``).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType

from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.zk import zk_data as zd
from millrace.broker.zk.errors import (
    ControllerMovedError,
    ZkBadVersionError,
    ZkError,
    ZkNodeExistsError,
    ZkNoNodeError,
)
from millrace.broker.zk.zk_data import (
    BrokerAndEpoch,
    BrokerInfo,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    TopicIdReplicaAssignment,
    VersionedAcls,
)
from millrace.broker.zk.zookeeper_client import (
    CreateOp,
    DeleteOp,
    SetDataOp,
    ZkOp,
    ZkWatch,
    ZooKeeperClient,
)
from millrace.common.time import SYSTEM_TIME, Time
from millrace.common.topic_partition import TopicPartition
from millrace.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    encode_acls,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerElection:
    """The outcome of one election attempt.  ``controller_id`` is the winner (this broker
    when ``won``; -1 if the winner's node vanished meanwhile); ``controller_epoch`` and
    ``epoch_zk_version`` are the fence the winner writes under."""

    won: bool
    controller_id: int
    controller_epoch: int
    epoch_zk_version: int


@dataclass
class UpdateLeaderAndIsrResult:
    """Kafka's ``UpdateLeaderAndIsrResult``: per partition the written state (its
    ``partition_epoch`` now the new znode version) or the error; BADVERSION ones to retry."""

    finished: dict[TopicPartition, LeaderIsrAndControllerEpoch | ZkError] = field(
        default_factory=dict)
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


def should_recreate_ephemeral(owner_session: int, registered_session: int | None,
                              current_session: int | None) -> bool:
    """A leftover ephemeral is ours to replace only if it belongs to the session we last
    registered with and we are now on another one (KAFKA-7165)."""
    return (registered_session is not None and owner_session == registered_session
            and current_session != registered_session)


class KafkaZkClient:
    def __init__(self, connect: str, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int | None = None, time: Time = SYSTEM_TIME,
                 metrics: KafkaMetricsRegistry | None = None) -> None:
        self.zk = ZooKeeperClient(connect, session_timeout_ms=session_timeout_ms,
                                  connection_timeout_ms=connection_timeout_ms,
                                  metrics=metrics)
        self.time = time
        # the session that created our broker registration (KAFKA-7165)
        self._registered_session_id: int | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> KafkaZkClient:
        self.zk.start()
        return self

    def close(self) -> None:
        self.zk.close()

    def __enter__(self) -> KafkaZkClient:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def session_id(self) -> int | None:
        return self.zk.session_id

    def create_top_level_paths(self) -> None:
        """``ZkData.PersistentZkPaths``: every broker makes sure they exist at start-up."""
        for path in zd.PERSISTENT_ZK_PATHS:
            self.zk.ensure_path(path)

    # ------------------------------------------------------------------ cluster id
    def get_cluster_id(self) -> str | None:
        got = self.zk.get_data(zd.CLUSTER_ID_PATH)
        return zd.decode_cluster_id(got[0]) if got is not None else None

    def create_or_get_cluster_id(self, proposed_cluster_id: str | None = None) -> str:
        """The cluster id: ``proposed`` (or a fresh one) if we are first, else the stored one."""
        proposed = proposed_cluster_id or zd.generate_cluster_id()
        try:
            self.zk.create(zd.CLUSTER_ID_PATH, zd.encode_cluster_id(proposed), make_parents=True)
            return proposed
        except ZkNodeExistsError:
            existing = self.get_cluster_id()
            if existing is None:
                raise ZkError("Failed to get cluster id from ZooKeeper: /cluster/id was "
                              "deleted while reading it") from None
            return existing

    # ------------------------------------------------------------------ brokers
    def register_broker(self, info: BrokerInfo, previous_session_wait_ms: float | None = None
                        ) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral) and return the broker epoch (czxid).
        A registration held by another session is waited out for up to
        ``previous_session_wait_ms`` (default: 1.5 session timeouts and 2 s)."""
        path = zd.broker_id_path(info.id)
        data = zd.encode_broker_info(info, self.time.milliseconds())
        # A broker restarted right after a crash finds its previous incarnation's
        # registration, which ZooKeeper removes only when that session expires: wait for
        # it (a session timeout and a margin) rather than fail; a broker with the same id
        # that is really running keeps its node, and then the error below is right.
        wait_ms = (self.zk.session_timeout_ms * 1.5 + 2000 if previous_session_wait_ms is None
                   else previous_session_wait_ms)
        deadline = time.monotonic() + wait_ms / 1000
        waiting_for = None
        while True:
            try:
                _, stat = self.zk.multi([CreateOp(path, b"", ephemeral=True),
                                         SetDataOp(path, data, 0)])
                epoch = int(stat.czxid)
                break
            except ZkNodeExistsError:
                got = self.zk.get_data(path)
                if got is None:
                    continue  # vanished meanwhile: create again
                owner = int(got[1].ephemeralOwner)
                current = self.session_id
                if should_recreate_ephemeral(owner, self._registered_session_id, current):
                    log.info("%s is left over from our expired session 0x%x; recreating it",
                             path, owner)
                    self.zk.delete(path)
                    continue
                if owner != current and time.monotonic() < deadline:
                    if waiting_for != owner:
                        waiting_for = owner
                        log.warning("%s is held by session 0x%x (a previous run of this broker "
                                    "that crashed?); waiting up to %.0fs for it to expire",
                                    path, owner, wait_ms / 1000)
                    time.sleep(0.25)
                    continue
                if owner != current:
                    raise ZkNodeExistsError(
                        path, f"registered by session 0x{owner:x}, not ours (0x{current or 0:x});"
                        " is another broker running with this broker.id?") from None
                epoch = int(got[1].czxid)
                break
        self._registered_session_id = self.session_id
        log.info("Registered broker %d at %s with addresses %s, czxid (broker epoch): %d",
                 info.id, path, ",".join(ep.connection_string for ep in info.endpoints), epoch)
        return epoch

    def update_broker_info(self, info: BrokerInfo) -> None:
        self.zk.set_data(zd.broker_id_path(info.id),
                         zd.encode_broker_info(info, self.time.milliseconds()))

    def get_sorted_broker_list(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children(zd.BROKER_IDS_PATH))

    def get_broker(self, broker_id: int) -> BrokerAndEpoch | None:
        got = self.zk.get_data(zd.broker_id_path(broker_id))
        if got is None:
            return None
        return BrokerAndEpoch(zd.decode_broker_info(broker_id, got[0]), int(got[1].czxid))

    def get_all_brokers_in_cluster(self) -> list[BrokerAndEpoch]:
        """Every registered broker with its epoch, by id (Kafka's
        ``getAllBrokerAndEpochsInCluster``); one that vanished while reading is left out."""
        brokers = []
        for broker_id in self.get_sorted_broker_list():
            got = self.get_broker(broker_id)
            if got is not None:
                brokers.append(got)
        return brokers

    def generate_broker_sequence_id(self) -> int:
        """A fresh broker id for ``broker.id.generation.enable``: the version of
        ``/brokers/seqid`` after a blind setData, plus ``reserved.broker.max.id``."""
        try:
            stat = self.zk.set_data(zd.BROKER_SEQUENCE_ID_PATH, b"")
        except ZkNoNodeError:
            self.zk.ensure_path(zd.BROKER_SEQUENCE_ID_PATH)
            return self.generate_broker_sequence_id()
        return int(stat.version) + zd.RESERVED_BROKER_MAX_ID

    # ------------------------------------------------------------------ controller
    def get_controller_id(self) -> int | None:
        got = self.zk.get_data(zd.CONTROLLER_PATH)
        return zd.decode_controller(got[0]) if got is not None else None

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, zkVersion)`` of ``/controller_epoch``, None before the first election."""
        got = self.zk.get_data(zd.CONTROLLER_EPOCH_PATH)
        return (zd.decode_controller_epoch(got[0]), int(got[1].version)) if got else None

    def _get_or_create_controller_epoch(self) -> tuple[int, int]:
        current = self.get_controller_epoch()
        if current is not None:
            return current
        try:
            self.zk.create(zd.CONTROLLER_EPOCH_PATH,
                           zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH))
            return zd.INITIAL_CONTROLLER_EPOCH, 0
        except ZkNodeExistsError:
            current = self.get_controller_epoch()
            if current is None:
                raise ZkError("/controller_epoch vanished while creating it") from None
            return current

    def register_controller_and_increment_controller_epoch(
            self, controller_id: int) -> ControllerElection:
        """Try to become the controller: one multi creates ``/controller`` and bumps the
        epoch at the version just read.  A lost race reports the current controller."""
        epoch, version = self._get_or_create_controller_epoch()
        new_epoch = epoch + 1
        try:
            _, stat = self.zk.multi([
                CreateOp(zd.CONTROLLER_PATH,
                         zd.encode_controller(controller_id, self.time.milliseconds()),
                         ephemeral=True),
                SetDataOp(zd.CONTROLLER_EPOCH_PATH, zd.encode_controller_epoch(new_epoch),
                          version)])
            return ControllerElection(True, controller_id, new_epoch, int(stat.version))
        except (ZkNodeExistsError, ZkBadVersionError):
            pass
        # The race is lost, unless a write of ours got through before an error (Kafka's
        # checkControllerAndEpoch): we won only if we are named and the epoch is ours.
        current_id = self.get_controller_id()
        current_epoch, current_version = self.get_controller_epoch() or (epoch, version)
        won = current_id == controller_id and current_epoch == new_epoch
        return ControllerElection(won, current_id if current_id is not None else -1,
                                  current_epoch, current_version)

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Resign: delete ``/controller``, fenced like every controller write."""
        with contextlib.suppress(ZkNoNodeError):
            self.zk.multi([DeleteOp(zd.CONTROLLER_PATH)], expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------ topics
    def get_all_topics_in_cluster(self) -> set[str]:
        return set(self.zk.get_children(zd.TOPICS_PATH))

    def topic_exists(self, topic: str) -> bool:
        return self.zk.exists(zd.topic_path(topic)) is not None

    def get_topic_assignment(self, topic: str) -> TopicIdReplicaAssignment | None:
        got = self.zk.get_data(zd.topic_path(topic))
        return zd.decode_topic_assignment(topic, got[0]) if got is not None else None

    def get_replica_assignment_and_topic_id_for_topics(
            self, topics: Iterable[str]) -> dict[str, TopicIdReplicaAssignment]:
        found = {}
        for topic in topics:
            got = self.get_topic_assignment(topic)
            if got is not None:
                found[topic] = got
        return found

    def create_topic_assignment(self, topic: str, topic_id: uuid.UUID | None,
                                assignment: Mapping[int, Sequence[int]]) -> None:
        """Create ``/brokers/topics/<t>`` (the controller's watch takes it from there)."""
        self.zk.create(zd.topic_path(topic), zd.encode_topic_assignment(
            topic_id, {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}),
            make_parents=True)

    def create_topic(self, topic: str, topic_id: uuid.UUID, assignment: Mapping[int, Sequence[int]],
                     configs: Mapping[str, str]) -> None:
        """``AdminZkClient.createTopicWithAssignment``: config znode first, then the
        assignment; ``ZkNodeExistsError`` if the topic exists."""
        if self.topic_exists(topic):
            raise ZkNodeExistsError(zd.topic_path(topic), f"topic {topic!r} already exists")
        self.set_or_create_entity_configs(zd.TOPIC_CONFIG_TYPE, topic, configs)
        self.create_topic_assignment(topic, topic_id, assignment)

    def set_topic_assignment(self, topic: str, topic_id: uuid.UUID | None,
                             assignment: Mapping[int, ReplicaAssignment],
                             expected_controller_epoch_zk_version: int | None = None,
                             expected_version: int = zd.MATCH_ANY_VERSION) -> int:
        """Rewrite a topic znode (fenced when a controller writes); the new version."""
        ((stat),) = self.zk.multi(
            [SetDataOp(zd.topic_path(topic), zd.encode_topic_assignment(topic_id, assignment),
                       expected_version)], expected_controller_epoch_zk_version)
        return int(stat.version)

    def add_partitions(self, topic: str,
                       new_partitions: Mapping[int, Sequence[int]]) -> TopicIdReplicaAssignment:
        """CreatePartitions: the existing assignment plus ``new_partitions``, written
        conditionally on the version read (a concurrent change fails with BADVERSION)."""
        got = self.zk.get_data(zd.topic_path(topic))
        if got is None:
            raise ZkNoNodeError(zd.topic_path(topic))
        current = zd.decode_topic_assignment(topic, got[0])
        overlap = set(new_partitions) & set(current.assignment)
        if overlap:
            raise ZkError(f"topic {topic!r} already has partitions {sorted(overlap)}")
        merged = {**current.assignment,
                  **{p: ReplicaAssignment(tuple(r)) for p, r in new_partitions.items()}}
        self.set_topic_assignment(topic, current.topic_id, merged,
                                  expected_version=int(got[1].version))
        return TopicIdReplicaAssignment(topic, current.topic_id, merged)

    def delete_topic_znode(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/brokers/topics/<t>`` with its partitions, in one fenced multi."""
        paths = self.zk.subtree_for_delete(zd.topic_path(topic))
        if paths:
            self.zk.multi([DeleteOp(p) for p in paths], expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------ configs
    def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        got = self.zk.get_data(zd.config_entity_path(entity_type, entity_name))
        return zd.decode_entity_config(got[0]) if got is not None else {}

    def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return self.zk.get_children(zd.config_entity_type_path(entity_type))

    def set_or_create_entity_configs(self, entity_type: str, entity_name: str,
                                     configs: Mapping[str, str]) -> None:
        path = zd.config_entity_path(entity_type, entity_name)
        data = zd.encode_entity_config(configs)
        try:
            self.zk.set_data(path, data)
        except ZkNoNodeError:
            try:
                self.zk.create(path, data, make_parents=True)
            except ZkNodeExistsError:
                self.zk.set_data(path, data)

    def create_config_change_notification(self, entity_path: str) -> str:
        """A ``config_change_<n>`` node telling every broker to re-read ``entity_path``
        (``topics/<t>``); returns its sequence number."""
        self.zk.ensure_path(zd.CONFIG_CHANGES_PATH)
        created = self.zk.create(f"{zd.CONFIG_CHANGES_PATH}/{zd.CONFIG_CHANGE_PREFIX}",
                                 zd.encode_config_change_notification(entity_path),
                                 sequential=True)
        return zd.sequence_number_of(created.rsplit("/", 1)[1], zd.CONFIG_CHANGE_PREFIX)

    def change_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """``AdminZkClient.changeTopicConfig``: write the overrides, then notify."""
        self.set_or_create_entity_configs(zd.TOPIC_CONFIG_TYPE, topic, configs)
        self.create_config_change_notification(f"{zd.TOPIC_CONFIG_TYPE}/{topic}")

    def get_config_change_notifications(self) -> list[tuple[str, str | None]]:
        """``(sequence number, entity path)`` of every pending notification, oldest first."""
        found = []
        for name in sorted(self.zk.get_children(zd.CONFIG_CHANGES_PATH)):
            got = self.zk.get_data(f"{zd.CONFIG_CHANGES_PATH}/{name}")
            if got is not None:
                found.append((zd.sequence_number_of(name, zd.CONFIG_CHANGE_PREFIX),
                              zd.decode_config_change_notification(got[0])))
        return found

    def delete_topic_configs(self, topics: Iterable[str],
                             expected_controller_epoch_zk_version: int) -> None:
        ops: list[ZkOp] = [DeleteOp(zd.config_entity_path(zd.TOPIC_CONFIG_TYPE, t))
                           for t in topics
                           if self.zk.exists(zd.config_entity_path(zd.TOPIC_CONFIG_TYPE, t))]
        if ops:
            self.zk.multi(ops, expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------ topic deletion
    def create_delete_topic_path(self, topic: str) -> None:
        """Mark a topic for deletion (``/admin/delete_topics/<t>``); idempotent."""
        with contextlib.suppress(ZkNodeExistsError):
            self.zk.create(zd.delete_topic_path(topic), make_parents=True)

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.zk.exists(zd.delete_topic_path(topic)) is not None

    def get_topic_deletions(self) -> list[str]:
        return sorted(self.zk.get_children(zd.DELETE_TOPICS_PATH))

    def delete_topic_deletions(self, topics: Iterable[str],
                               expected_controller_epoch_zk_version: int) -> None:
        ops: list[ZkOp] = [DeleteOp(zd.delete_topic_path(t)) for t in topics
                           if self.is_topic_marked_for_deletion(t)]
        if ops:
            self.zk.multi(ops, expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------ partition state
    def get_topic_partition_state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """The state with its znode version as ``partition_epoch``; None if absent."""
        got = self.zk.get_data(zd.topic_partition_state_path(tp))
        return zd.decode_partition_state(got[0], int(got[1].version)) if got else None

    def get_topic_partition_states(
            self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        found = {}
        for tp in partitions:
            state = self.get_topic_partition_state(tp)
            if state is not None:
                found[tp] = state
        return found

    def get_partitions_for_topic(self, topic: str) -> list[int]:
        assignment = self.get_topic_assignment(topic)
        return sorted(assignment.assignment) if assignment is not None else []

    def create_topic_partition_states(
            self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
            expected_controller_epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | ZkError]:
        """The controller's first write for new partitions (parents included), fenced.
        Per partition the state as created (partition epoch 0) or its error; a lost fence
        raises ``ControllerMovedError`` for the whole call."""
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch | ZkError] = {}
        for tp, state in states.items():
            ops: list[ZkOp] = [CreateOp(p) for p in
                               (zd.topic_partitions_path(tp.topic), zd.topic_partition_path(tp))
                               if self.zk.exists(p) is None]
            ops.append(CreateOp(zd.topic_partition_state_path(tp),
                                zd.encode_partition_state(state)))
            try:
                self.zk.multi(ops, expected_controller_epoch_zk_version)
                results[tp] = replace(state, partition_epoch=0)
            except ControllerMovedError:
                raise
            except ZkError as e:
                results[tp] = e
        return results

    def conditional_update_partition_state(
            self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch,
            expected_controller_epoch_zk_version: int | None = None) -> int:
        """Write ``state`` if the znode still has version ``state.partition_epoch``; the
        new version (the new partition epoch).  ``ZkBadVersionError`` when it moved.
        Controllers pass their epoch version (fenced); a leader changing its own ISR
        (the pre-AlterPartition path) passes None."""
        path = zd.topic_partition_state_path(tp)
        ((stat),) = self.zk.multi(
            [SetDataOp(path, zd.encode_partition_state(state), state.partition_epoch)],
            expected_controller_epoch_zk_version)
        return int(stat.version)

    def update_leader_and_isr(
            self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
            controller_epoch: int, expected_controller_epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """Kafka's ``updateLeaderAndIsr``: each state (its ``partition_epoch`` the expected
        version) is stamped with ``controller_epoch`` and written conditionally."""
        result = UpdateLeaderAndIsrResult()
        for tp, state in states.items():
            stamped = replace(state, controller_epoch=controller_epoch)
            try:
                version = self.conditional_update_partition_state(
                    tp, stamped, expected_controller_epoch_zk_version)
                result.finished[tp] = replace(stamped, partition_epoch=version)
            except ZkBadVersionError:
                result.partitions_to_retry.append(tp)
            except ControllerMovedError:
                raise
            except ZkError as e:
                result.finished[tp] = e
        return result

    # ------------------------------------------------------------------ ISR notifications
    def propagate_isr_changes(self, partitions: Collection[TopicPartition]) -> str:
        """A leader's ``isr_change_<n>`` after ISR writes; returns its sequence number."""
        created = self.zk.create(zd.isr_change_notification_path(),
                                 zd.encode_isr_change_notification(partitions), sequential=True)
        return zd.sequence_number_of(created.rsplit("/", 1)[1], zd.ISR_CHANGE_PREFIX)

    def get_all_isr_change_notifications(self) -> list[str]:
        """Sequence numbers of the pending notifications, oldest first."""
        return sorted(zd.sequence_number_of(c, zd.ISR_CHANGE_PREFIX)
                      for c in self.zk.get_children(zd.ISR_CHANGE_NOTIFICATION_PATH)
                      if c.startswith(zd.ISR_CHANGE_PREFIX))

    def get_partitions_from_isr_change_notifications(
            self, sequence_numbers: Iterable[str]) -> list[TopicPartition]:
        partitions: list[TopicPartition] = []
        for seq in sequence_numbers:
            got = self.zk.get_data(zd.isr_change_notification_path(seq))
            if got is not None:
                partitions.extend(zd.decode_isr_change_notification(got[0]))
        return partitions

    def delete_isr_change_notifications(self, sequence_numbers: Iterable[str],
                                        expected_controller_epoch_zk_version: int) -> None:
        ops: list[ZkOp] = [DeleteOp(zd.isr_change_notification_path(s)) for s in sequence_numbers
                           if self.zk.exists(zd.isr_change_notification_path(s))]
        if ops:
            self.zk.multi(ops, expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------ preferred election
    def create_preferred_replica_election(self, partitions: Collection[TopicPartition]) -> None:
        """Request a preferred-replica election; ``ZkNodeExistsError`` while one is pending."""
        self.zk.create(zd.PREFERRED_REPLICA_ELECTION_PATH,
                       zd.encode_preferred_replica_election(partitions), make_parents=True)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        got = self.zk.get_data(zd.PREFERRED_REPLICA_ELECTION_PATH)
        return zd.decode_preferred_replica_election(got[0]) if got is not None else set()

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        with contextlib.suppress(ZkNoNodeError):
            self.zk.multi([DeleteOp(zd.PREFERRED_REPLICA_ELECTION_PATH)],
                          expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------ ACLs
    def create_acl_paths(self) -> None:
        """``createAclPaths``: the ACL stores, a dir per resource type in each, the change
        dirs (an authorizer makes sure of them at start-up)."""
        for path in zd.acl_paths():
            self.zk.ensure_path(path)

    def get_versioned_acls(self, pattern: ResourcePattern) -> VersionedAcls:
        """A pattern's ACLs with their znode version (``NO_ACLS`` when there is no znode)."""
        got = self.zk.get_data(zd.acl_resource_path(pattern))
        return zd.decode_versioned_acls(got[0], int(got[1].version)) if got else zd.NO_ACLS

    def conditional_set_acls(self, pattern: ResourcePattern,
                             entries: Collection[AccessControlEntry],
                             expected_version: int) -> int | None:
        """Rewrite a pattern's znode if it still has ``expected_version``: the new version,
        or None when it moved or went away (BADVERSION, NONODE: re-read, decide again)."""
        if expected_version < 0:
            raise ValueError(f"Invalid version {expected_version} for a conditional update")
        try:
            stat = self.zk.set_data(zd.acl_resource_path(pattern), encode_acls(entries),
                                    expected_version)
        except (ZkBadVersionError, ZkNoNodeError):
            return None
        return int(stat.version)

    def create_acls_if_not_exists(self, pattern: ResourcePattern,
                                  entries: Collection[AccessControlEntry]) -> bool:
        """Create a pattern's znode (version 0; parents where missing); False when another
        writer created it first (NODEEXISTS)."""
        try:
            self.zk.create(zd.acl_resource_path(pattern), encode_acls(entries),
                           make_parents=True)
        except ZkNodeExistsError:
            return False
        return True

    def conditional_delete_acls(self, pattern: ResourcePattern, expected_version: int) -> bool:
        """Delete a pattern's znode at ``expected_version``: True once it is gone (also
        when it already was), False when it moved (BADVERSION)."""
        try:
            self.zk.delete(zd.acl_resource_path(pattern), expected_version)
        except ZkBadVersionError:
            return False
        return True

    def get_acl_resource_types(self, pattern_type: PatternType) -> list[str]:
        """The resource type dirs of a store, as named there (``Topic``, ...)."""
        return self.zk.get_children(zd.acl_store_path(pattern_type))

    def get_acl_resource_names(self, pattern_type: PatternType,
                               resource_type: ResourceType) -> list[str]:
        return self.zk.get_children(zd.acl_resource_type_path(pattern_type, resource_type))

    def create_acl_change_notification(self, pattern: ResourcePattern) -> str:
        """An ``acl_changes_<n>`` node naming ``pattern``; returns its sequence number."""
        change_path = zd.acl_change_path(pattern.pattern_type)
        created = self.zk.create(f"{change_path}/{zd.ACL_CHANGE_PREFIX}",
                                 zd.encode_acl_change_notification(pattern), sequential=True,
                                 make_parents=True)
        return zd.sequence_number_of(created.rsplit("/", 1)[1], zd.ACL_CHANGE_PREFIX)

    def get_acl_change_notifications(self, change_path: str) -> list[str]:
        """Sequence numbers of the ``acl_changes_<n>`` nodes under ``change_path``, oldest
        first."""
        return sorted(zd.sequence_number_of(c, zd.ACL_CHANGE_PREFIX)
                      for c in self.zk.get_children(change_path)
                      if c.startswith(zd.ACL_CHANGE_PREFIX))

    def get_acl_change_notification(self, change_path: str,
                                    sequence_number: str) -> tuple[bytes, int] | None:
        """A change node's data and creation time (ms, the server's clock); None if gone."""
        got = self.zk.get_data(f"{change_path}/{zd.ACL_CHANGE_PREFIX}{sequence_number}")
        return (got[0], int(got[1].ctime)) if got is not None else None

    def delete_acl_change_notification(self, change_path: str, sequence_number: str) -> None:
        self.zk.delete(f"{change_path}/{zd.ACL_CHANGE_PREFIX}{sequence_number}")

    # ------------------------------------------------------------------ producer ids
    def allocate_producer_id_block(self, broker_id: int,
                                   block_size: int = zd.PRODUCER_ID_BLOCK_SIZE) -> ProducerIdsBlock:
        """``ZkProducerIdManager.getNewProducerIdBlock``: the block after the last one
        handed out, claimed with a conditional write (retried when another broker won)."""
        self.zk.ensure_path(zd.PRODUCER_ID_BLOCK_PATH)
        while True:
            got = self.zk.get_data(zd.PRODUCER_ID_BLOCK_PATH)
            if got is None:
                self.zk.ensure_path(zd.PRODUCER_ID_BLOCK_PATH)
                continue
            data, stat = got
            previous = zd.decode_producer_id_block(data)
            first = previous.next_block_first_id() if previous is not None else 0
            if first > 2**63 - 1 - block_size:
                raise ZkError("Have exhausted all producerIds.")
            block = ProducerIdsBlock(broker_id, first, block_size)
            try:
                self.zk.set_data(zd.PRODUCER_ID_BLOCK_PATH, zd.encode_producer_id_block(block),
                                 int(stat.version))
                return block
            except ZkBadVersionError:
                continue

    # ------------------------------------------------------------------ watches
    def watch_broker_ids(self, callback: Callable[[list[int]], None]) -> ZkWatch:
        """``callback(sorted live broker ids)`` now and on every change (kazoo's thread)."""
        return self.zk.watch_children(
            zd.BROKER_IDS_PATH, lambda children: callback(sorted(int(c) for c in children)))

    def watch_topics(self, callback: Callable[[set[str]], None]) -> ZkWatch:
        return self.zk.watch_children(zd.TOPICS_PATH, lambda children: callback(set(children)))

    def watch_topic(self, topic: str, callback: Callable[[], None]) -> ZkWatch:
        """``callback()`` now and whenever ``/brokers/topics/<topic>`` changes (new
        partitions: Kafka's PartitionModificationsHandler) or goes away."""
        return self.zk.watch_data(zd.topic_path(topic), lambda _data, _stat: callback())

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> ZkWatch:
        """``callback(sequence numbers)`` of the ``config_change_<n>`` nodes, now and on
        every change (Kafka's ZkNodeChangeNotificationListener)."""
        return self.zk.watch_children(
            zd.CONFIG_CHANGES_PATH,
            lambda children: callback(sorted(zd.sequence_number_of(c, zd.CONFIG_CHANGE_PREFIX)
                                             for c in children
                                             if c.startswith(zd.CONFIG_CHANGE_PREFIX))))

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> ZkWatch:
        return self.zk.watch_children(zd.DELETE_TOPICS_PATH,
                                      lambda children: callback(sorted(children)))

    def watch_isr_change_notifications(self, callback: Callable[[list[str]], None]) -> ZkWatch:
        """``callback(sequence numbers)`` of the pending ``isr_change_<n>`` nodes."""
        return self.zk.watch_children(
            zd.ISR_CHANGE_NOTIFICATION_PATH,
            lambda children: callback(sorted(zd.sequence_number_of(c, zd.ISR_CHANGE_PREFIX)
                                             for c in children
                                             if c.startswith(zd.ISR_CHANGE_PREFIX))))

    def watch_acl_changes(self, change_path: str,
                          callback: Callable[[list[str]], None]) -> ZkWatch:
        """``callback(sequence numbers)`` of the ``acl_changes_<n>`` nodes under
        ``change_path`` (created if missing), now and on every change."""
        self.zk.ensure_path(change_path)
        return self.zk.watch_children(
            change_path,
            lambda children: callback(sorted(zd.sequence_number_of(c, zd.ACL_CHANGE_PREFIX)
                                             for c in children
                                             if c.startswith(zd.ACL_CHANGE_PREFIX))))

    def watch_controller(self, callback: Callable[[int | None], None]) -> ZkWatch:
        """``callback(controller id or None)`` now and whenever ``/controller`` is created,
        changed or deleted: a deletion is every broker's cue to try an election."""
        def on_data(data: bytes | None, stat: object) -> None:
            callback(zd.decode_controller(data) if data else None)
        return self.zk.watch_data(zd.CONTROLLER_PATH, on_data)

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        self.zk.add_state_listener(listener)
