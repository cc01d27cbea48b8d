"""Option parsing of format("millrace"): Spark's Kafka option names, clear errors."""

from __future__ import annotations

import pickle

import pytest

from millrace.client.cluster import TopicPartition as TP
from millrace.common.errors import ConfigError
from millrace.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    SinkOptions,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(streaming: bool = True, **options: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, **options}, streaming=streaming)


def test_defaults_follow_spark_kafka_source() -> None:
    stream = source(subscribe="orders")
    assert stream.strategy == Subscribe(("orders",))
    assert stream.starting == LatestOffsets() and stream.ending is None
    assert stream.fail_on_data_loss and not stream.include_headers
    assert stream.max_offsets_per_trigger is None and stream.min_partitions is None
    batch = source(False, subscribe="orders")
    assert batch.starting == EarliestOffsets() and batch.ending == LatestOffsets()


def test_names_are_case_insensitive_and_values_parsed() -> None:
    opts = SourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": " a, b ,a",
                                "MAXOFFSETSPERTRIGGER": "500", "minPartitions": "8",
                                "failOnDataLoss": "FALSE", "includeHeaders": "true",
                                "kafkaConsumer.pollTimeoutMs": "5000"}, streaming=True)
    assert opts.strategy == Subscribe(("a", "b"))
    assert opts.max_offsets_per_trigger == 500 and opts.min_partitions == 8
    assert not opts.fail_on_data_loss and opts.include_headers
    assert opts.poll_timeout_ms == 5000


def test_strategies() -> None:
    pattern = source(subscribePattern="orders-.*").strategy
    assert pattern == SubscribePattern("orders-.*")
    assert pattern.matches("orders-eu") and not pattern.matches("x-orders-eu")
    assign = source(assign='{"b":[1,0],"a":[2]}').strategy
    assert assign == Assign((TP("a", 2), TP("b", 0), TP("b", 1)))


@pytest.mark.parametrize("options, message", [
    ({}, "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign'.*got none"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, r"Exactly one.*got subscribe, assign"),
    ({"subscribe": " , "}, "option 'subscribe': no topics"),
    ({"subscribePattern": "("}, "option 'subscribePattern': not a regular expression"),
    ({"assign": "[0]"}, "option 'assign': expected JSON like"),
    ({"assign": '{"a":[-1]}'}, "option 'assign'.*not a partition number"),
    ({"assign": '{"a":[]}'}, "option 'assign': no partitions"),
])
def test_strategy_errors_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        source(**options)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(ConfigError, match=r"'kafka.bootstrap.servers' must be specified"):
        SourceOptions.parse({"subscribe": "a"}, streaming=True)


def test_offset_specs() -> None:
    spec = source(subscribe="a", startingOffsets=' {"a":{"0":23,"1":-2,"2":-1}}').starting
    assert spec == SpecificOffsets({TP("a", 0): 23, TP("a", 1): -2, TP("a", 2): -1})
    assert source(subscribe="a", startingOffsets="EARLIEST").starting == EarliestOffsets()
    assert source(subscribe="a", startingTimestamp="1700000000000",
                  startingOffsets="earliest").starting == GlobalTimestamp(1700000000000)
    by_ts = source(subscribe="a", startingOffsetsByTimestamp='{"a":{"0":5}}').starting
    assert by_ts == SpecificTimestamps({TP("a", 0): 5})
    batch = source(False, subscribe="a", endingOffsets='{"a":{"0":-1,"1":7}}')
    assert batch.ending == SpecificOffsets({TP("a", 0): -1, TP("a", 1): 7})
    assert source(False, subscribe="a", endingTimestamp="9").ending == GlobalTimestamp(9)


@pytest.mark.parametrize("streaming, options, message", [
    (True, {"startingOffsets": "soon"}, "option 'startingOffsets': expected JSON like"),
    (True, {"startingOffsets": '{"a":{"x":1}}'}, "partition 'x' of topic 'a'"),
    (True, {"startingOffsets": '{"a":{"0":-3}}'}, "must be an integer >= -2"),
    (True, {"endingOffsets": "latest"}, "'endingoffsets' is not valid in streaming queries"),
    (False, {"startingOffsets": "latest"}, "batch query cannot start at the latest"),
    (False, {"startingOffsets": '{"a":{"0":-1}}'}, "-1 \\(latest\\) is not a valid starting"),
    (False, {"endingOffsets": "earliest"}, "cannot end at the earliest"),
    (False, {"endingOffsets": '{"a":{"0":-2}}'}, "-2 \\(earliest\\) is not a valid ending"),
    (True, {"startingTimestamp": "-5"}, "option 'startingTimestamp'"),
    (True, {"startingOffsetsByTimestampStrategy": "closest"},
     "'startingOffsetsByTimestampStrategy': must be 'error' or 'latest'"),
    (True, {"maxOffsetsPerTrigger": "0"}, "option 'maxOffsetsPerTrigger': must be a positive"),
    (True, {"minPartitions": "many"}, "option 'minPartitions': must be a positive"),
    (True, {"maxPartitions": "0"}, "option 'maxPartitions': must be a positive"),
    (True, {"minPartitions": "4", "maxPartitions": "2"}, "'maxPartitions' \\(2\\) is below"),
    (True, {"failOnDataLoss": "yes"}, "option 'failOnDataLoss': must be 'true' or 'false'"),
    (True, {"includeHeaders": "1"}, "option 'includeHeaders'"),
    (True, {"startingOfsets": "earliest"}, "Unknown option 'startingofsets'"),
    (True, {"minOffsetsPerTrigger": "5"}, "'minoffsetspertrigger' is not supported"),
])
def test_invalid_values_name_the_option(streaming: bool, options: dict[str, str],
                                        message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        source(streaming, subscribe="a", **options)


def test_offsets_outside_assign_are_refused() -> None:
    with pytest.raises(ConfigError, match="partitions b-0 are not in 'assign'"):
        source(assign='{"a":[0]}', startingOffsets='{"a":{"0":1},"b":{"0":1}}')


@pytest.mark.parametrize("name", ["group.id", "auto.offset.reset", "enable.auto.commit",
                                  "key.deserializer", "value.deserializer",
                                  "interceptor.classes"])
def test_consumer_settings_the_source_owns_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=f"Kafka option 'kafka.{name}' is not supported: "):
        source(subscribe="a", **{f"kafka.{name}": "x"})


def test_kafka_options_pass_through_checked_by_the_consumer_config() -> None:
    opts = source(subscribe="a", **{"kafka.isolation.level": "read_committed",
                                    "kafka.max.poll.records": "7"})
    config = opts.consumer_config("cid")
    assert config["isolation.level"] == "read_committed" and config["max.poll.records"] == "7"
    assert config["group.id"] is None and config["enable.auto.commit"] is False
    assert config["auto.offset.reset"] == "none" and config["client.id"] == "cid"
    with pytest.raises(ConfigError, match=r"option 'kafka.isolation.level'"):
        source(subscribe="a", **{"kafka.isolation.level": "dirty"})
    with pytest.raises(ConfigError, match=r"Unknown Kafka option\(s\) 'kafka.no.such.setting'"):
        source(subscribe="a", **{"kafka.no.such.setting": "1"})


def test_ignored_spark_options_and_pickling() -> None:
    opts = source(subscribe="a", groupIdPrefix="x", checkpointLocation="/tmp/x",
                  startingOffsets='{"a":{"0":1}}')
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_sink_options() -> None:
    sink = SinkOptions.parse({**BOOT, "topic": "out", "kafka.linger.ms": "0"})
    assert sink.topic == "out"
    config = sink.producer_config("cid")
    assert config["acks"] == "all" and config["linger.ms"] == "0"
    assert SinkOptions.parse(BOOT).topic is None
    with pytest.raises(ConfigError, match=r"'kafka.value.serializer' is not supported"):
        SinkOptions.parse({**BOOT, "kafka.value.serializer": "x"})
    with pytest.raises(ConfigError, match=r"option 'kafka.acks'"):
        SinkOptions.parse({**BOOT, "kafka.acks": "most"})
    with pytest.raises(ConfigError, match="Unknown option 'topik'"):
        SinkOptions.parse({**BOOT, "topik": "out"})
    registry = {**BOOT, "topic": "out", "schema.registry.url": "http://127.0.0.1:8081"}
    for fmt in ("avro", "json-schema", "protobuf"):
        assert SinkOptions.parse({**registry, "valueFormat": fmt}).value_format.format == fmt
    with pytest.raises(ConfigError, match="'valueFormat': one of avro, json-schema, protobuf"):
        SinkOptions.parse({**registry, "valueFormat": "thrift"})
