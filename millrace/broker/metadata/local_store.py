"""``LocalMetadataStore``: the single-node ``ClusterMetadata`` (the embedded default).

Without ZooKeeper the broker is the whole cluster: it is the only registered broker, the
controller, and the leader and whole ISR of every partition (leader epoch 0).  What must
survive a restart lives in its first log dir: ``meta.properties`` (Kafka's file:
version, node.id, cluster.id) and ``millrace-metadata.json`` (topics with ids,
partition counts and config overrides; the producer-id block high mark; user entity
configs -- the SCRAM credentials, in the same ``key -> value`` form ZooKeeper's
``/config/users/<user>`` holds; the ACLs, an ``acls`` section that ``LocalAclStore``
encodes and this module keeps as it is; the client quotas, a ``quotas`` section of
``entity path -> configs`` that ``LocalQuotaStore`` reads and writes).  Writes are atomic (temp file, fsync, rename,
fsync dir) so a crash leaves either the old or the new state.

Thread ownership: mutated only on the event-loop thread.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from millrace.broker.metadata.cluster_metadata import (
    BrokerRegistration,
    ClusterMetadata,
    PartitionState,
    TopicInfo,
    validate_topic_name,
)
from millrace.common.errors import ConfigError, InvalidReplicaAssignmentError


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def new_topic_id(taken: set[uuid.UUID]) -> uuid.UUID:
    while True:
        u = uuid.uuid4()
        text = base64.urlsafe_b64encode(u.bytes).decode()
        if u.int > 1 and not text.startswith("-") and u not in taken:
            return u


def atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def ensure_meta_properties(log_dir: str, node_id: int, wanted: str | None) -> str:
    """Kafka's ``meta.properties`` in a log dir: the node id and cluster id the dir
    belongs to.  A dir of another node or cluster is refused (ConfigError naming both); a
    new dir gets ``wanted`` (or a fresh id).  Returns the cluster id."""
    path = os.path.join(log_dir, "meta.properties")
    props: dict[str, str] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip()
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise ConfigError(f"node.id {node_id} does not match node.id "
                              f"{stored_node} stored in {path}")
        cluster_id = props.get("cluster.id")
        if cluster_id and wanted and wanted != cluster_id:
            raise ConfigError(f"cluster.id {wanted} does not match {cluster_id} in {path}")
        if cluster_id:
            return cluster_id
    os.makedirs(log_dir, exist_ok=True)
    cluster_id = wanted or new_cluster_id()
    text = (f"#\n# written by millrace\nversion=1\nnode.id={node_id}\n"
            f"cluster.id={cluster_id}\n")
    atomic_write(os.path.join(log_dir, "meta.properties"), text.encode())
    return cluster_id


class LocalMetadataStore(ClusterMetadata):
    FILE = "millrace-metadata.json"

    def __init__(self, log_dir: str, node_id: int, cluster_id: str | None = None) -> None:
        self.log_dir = log_dir
        self.node_id = node_id
        self._topics: dict[str, TopicInfo] = {}
        self._registration: BrokerRegistration | None = None
        self.producer_id_block_end = 0  # ids below this were handed out (or reserved)
        self._user_configs: dict[str, dict[str, str]] = {}
        self._acl_records: list[dict[str, Any]] = []
        self._quota_configs: dict[str, dict[str, str]] = {}
        os.makedirs(log_dir, exist_ok=True)
        self._cluster_id = ensure_meta_properties(log_dir, node_id, cluster_id)
        self._load()

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self.node_id

    def register_broker(self, registration: BrokerRegistration) -> None:
        if registration.node_id != self.node_id:
            raise ValueError(f"broker {registration.node_id} cannot register with the "
                             f"single-node store of broker {self.node_id}")
        self._registration = registration

    def brokers(self) -> list[BrokerRegistration]:
        return [] if self._registration is None else [self._registration]

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return MappingProxyType(self._topics)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        info = self._topics.get(topic)
        if info is None or partition not in info.assignment:
            return None
        return PartitionState(leader=self.node_id, leader_epoch=0, isr=(self.node_id,))

    # ------------------------------------------------------------------ persistence
    def _load(self) -> None:
        path = os.path.join(self.log_dir, self.FILE)
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for t in data.get("topics", []):
            info = TopicInfo(t["name"], uuid.UUID(t["id"]),
                             self._local_assignment(range(int(t["partitions"]))),
                             {str(k): str(v) for k, v in t.get("configs", {}).items()})
            self._topics[info.name] = info
        self.producer_id_block_end = int(data.get("producer_id_block_end", 0))
        self._user_configs = {str(user): {str(k): str(v) for k, v in configs.items()}
                              for user, configs in data.get("users", {}).items()}
        self._acl_records = list(data.get("acls", []))
        self._quota_configs = {str(path): {str(k): str(v) for k, v in configs.items()}
                               for path, configs in data.get("quotas", {}).items()}

    def _save(self) -> None:
        data = {"version": 1, "producer_id_block_end": self.producer_id_block_end,
                "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
             "configs": t.configs} for t in sorted(self._topics.values(), key=lambda t: t.name)]}
        if self._user_configs:
            data["users"] = {u: self._user_configs[u] for u in sorted(self._user_configs)}
        if self._acl_records:
            data["acls"] = self._acl_records
        if self._quota_configs:
            data["quotas"] = {p: self._quota_configs[p] for p in sorted(self._quota_configs)}
        atomic_write(os.path.join(self.log_dir, self.FILE),
                     json.dumps(data, indent=1).encode())

    # ------------------------------------------------------------------ operations
    def _local_assignment(self, partitions: range) -> dict[int, list[int]]:
        return {p: [self.node_id] for p in partitions}

    def _check_local(self, assignment: dict[int, list[int]]) -> None:
        for p, replicas in assignment.items():
            if replicas != [self.node_id]:
                raise InvalidReplicaAssignmentError(
                    f"Partition {p} is assigned to brokers {replicas}; the only broker "
                    f"is {self.node_id}")

    def create_topic(self, name: str, assignment: dict[int, list[int]],
                     configs: dict[str, str]) -> TopicInfo:
        validate_topic_name(name)
        self._check_local(assignment)
        info = TopicInfo(name, new_topic_id({t.topic_id for t in self._topics.values()}),
                         dict(assignment), dict(configs))
        self._topics[name] = info
        self._save()
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self._topics.pop(name)
        self._save()
        return info

    def add_partitions(self, name: str, assignment: dict[int, list[int]]) -> TopicInfo:
        self._check_local(assignment)
        info = self._topics[name]
        info.assignment.update(assignment)
        self._save()
        return info

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._topics[name].configs = dict(configs)
        self._save()

    def reserve_producer_ids(self, count: int) -> tuple[int, int]:
        """Kafka's ProducerIdManager hands out blocks of 1000 so that a restart never
        reuses an id; the block's end is saved before any id of it is used."""
        start = self.producer_id_block_end
        self.producer_id_block_end = start + count
        self._save()
        return start, self.producer_id_block_end

    # ------------------------------------------------------------------ user entities
    def user_configs(self, user: str) -> dict[str, str]:
        """A user entity's configs (SCRAM credentials by mechanism name); {} if none."""
        return dict(self._user_configs.get(user, {}))

    def users_with_configs(self) -> list[str]:
        return sorted(self._user_configs)

    def set_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        """Replace a user's configs (an empty mapping removes the entity), durably."""
        if configs:
            self._user_configs[user] = dict(configs)
        else:
            self._user_configs.pop(user, None)
        self._save()

    # ------------------------------------------------------------------ ACLs
    def acl_records(self) -> list[dict[str, Any]]:
        """The ``acls`` section as ``LocalAclStore`` wrote it (one JSON object per pattern)."""
        return copy.deepcopy(self._acl_records)

    def set_acl_records(self, records: list[dict[str, Any]]) -> None:
        """Replace the ``acls`` section, durably."""
        self._acl_records = copy.deepcopy(records)
        self._save()

    # ------------------------------------------------------------------ client quotas
    def quota_configs(self) -> dict[str, dict[str, str]]:
        """The ``quotas`` section: entity path (``users/<u>``, ``users/<u>/clients/<c>``,
        ``clients/<c>``, names sanitized) -> configs, as ``LocalQuotaStore`` wrote them."""
        return copy.deepcopy(self._quota_configs)

    def set_quota_configs(self, entity_path: str, configs: Mapping[str, str]) -> None:
        """Replace one entity's quota configs (empty removes the entity), durably."""
        if configs:
            self._quota_configs[entity_path] = dict(configs)
        else:
            self._quota_configs.pop(entity_path, None)
        self._save()
