"""Per-topic log configuration (Java's ``LogConfig``), with Kafka's topic config names.

One table: every field of ``LogConfig`` carries its Kafka name, type, validator and doc in
its metadata, and the ``ConfigDef`` used for parsing is derived from those fields, so a key
is declared exactly once.  ``LogConfig.from_props`` takes a ``{name: value}`` mapping (the
strings of a CreateTopics request or a properties file) on top of a base config and raises
``ConfigError`` naming the key for unknown keys and bad values.

Every Kafka 4.0 topic config is accepted so that an existing topic definition works
unchanged; the ones that the storage layer does not act on (replication, remote storage,
compression levels, preallocation) are stored and reported but only used by other layers.
Broker-level defaults (``log.segment.bytes``, ``log.retention.hours`` ...) are mapped to
these names by the broker, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from millrace.common.config import LONG_MAX, ConfigDef, at_least, between, one_of
from millrace.common.errors import ConfigError

COMPACT = "compact"
DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _key(name: str, type_: str, default: Any, validator: Any = None, doc: str = "") -> Any:
    return field(default=default,
                 metadata={"name": name, "type": type_, "validator": validator, "doc": doc})


@dataclass(frozen=True)
class LogConfig:
    """Typed topic config; attribute names are the Kafka names with dots as underscores."""

    segment_bytes: int = _key("segment.bytes", "int", 1 << 30, at_least(14),
                              "Roll a new segment when the active one would exceed this size.")
    segment_ms: int = _key("segment.ms", "long", 7 * 24 * 3600 * 1000, at_least(1),
                           "Roll a new segment after this long even if it is not full.")
    segment_jitter_ms: int = _key("segment.jitter.ms", "long", 0, at_least(0),
                                  "Random jitter subtracted from segment.ms per segment.")
    segment_index_bytes: int = _key("segment.index.bytes", "int", 10 * 1024 * 1024, at_least(8),
                                    "Maximum size of a segment's offset and time index.")
    index_interval_bytes: int = _key("index.interval.bytes", "int", 4096, at_least(0),
                                     "Add an offset index entry every this many log bytes.")
    retention_ms: int = _key("retention.ms", "long", 7 * 24 * 3600 * 1000, at_least(-1),
                             "Delete closed segments older than this (-1: keep forever).")
    retention_bytes: int = _key("retention.bytes", "long", -1, None,
                                "Delete old segments while the log exceeds this (-1: no limit).")
    cleanup_policy: tuple[str, ...] = _key("cleanup.policy", "list", (DELETE,),
                                           one_of(DELETE, COMPACT),
                                           "delete, compact, or both.")
    max_message_bytes: int = _key("max.message.bytes", "int", 1048588, at_least(0),
                                  "Largest record batch accepted.")
    flush_messages: int = _key("flush.messages", "long", LONG_MAX, at_least(1),
                               "fsync the log after this many appended records.")
    flush_ms: int = _key("flush.ms", "long", LONG_MAX, at_least(0),
                         "fsync the log when it was last flushed this long ago.")
    message_timestamp_type: str = _key("message.timestamp.type", "string", CREATE_TIME,
                                       one_of(CREATE_TIME, LOG_APPEND_TIME),
                                       "CreateTime keeps producer timestamps; LogAppendTime "
                                       "stamps batches with broker time.")
    message_timestamp_before_max_ms: int = _key("message.timestamp.before.max.ms", "long",
                                                LONG_MAX, at_least(0),
                                                "How far in the past a CreateTime may be.")
    message_timestamp_after_max_ms: int = _key("message.timestamp.after.max.ms", "long",
                                               3600000, at_least(0),
                                               "How far in the future a CreateTime may be.")
    min_cleanable_dirty_ratio: float = _key("min.cleanable.dirty.ratio", "double", 0.5,
                                            between(0, 1),
                                            "Compact when this share of the log is dirty.")
    delete_retention_ms: int = _key("delete.retention.ms", "long", 24 * 3600 * 1000, at_least(0),
                                    "Keep tombstones this long on compacted topics.")
    min_compaction_lag_ms: int = _key("min.compaction.lag.ms", "long", 0, at_least(0),
                                      "A record stays uncompacted at least this long.")
    max_compaction_lag_ms: int = _key("max.compaction.lag.ms", "long", LONG_MAX, at_least(1),
                                      "A record becomes compactable after this long.")
    file_delete_delay_ms: int = _key("file.delete.delay.ms", "long", 60000, at_least(0),
                                     "Delay before a deleted segment's files are removed.")
    compression_type: str = _key("compression.type", "string", "producer",
                                 one_of(*COMPRESSION_TYPES), "Codec for stored batches.")
    compression_gzip_level: int = _key("compression.gzip.level", "int", -1, between(-1, 9))
    compression_lz4_level: int = _key("compression.lz4.level", "int", 9, between(1, 17))
    compression_zstd_level: int = _key("compression.zstd.level", "int", 3, between(-131072, 22))
    min_insync_replicas: int = _key("min.insync.replicas", "int", 1, at_least(1))
    unclean_leader_election_enable: bool = _key("unclean.leader.election.enable", "boolean",
                                                False)
    preallocate: bool = _key("preallocate", "boolean", False)
    leader_replication_throttled_replicas: tuple[str, ...] = _key(
        "leader.replication.throttled.replicas", "list", ())
    follower_replication_throttled_replicas: tuple[str, ...] = _key(
        "follower.replication.throttled.replicas", "list", ())
    remote_storage_enable: bool = _key("remote.storage.enable", "boolean", False)
    local_retention_ms: int = _key("local.retention.ms", "long", -2, at_least(-2))
    local_retention_bytes: int = _key("local.retention.bytes", "long", -2, at_least(-2))
    remote_log_copy_disable: bool = _key("remote.log.copy.disable", "boolean", False)
    remote_log_delete_on_disable: bool = _key("remote.log.delete.on.disable", "boolean", False)

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """A config with ``props`` (Kafka names) overriding ``base`` (default: Kafka's defaults).

        Raises ``ConfigError`` naming the key on an unknown key or a bad value.
        """
        base = base if base is not None else cls()
        changes: dict[str, Any] = {}
        unknown = sorted(k for k in props if k not in _BY_NAME)
        if unknown:
            raise ConfigError(f"Unknown topic configuration key(s): {', '.join(unknown)}")
        for name, value in props.items():
            attr = _BY_NAME[name]
            v = _DEF.convert(name, value)
            changes[attr] = tuple(v) if isinstance(v, list) else v
        return replace(base, **changes)

    def to_props(self) -> dict[str, str]:
        """Every key with its value as Kafka prints it (lists comma-joined, booleans lower)."""
        return {f.metadata["name"]: _format(getattr(self, f.name)) for f in fields(self)}

    def get(self, name: str) -> Any:
        """The typed value of a Kafka-named key (KeyError if unknown)."""
        return getattr(self, _BY_NAME[name])

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(_BY_NAME)

    @staticmethod
    def default_of(name: str) -> str:
        """Kafka's default for ``name``, as Kafka prints it (KeyError if unknown)."""
        return _format(getattr(_DEFAULT, _BY_NAME[name]))

    @staticmethod
    def config_def() -> ConfigDef:
        return _DEF

    # ------------------------------------------------------------------ derived
    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME


def _format(v: Any) -> str:
    if isinstance(v, tuple):
        return ",".join(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _build_def() -> tuple[ConfigDef, dict[str, str]]:
    cdef = ConfigDef()
    by_name: dict[str, str] = {}
    for f in fields(LogConfig):
        m = f.metadata
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        cdef.define(m["name"], m["type"], default, m["validator"], m["doc"])
        by_name[m["name"]] = f.name
    return cdef, by_name


_DEF, _BY_NAME = _build_def()
_DEFAULT = LogConfig()
