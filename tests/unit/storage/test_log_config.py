from __future__ import annotations

import pytest

from millrace.common.config import LONG_MAX
from millrace.common.errors import ConfigError
from millrace.storage import LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 7 * 24 * 3600 * 1000
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.cleanup_policy == ("delete",)
    assert c.max_message_bytes == 1048588
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.message_timestamp_type == "CreateTime"
    assert c.min_cleanable_dirty_ratio == 0.5
    assert c.delete_retention_ms == 86_400_000
    assert c.file_delete_delay_ms == 60_000
    assert c.min_compaction_lag_ms == 0
    assert c.compression_type == "producer"
    assert c.message_timestamp_after_max_ms == 3_600_000
    assert c.message_timestamp_before_max_ms == LONG_MAX
    assert c.delete and not c.compact


def test_from_props_converts_strings() -> None:
    c = LogConfig.from_props({"segment.bytes": "1024", "cleanup.policy": "compact,delete",
                              "min.cleanable.dirty.ratio": "0.1", "retention.ms": "-1",
                              "message.timestamp.type": "LogAppendTime",
                              "unclean.leader.election.enable": "true"})
    assert c.segment_bytes == 1024
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.min_cleanable_dirty_ratio == 0.1
    assert c.retention_ms == -1
    assert c.log_append_time
    assert c.unclean_leader_election_enable is True


def test_overrides_apply_on_top_of_a_base() -> None:
    base = LogConfig.from_props({"segment.bytes": "2048", "retention.ms": "5"})
    c = LogConfig.from_props({"retention.ms": "10"}, base)
    assert (c.segment_bytes, c.retention_ms) == (2048, 10)


@pytest.mark.parametrize("props, key", [
    ({"segment.byte": "1"}, "segment.byte"),
    ({"no.such.thing": "x"}, "no.such.thing"),
    ({"segment.bytes": "lots"}, "segment.bytes"),
    ({"segment.bytes": "3"}, "segment.bytes"),
    ({"cleanup.policy": "compact,shred"}, "cleanup.policy"),
    ({"message.timestamp.type": "WallTime"}, "message.timestamp.type"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"flush.messages": "0"}, "flush.messages"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"retention.ms": "-7"}, "retention.ms"),
    ({"preallocate": "maybe"}, "preallocate"),
])
def test_bad_key_or_value_names_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        LogConfig.from_props(props)
    assert key in str(e.value)


def test_to_props_round_trips_and_defaults_print_like_kafka() -> None:
    c = LogConfig.from_props({"cleanup.policy": "compact", "segment.ms": "99"})
    assert LogConfig.from_props(c.to_props()) == c
    assert LogConfig.default_of("cleanup.policy") == "delete"
    assert LogConfig.default_of("preallocate") == "false"
    assert "segment.bytes" in LogConfig.names()
    assert c.get("segment.ms") == 99
