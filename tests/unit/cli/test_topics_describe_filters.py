"""``topics describe --under-replicated-partitions / --unavailable-partitions``: which
partition lines kafka-topics' filters keep, and that a filtered listing has no header."""

from __future__ import annotations

import argparse

from millrace.cli.topics import _describe_line, _wanted
from millrace.client.admin.types import TopicDescription, TopicPartitionInfo
from millrace.client.cluster import Node

N1, N2, N3 = Node(1, "h", 1), Node(2, "h", 2), Node(3, "h", 3)
FULL = TopicPartitionInfo(0, N1, [N1, N2, N3], [N1, N2, N3])
UNDER = TopicPartitionInfo(1, N2, [N1, N2, N3], [N2])
OFFLINE = TopicPartitionInfo(2, None, [N1, N2, N3], [N3])


def args(under: bool = False, unavailable: bool = False) -> argparse.Namespace:
    return argparse.Namespace(under_replicated_partitions=under,
                              unavailable_partitions=unavailable)


def test_filters_pick_partitions() -> None:
    parts = [FULL, UNDER, OFFLINE]
    assert [p.partition for p in parts if _wanted(p, args())] == [0, 1, 2]
    assert [p.partition for p in parts if _wanted(p, args(under=True))] == [1, 2]
    assert [p.partition for p in parts if _wanted(p, args(unavailable=True))] == [2]


def test_a_filtered_listing_prints_partition_lines_only() -> None:
    d = TopicDescription("t", None, False, [FULL, UNDER, OFFLINE])
    assert _describe_line(d, None, [OFFLINE], header=False) == [
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 1,2,3\tIsr: 3"]
    lines = _describe_line(d, None, [FULL])
    assert lines[0].startswith("Topic: t\tTopicId: -\tPartitionCount: 3\tReplicationFactor: 3")
    assert lines[1] == "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"
