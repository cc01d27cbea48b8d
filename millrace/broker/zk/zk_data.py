"""Kafka's ZooKeeper layout: every znode path and its JSON, as pure functions (Java/Scala
``kafka.zk.ZkData``).  No ZooKeeper here: ``KafkaZkClient`` does the I/O.

The layout (E ephemeral, P persistent, PS persistent-sequential with a 10-digit suffix)::

    /controller                      E  {"version":2,"brokerid":1,"timestamp":"<ms>","kraftControllerEpoch":-1}
    /controller_epoch                P  1                        (a bare integer, not JSON)
    /brokers/ids/<id>                E  v5 registration; its czxid is the broker epoch
    /brokers/topics/<t>              P  {"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},
                                         "removing_replicas":{},"topic_id":"<base64 uuid>"}
    /brokers/topics/<t>/partitions/<p>/state
                                     P  {"version":1,"leader":1,"leader_epoch":0,
                                         "controller_epoch":7,"isr":[1,2]}; zkVersion = partition epoch
    /brokers/seqid                   P  (empty; its version generates broker ids)
    /cluster/id                      P  {"version":"1","id":"<base64 uuid>"}   (version is a string)
    /isr_change_notification/isr_change_<n>     PS {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /admin/delete_topics/<t>         P  (empty)
    /admin/preferred_replica_election P {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /config/<type>/<name>            P  {"version":1,"config":{"k":"v"}}
    /config/changes/config_change_<n> PS {"version":2,"entity_path":"topics/<t>"}
    /latest_producer_id_block        P  {"version":1,"broker":1,"block_start":"0","block_end":"999"}
    /kafka-acl/<Type>/<name>         P  a LITERAL pattern's ACLs: {"acls":[{"principal":"User:alice",
                                         "permissionType":"Allow","host":"*","operation":"Read"}],
                                         "version":1}   (``millrace.security.acl.encode_acls``)
    /kafka-acl-extended/prefixed/<Type>/<name>   P  a PREFIXED pattern's ACLs, the same JSON
    /kafka-acl-changes/acl_changes_<n>           PS TOPIC:orders        (UTF-8 text, not JSON)
    /kafka-acl-extended-changes/acl_changes_<n>  PS {"version":1,"resourceType":"TOPIC",
                                                     "name":"orders-","patternType":"PREFIXED"}

Encoding follows Kafka's Jackson output: compact separators, UTF-8, ``/`` unescaped, keys
in the order ``ZkData`` inserts them (Kafka's readers parse JSON, so order only matters
to tests that compare bytes).  Decoders accept any key order and the older versions Kafka
still reads.  Topic ids and cluster ids are Kafka's ``Uuid.toString``: the 16 bytes in
URL-safe base64 without padding (22 characters).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from millrace.broker.metadata.cluster_metadata import EndPoint, PartitionState
from millrace.common.topic_partition import TopicPartition
from millrace.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_acls,
)

# ---------------------------------------------------------------------------- paths
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"

# Kafka's ConfigType.ALL: the entity types under /config
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
TOPIC_CONFIG_TYPE = "topics"

# ZkData.PersistentZkPaths: created (empty) by every broker at start-up
PERSISTENT_ZK_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES),
)

# KafkaController.InitialControllerEpoch: /controller_epoch is created holding 0
INITIAL_CONTROLLER_EPOCH = 0
# ZkVersion.MatchAnyVersion
MATCH_ANY_VERSION = -1
# ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PRODUCER_ID_BLOCK_SIZE = 1000
# LeaderRecoveryState: RECOVERED (0) is never written; RECOVERING (1) after an unclean election
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1
# Kafka's reserved.broker.max.id default: generated ids start above it
RESERVED_BROKER_MAX_ID = 1000


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(tp: TopicPartition) -> str:
    return f"{topic_partitions_path(tp.topic)}/{tp.partition}"


def topic_partition_state_path(tp: TopicPartition) -> str:
    return f"{topic_partition_path(tp)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def isr_change_notification_path(sequence_number: str = "") -> str:
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}{sequence_number}"


def sequence_number_of(node_name: str, prefix: str) -> str:
    """``isr_change_0000000012`` -> ``0000000012`` (Kafka passes the suffix around)."""
    if not node_name.startswith(prefix):
        raise ValueError(f"znode {node_name!r} does not start with {prefix!r}")
    return node_name[len(prefix):]


# ---------------------------------------------------------------------------- JSON
def to_json_bytes(value: Any) -> bytes:
    """Jackson's compact form: no spaces, UTF-8 as is, ``/`` not escaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json(data: bytes | None) -> Any:
    """Kafka's ``Json.parseBytes``: None for an empty or null znode."""
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: exactly 16 bytes once decoded."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"Input string {text!r} decoded as {len(raw)} bytes, "
                         "which is not equal to the expected 16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)


# ---------------------------------------------------------------------------- controller
def encode_controller(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
    return to_json_bytes({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                          "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (``ControllerZNode.decode``)."""
    js = parse_json(data)
    if not isinstance(js, dict) or "brokerid" not in js:
        raise ValueError(f"not a controller registration: {data!r}")
    return int(js["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("utf-8")


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode("utf-8"))


# ---------------------------------------------------------------------------- brokers


@dataclass(frozen=True, slots=True)
class SupportedVersionRange:
    min_version: int
    max_version: int


@dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration (``/brokers/ids/<id>``): Kafka's ``Broker`` + JSON version."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    features: Mapping[str, SupportedVersionRange] = field(default_factory=dict)
    jmx_port: int = -1
    version: int = 5

    def endpoint(self, listener_name: str) -> EndPoint | None:
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


@dataclass(frozen=True, slots=True)
class BrokerAndEpoch:
    """A live broker and its epoch (the czxid of its registration znode)."""

    broker: BrokerInfo
    epoch: int


def encode_broker_info(info: BrokerInfo, timestamp_ms: int) -> bytes:
    """v4/v5 registration JSON.  ``host``/``port`` are the first PLAINTEXT endpoint
    (for clients older than 0.10), else null/-1; ``rack`` only when set; ``features``
    from v5 (IBP 2.7)."""
    plaintext = next((ep for ep in info.endpoints if ep.security_protocol == "PLAINTEXT"), None)
    js: dict[str, Any] = {
        "version": info.version,
        "host": plaintext.host if plaintext is not None else None,
        "port": plaintext.port if plaintext is not None else -1,
        "jmx_port": info.jmx_port,
        "timestamp": str(timestamp_ms),
        "endpoints": [ep.connection_string for ep in info.endpoints],
    }
    if info.rack is not None and info.version >= 3:
        js["rack"] = info.rack
    if info.version >= 4:
        js["listener_security_protocol_map"] = {
            ep.listener_name: ep.security_protocol for ep in info.endpoints}
    if info.version >= 5:
        js["features"] = {name: {"min_version": r.min_version, "max_version": r.max_version}
                          for name, r in info.features.items()}
    return to_json_bytes(js)


def decode_broker_info(broker_id: int, data: bytes) -> BrokerInfo:
    """Any registration version Kafka reads (1-5)."""
    js = parse_json(data)
    if not isinstance(js, dict):
        raise ValueError(f"Failed to parse ZooKeeper registration for broker {broker_id}: {data!r}")
    version = int(js["version"])
    if version < 1:
        raise ValueError(f"Unsupported version of broker registration: {data!r}")
    if version == 1:
        endpoints: tuple[EndPoint, ...] = (EndPoint(str(js["host"]), int(js["port"])),)
    else:
        protocol_map = js.get("listener_security_protocol_map")
        endpoints = tuple(EndPoint.parse(s, protocol_map) for s in js["endpoints"])
    features = {name: SupportedVersionRange(int(r["min_version"]), int(r["max_version"]))
                for name, r in (js.get("features") or {}).items()}
    return BrokerInfo(broker_id, endpoints, js.get("rack"), features,
                      int(js.get("jmx_port", -1)), version)


# ---------------------------------------------------------------------------- topics
@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's replicas (AR, preferred leader first) and an ongoing reassignment's
    adding/removing sets (KIP-455)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicIdReplicaAssignment:
    topic: str
    topic_id: uuid.UUID | None
    assignment: Mapping[int, ReplicaAssignment]  # partition -> replicas

    def replicas(self) -> dict[int, list[int]]:
        """partition -> AR, as ``ClusterMetadata.TopicInfo.assignment`` holds it."""
        return {p: list(a.replicas) for p, a in sorted(self.assignment.items())}


def encode_topic_assignment(topic_id: uuid.UUID | None,
                            assignment: Mapping[int, ReplicaAssignment]) -> bytes:
    """v3 topic znode (``TopicZNode.encode``); partitions in ascending order."""
    ordered = sorted(assignment.items())
    js: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in ordered},
        "adding_replicas": {str(p): list(a.adding_replicas) for p, a in ordered
                            if a.adding_replicas},
        "removing_replicas": {str(p): list(a.removing_replicas) for p, a in ordered
                              if a.removing_replicas},
    }
    if topic_id is not None:
        js["topic_id"] = uuid_to_base64(topic_id)
    return to_json_bytes(js)


def decode_topic_assignment(topic: str, data: bytes | None) -> TopicIdReplicaAssignment:
    """Versions 1-3 (v1 has only ``partitions``, v2 adds adding/removing, v3 the id)."""
    js = parse_json(data)
    if not isinstance(js, dict):
        return TopicIdReplicaAssignment(topic, None, {})
    topic_id = uuid_from_base64(js["topic_id"]) if js.get("topic_id") else None
    adding = js.get("adding_replicas") or {}
    removing = js.get("removing_replicas") or {}
    assignment = {
        int(p): ReplicaAssignment(tuple(int(r) for r in replicas),
                                  tuple(int(r) for r in adding.get(p, ())),
                                  tuple(int(r) for r in removing.get(p, ())))
        for p, replicas in (js.get("partitions") or {}).items()}
    return TopicIdReplicaAssignment(topic, topic_id, assignment)


# ---------------------------------------------------------------------------- partition state
@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A partition ``state`` znode (Kafka's ``LeaderIsrAndControllerEpoch`` around
    ``LeaderAndIsr``).  ``partition_epoch`` is the znode's version: not in the JSON, it is
    filled in on reads and is what a conditional write must name."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    partition_epoch: int = 0

    def as_partition_state(self) -> PartitionState:
        return PartitionState(self.leader, self.leader_epoch, self.isr, self.controller_epoch,
                              self.partition_epoch)


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    js: dict[str, Any] = {
        "version": 1,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "controller_epoch": state.controller_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != LEADER_RECOVERED:
        js["leader_recovery_state"] = state.leader_recovery_state
    return to_json_bytes(js)


def decode_partition_state(data: bytes | None, zk_version: int) -> LeaderIsrAndControllerEpoch | None:
    js = parse_json(data)
    if not isinstance(js, dict):
        return None
    return LeaderIsrAndControllerEpoch(
        int(js["leader"]), int(js["leader_epoch"]), tuple(int(r) for r in js["isr"]),
        int(js["controller_epoch"]), int(js.get("leader_recovery_state", LEADER_RECOVERED)),
        zk_version)


# ---------------------------------------------------------------------------- notifications
def _partitions_json(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(partitions)]


def _partitions_from_json(data: bytes | None) -> list[TopicPartition]:
    js = parse_json(data)
    if not isinstance(js, dict):
        return []
    return [TopicPartition(str(p["topic"]), int(p["partition"])) for p in js["partitions"]]


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return to_json_bytes({"version": 1, "partitions": _partitions_json(partitions)})


def decode_isr_change_notification(data: bytes | None) -> list[TopicPartition]:
    return _partitions_from_json(data)


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return to_json_bytes({"version": 1, "partitions": _partitions_json(partitions)})


def decode_preferred_replica_election(data: bytes | None) -> set[TopicPartition]:
    return set(_partitions_from_json(data))


# ---------------------------------------------------------------------------- configs
def encode_entity_config(config: Mapping[str, str]) -> bytes:
    return to_json_bytes({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    js = parse_json(data)
    if not isinstance(js, dict) or not isinstance(js.get("config"), dict):
        return {}
    return {str(k): str(v) for k, v in js["config"].items()}


def encode_config_change_notification(entity_path: str) -> bytes:
    """``entity_path`` is ``<type>/<sanitized name>``, e.g. ``topics/orders``."""
    return to_json_bytes({"version": 2, "entity_path": entity_path})


def decode_config_change_notification(data: bytes | None) -> str | None:
    js = parse_json(data)
    if not isinstance(js, dict):
        return None
    return str(js["entity_path"]) if "entity_path" in js else None


# ---------------------------------------------------------------------------- cluster id
def encode_cluster_id(cluster_id: str) -> bytes:
    return to_json_bytes({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    js = parse_json(data)
    if not isinstance(js, dict) or "id" not in js:
        raise ValueError(f"Failed to parse the cluster id json {data!r}")
    return str(js["id"])


def generate_cluster_id() -> str:
    """``CoreUtils.generateUuidAsBase64``."""
    return uuid_to_base64(uuid.uuid4())


# ---------------------------------------------------------------------------- producer ids
@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """Ids ``[first_producer_id, last_producer_id]`` reserved for one broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def encode_producer_id_block(block: ProducerIdsBlock) -> bytes:
    return to_json_bytes({"version": 1, "broker": block.assigned_broker_id,
                          "block_start": str(block.first_producer_id),
                          "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes | None) -> ProducerIdsBlock | None:
    js = parse_json(data)
    if not isinstance(js, dict):
        return None
    start = int(js["block_start"])
    return ProducerIdsBlock(int(js["broker"]), start, int(js["block_end"]) - start + 1)


# ---------------------------------------------------------------------------- ACLs
# ZkData's ZkAclStore / ZkAclChangeStore.  A pattern's ACLs live at
# <store>/<resource type, PascalCase>/<name>: LITERAL under /kafka-acl, every other specific
# pattern type under /kafka-acl-extended/<pattern type, lower case> (only PREFIXED exists).
# A write is followed by a PERSISTENT_SEQUENTIAL change node naming the pattern: literal
# ones as the text "<ResourceType enum name>:<name>", extended ones as JSON.
KAFKA_ACL_PATH = "/kafka-acl"
KAFKA_ACL_EXTENDED_PATH = "/kafka-acl-extended"
KAFKA_ACL_CHANGES_PATH = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_CHANGE_EVENT_VERSION = 1  # ExtendedAclChangeEvent.currentVersion
# the pattern types with a store of their own (PatternType.isSpecific)
ACL_STORE_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
# AclEntry.RESOURCE_TYPES: every type but UNKNOWN and ANY has a dir in each store
ACL_RESOURCE_TYPES = tuple(t for t in ResourceType
                           if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
# ZkVersion.UnknownVersion: the version of ACLs read from a znode that does not exist
UNKNOWN_VERSION = -2


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """One pattern's ACLs and the version of the znode they were read from
    (``AclAuthorizer.VersionedAcls``): a rewrite is conditional on that version."""

    entries: frozenset[AccessControlEntry]
    zk_version: int = UNKNOWN_VERSION

    @property
    def exists(self) -> bool:
        return self.zk_version != UNKNOWN_VERSION


NO_ACLS = VersionedAcls(frozenset())


def decode_versioned_acls(data: bytes | None, zk_version: int) -> VersionedAcls:
    """``ResourceZNode.decode``: an empty znode holds no ACLs (``AclEntry.fromBytes``);
    otherwise ``decode_acls`` (version 1 only, ValueError on anything else)."""
    return VersionedAcls(frozenset(decode_acls(data) if data else ()), zk_version)


def acl_store_path(pattern_type: PatternType) -> str:
    """``ZkAclStore(patternType).aclPath``: ``/kafka-acl`` or ``/kafka-acl-extended/prefixed``."""
    if pattern_type == PatternType.LITERAL:
        return KAFKA_ACL_PATH
    if pattern_type in ACL_STORE_PATTERN_TYPES:
        return f"{KAFKA_ACL_EXTENDED_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def acl_resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{acl_store_path(pattern_type)}/{resource_type.kafka_name}"


def acl_resource_path(pattern: ResourcePattern) -> str:
    """``ResourceZNode.path``: the znode of one pattern's ACLs.  The name is used as it is
    (Kafka does not sanitize it), so one with ``/`` -- which CreateAcls refuses -- or an
    empty one has no znode."""
    if not pattern.name or "/" in pattern.name:
        raise ValueError(f"resource name {pattern.name!r} cannot name a znode")
    return f"{acl_resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def acl_change_path(pattern_type: PatternType) -> str:
    """Where changes of patterns of this type are announced."""
    acl_store_path(pattern_type)  # refuses the filter types
    if pattern_type == PatternType.LITERAL:
        return KAFKA_ACL_CHANGES_PATH
    return KAFKA_ACL_EXTENDED_CHANGES_PATH


def acl_change_pattern_type(change_path: str) -> PatternType:
    """The pattern type whose changes ``change_path`` carries (the decoder to use)."""
    if change_path == KAFKA_ACL_CHANGES_PATH:
        return PatternType.LITERAL
    if change_path == KAFKA_ACL_EXTENDED_CHANGES_PATH:
        return PatternType.PREFIXED
    raise ValueError(f"{change_path} is not an ACL change path")


def acl_paths() -> list[str]:
    """``KafkaZkClient.createAclPaths``: each store, a dir per resource type in it, and the
    two change dirs (an authorizer creates them at start-up)."""
    paths = []
    for pattern_type in ACL_STORE_PATTERN_TYPES:
        paths.append(acl_store_path(pattern_type))
        paths.extend(acl_resource_type_path(pattern_type, t) for t in ACL_RESOURCE_TYPES)
    paths.extend((KAFKA_ACL_CHANGES_PATH, KAFKA_ACL_EXTENDED_CHANGES_PATH))
    return paths


def resource_type_from_path_name(name: str) -> ResourceType | None:
    """The resource type of a store's dir: its PascalCase name (``TransactionalId``); None
    for any other (Kafka logs "Ignoring unknown ResourceType" and skips the dir).  Kafka's
    ``SecurityUtils.resourceType`` also takes ``TOPIC``, but then reads ``/Topic/..``
    below it, so such a dir never yields an ACL: it is skipped here as well."""
    for t in ACL_RESOURCE_TYPES:
        if name == t.kafka_name:
            return t
    return None


def _resource_type_from_string(text: str) -> ResourceType:
    """``ResourceType.fromString``: the Java enum name, any case (``TOPIC``, ``topic``,
    ``Transactional_Id``); also the PascalCase name in any case (``TransactionalId``),
    which Kafka 1.x wrote into its notifications.  ValueError for anything else."""
    by_enum_name = ResourceType.__members__.get(text.upper())
    if by_enum_name is not None and by_enum_name in ACL_RESOURCE_TYPES:
        return by_enum_name
    for t in ACL_RESOURCE_TYPES:
        if text.lower() == t.kafka_name.lower():
            return t
    raise ValueError(f"unknown resource type {text!r}")


def encode_acl_change_notification(pattern: ResourcePattern) -> bytes:
    """The change node's data: ``TOPIC:orders`` for a LITERAL pattern (``ResourceType.
    toString`` is the enum name), else ``ExtendedAclChangeEvent`` JSON."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    acl_store_path(pattern.pattern_type)
    return to_json_bytes({"version": ACL_CHANGE_EVENT_VERSION,
                          "resourceType": pattern.resource_type.name,
                          "name": pattern.name,
                          "patternType": pattern.pattern_type.name})


def decode_acl_change_notification(change_path: str, data: bytes | None) -> ResourcePattern:
    """The pattern a change node under ``change_path`` names; ValueError when it names
    none (Kafka logs such a node and goes on)."""
    if acl_change_pattern_type(change_path) == PatternType.LITERAL:
        text = (data or b"").decode("utf-8")
        resource_type, sep, name = text.partition(":")
        if not sep:
            raise ValueError("expected a string in format ResourceType:ResourceName but got "
                             f"{text!r}")
        return ResourcePattern(_resource_type_from_string(resource_type), name,
                               PatternType.LITERAL)
    js = parse_json(data)
    if not isinstance(js, dict):
        raise ValueError(f"Failed to parse ACL change event {data!r}")
    version = js.get("version")
    if not isinstance(version, int) or version > ACL_CHANGE_EVENT_VERSION:
        raise ValueError(f"Acl change event received for unsupported version: {version}")
    pattern_type = PatternType.__members__.get(str(js.get("patternType")))
    if pattern_type is None or pattern_type not in ACL_STORE_PATTERN_TYPES:
        raise ValueError(f"ACL change event with pattern type {js.get('patternType')!r}")
    event_name = js.get("name")
    if not isinstance(event_name, str):
        raise ValueError(f"ACL change event without a name: {data!r}")
    return ResourcePattern(_resource_type_from_string(str(js.get("resourceType"))), event_name,
                           pattern_type)
