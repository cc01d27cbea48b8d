"""The single broker's metadata: cluster id, topics, their ids, partition counts, configs.

Kafka keeps this in ZooKeeper or its KRaft metadata log; the embedded single broker keeps
it in its first log dir: ``meta.properties`` (Kafka's file: version, node.id, cluster.id)
and ``millrace-metadata.json`` (topics).  Writes are atomic (temp file, fsync, rename,
fsync dir) so a crash leaves either the old or the new state.  The cluster milestone
replaces this with the ZooKeeper registry behind the same methods.

Thread ownership: mutated only on the event-loop thread.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field

from millrace.common.errors import ConfigError, InvalidTopicError

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"Topic name is longer than {MAX_TOPIC_NAME} characters")
    if not TOPIC_NAME.match(name):
        raise InvalidTopicError(f"Topic name {name!r} is illegal, it contains a character "
                                "other than ASCII alphanumerics, '.', '_' and '-'")


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


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


class MetadataStore:
    FILE = "millrace-metadata.json"

    def __init__(self, log_dir: str, node_id: int, cluster_id: str | None = None) -> None:
        self.log_dir = log_dir
        self.node_id = node_id
        self.topics: dict[str, TopicInfo] = {}
        self.producer_id_block_end = 0  # ids below this were handed out (or reserved)
        os.makedirs(log_dir, exist_ok=True)
        self.cluster_id = self._load_meta_properties(cluster_id)
        self._load()

    # ------------------------------------------------------------------ persistence
    def _load_meta_properties(self, wanted: str | None) -> str:
        path = os.path.join(self.log_dir, "meta.properties")
        props: dict[str, str] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#") and "=" in line:
                        k, v = line.split("=", 1)
                        props[k.strip()] = v.strip()
            stored_node = props.get("node.id")
            if stored_node is not None and int(stored_node) != self.node_id:
                raise ConfigError(f"node.id {self.node_id} does not match node.id "
                                  f"{stored_node} stored in {path}")
            cluster_id = props.get("cluster.id")
            if cluster_id and wanted and wanted != cluster_id:
                raise ConfigError(f"cluster.id {wanted} does not match {cluster_id} in {path}")
            if cluster_id:
                return cluster_id
        cluster_id = wanted or new_cluster_id()
        text = (f"#\n# written by millrace\nversion=1\nnode.id={self.node_id}\n"
                f"cluster.id={cluster_id}\n")
        atomic_write(path, text.encode())
        return cluster_id

    def _load(self) -> None:
        path = os.path.join(self.log_dir, self.FILE)
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for t in data.get("topics", []):
            info = TopicInfo(t["name"], uuid.UUID(t["id"]), int(t["partitions"]),
                             {str(k): str(v) for k, v in t.get("configs", {}).items()})
            self.topics[info.name] = info
        self.producer_id_block_end = int(data.get("producer_id_block_end", 0))

    def _save(self) -> None:
        data = {"version": 1, "producer_id_block_end": self.producer_id_block_end,
                "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
             "configs": t.configs} for t in sorted(self.topics.values(), key=lambda t: t.name)]}
        atomic_write(os.path.join(self.log_dir, self.FILE),
                     json.dumps(data, indent=1).encode())

    # ------------------------------------------------------------------ operations
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        validate_topic_name(name)
        info = TopicInfo(name, new_topic_id({t.topic_id for t in self.topics.values()}),
                         partitions, dict(configs))
        self.topics[name] = info
        self._save()
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.topics.pop(name)
        self._save()
        return info

    def reserve_producer_ids(self, count: int) -> tuple[int, int]:
        """Reserve a block [start, end) of producer ids, durably (Kafka's ProducerIdManager
        hands out blocks of 1000 so that a restart never reuses an id)."""
        start = self.producer_id_block_end
        self.producer_id_block_end = start + count
        self._save()
        return start, self.producer_id_block_end

    def set_partitions(self, name: str, count: int) -> None:
        self.topics[name].partitions = count
        self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()
