"""Metadata: bootstrap parsing, applying responses, refresh timing, waiting."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from millrace.client.cluster import Cluster, Node, PartitionInfo, TopicPartition
from millrace.client.metadata import Metadata, parse_bootstrap_servers
from millrace.client.producer._internals.producer_metadata import ProducerMetadata
from millrace.common.errors import ConfigError, InvalidTopicError
from millrace.protocol import API, ApiKey

R = API[ApiKey.METADATA].response.cls
T = R.MetadataResponseTopic
P = T.MetadataResponsePartition


def response(topics: list[Any], brokers: int = 2) -> Any:
    return R(brokers=[R.MetadataResponseBroker(node_id=i, host="h", port=9000 + i)
                      for i in range(brokers)],
             cluster_id="c", controller_id=0, topics=topics)


def topic(name: str, leaders: list[int], epoch: int = 0, error: int = 0) -> Any:
    return T(error_code=error, name=name, partitions=[
        P(error_code=0, partition_index=i, leader_id=leader, leader_epoch=epoch,
          replica_nodes=[max(leader, 0)], isr_nodes=[max(leader, 0)])
        for i, leader in enumerate(leaders)])


@pytest.mark.parametrize(("text", "expected"), [
    ("a:1", [("a", 1)]),
    ("a:1, b.example.com:9092", [("a", 1), ("b.example.com", 9092)]),
    ("[::1]:9092", [("::1", 9092)]),
    (["x:5", " y:6 "], [("x", 5), ("y", 6)]),
])
def test_bootstrap_servers(text: Any, expected: list) -> None:
    assert parse_bootstrap_servers(text) == expected


@pytest.mark.parametrize("bad", ["", "a", "a:", "a:b", "a:70000", "::1:9092", [" "]])
def test_bad_bootstrap_servers(bad: Any) -> None:
    with pytest.raises(ConfigError, match=re.escape("bootstrap.servers")):
        parse_bootstrap_servers(bad)


def test_update_builds_the_cluster_view() -> None:
    md = Metadata()
    md.bootstrap([("h", 9000)])
    assert md.fetch().is_bootstrap and [n.id for n in md.fetch().nodes] == [-1]
    md.update(response([topic("t", [0, 1, -1]), topic("bad", [], error=17),
                        topic("creating", [], error=5)]), md.request_version(), 1000)
    cluster = md.fetch()
    assert cluster.cluster_id == "c" and cluster.controller == Node(0, "h", 9000)
    assert cluster.partition_count("t") == 3
    assert cluster.leader_for(TopicPartition("t", 1)) == Node(1, "h", 9001)
    assert cluster.leader_for(TopicPartition("t", 2)) is None
    assert [p.partition for p in cluster.available_partitions_for_topic("t")] == [0, 1]
    assert [p.partition for p in cluster.partitions_for_node(1)] == [1]
    assert cluster.invalid_topics == {"bad"} and cluster.partition_count("creating") is None
    assert isinstance(md.topic_error("bad"), InvalidTopicError)
    assert md.topic_error("creating") is None  # retriable: keep waiting
    assert md.update_requested()  # a missing leader asks for another look


def test_refresh_timing_and_backoff() -> None:
    md = Metadata(refresh_backoff_ms=100, refresh_backoff_max_ms=1000,
                  metadata_max_age_ms=10_000)
    md.bootstrap([("h", 1)])
    assert md.time_to_next_update(500) == 0  # never refreshed: due at once
    md.update(response([topic("t", [0])]), md.request_version(), 1000)
    assert not md.update_requested()
    assert md.time_to_next_update(1000) == 10_000
    md.request_update()
    assert 80 <= md.time_to_next_update(1000) <= 120  # the backoff after the last refresh
    assert md.time_to_next_update(1121) == 0
    for _i in range(4):  # failures double the backoff up to the maximum
        md.failed_update(2000)
    assert 640 <= md.time_to_next_update(2000) <= 960


def test_new_topics_are_asked_for_without_the_backoff() -> None:
    md = Metadata(refresh_backoff_ms=100, metadata_max_age_ms=10_000)
    md.update(response([topic("t", [0])]), md.request_version(), 1000)
    version = md.request_update_for_new_topics()  # e.g. a first send to topic "u"
    assert md.update_requested() and md.time_to_next_update(1001) == 0
    md.update(response([topic("t", [0]), topic("u", [0])]), md.request_version(), 1001)
    assert md.update_version > version and not md.update_requested()
    md.request_update()  # anything else still waits for the backoff
    assert md.time_to_next_update(1002) > 0


def test_a_request_made_while_a_fetch_is_in_flight_stays_pending() -> None:
    md = Metadata()
    md.bootstrap([("h", 1)])
    version = md.request_version()
    md.request_update()  # e.g. NOT_LEADER_OR_FOLLOWER arrives meanwhile
    md.update(response([topic("t", [0])]), version, 0)
    assert md.update_requested()


def test_stale_leader_epochs_are_ignored() -> None:
    md = Metadata()
    md.update(response([topic("t", [1], epoch=5)]), md.request_version(), 0)
    md.update(response([topic("t", [0], epoch=4)]), md.request_version(), 1)
    assert md.fetch().leader_for(TopicPartition("t", 0)) == Node(1, "h", 9001)
    assert md.update_requested()
    md.update(response([topic("t", [0], epoch=6)]), md.request_version(), 2)
    assert md.fetch().leader_for(TopicPartition("t", 0)) == Node(0, "h", 9000)


def test_await_update_wakes_on_update_and_times_out() -> None:
    md = Metadata()
    assert not md.await_update(md.update_version, 10)
    version = md.update_version
    t = threading.Timer(0.02, lambda: md.update(response([]), md.request_version(), 0))
    t.start()
    assert md.await_update(version, 5000)
    t.join()


def test_producer_metadata_tracks_and_expires_topics() -> None:
    md = ProducerMetadata(metadata_max_idle_ms=5000)
    md._need_update = False
    assert not md.touch("t", 0)
    md.add("t", 0)
    assert md.update_requested() and md.metadata_request_topics(0) == ["t"]
    assert md.touch("t", 1000)
    md.update(response([topic("t", [0])]), md.request_version(), 5999)
    assert md.contains_topic("t")
    md.update(response([topic("t", [0])]), md.request_version(), 6000)
    assert not md.contains_topic("t")


def test_cluster_lookups() -> None:
    n = Node(3, "h", 1)
    cluster = Cluster([n], [PartitionInfo("t", 1, n), PartitionInfo("t", 0, None)])
    assert [p.partition for p in cluster.partitions_for_topic("t")] == [0, 1]
    assert cluster.partition(TopicPartition("t", 1)) == PartitionInfo("t", 1, n)
    assert cluster.partition(TopicPartition("t", 9)) is None
    assert cluster.node_by_id(3) == n and cluster.topics == {"t"}
    assert str(TopicPartition("t", 1)) == "t-1" and n.address == "h:1"
