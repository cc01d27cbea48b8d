"""DescribeLogDirs (35) on an in-process broker with two log dirs: what each dir reports
at each version, the Topics filter, an offline dir, and the refusal without Describe on
the Cluster (the walk in test_authz_every_api covers the refusal at every row too)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import DescribeLogDirsRequest
from millrace.security.acl import AclOperation, ResourceType
from millrace.security.kafka_principal import KafkaPrincipal
from tests.unit.broker.brokergen import AUTHORIZER, Broker, produce

Topic = DescribeLogDirsRequest.DescribableLogDirTopic


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = Broker(f"{tmp_path / 'a'},{tmp_path / 'b'}")
    b.create_topic("orders", 4)
    b.create_topic("audit", 1)
    yield b
    b.close()


def sizes(response: Any) -> dict[str, dict[tuple[str, int], tuple[int, int, bool]]]:
    """Per log dir: (topic, partition) -> (size, offset lag, is future)."""
    return {r.log_dir: {(t.name, p.partition_index): (p.partition_size, p.offset_lag,
                                                      p.is_future_key)
                        for t in r.topics for p in t.partitions}
            for r in response.results}


@pytest.mark.parametrize("version", range(5))
def test_every_hosted_partition_in_the_dir_that_holds_it(broker: Broker, tmp_path: Path,
                                                         version: int) -> None:
    asyncio.run(produce(broker, "orders", b"x" * 1000, partition=2))
    got = asyncio.run(broker.call(ApiKey.DESCRIBE_LOG_DIRS, version,
                                  DescribeLogDirsRequest(topics=None)))
    assert got.error_code == 0
    assert [r.log_dir for r in got.results] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert all(r.error_code == 0 for r in got.results)
    by_dir = sizes(got)
    merged = {tp: v for parts in by_dir.values() for tp, v in parts.items()}
    assert sum(len(parts) for parts in by_dir.values()) == len(merged)
    # the internal topics' logs are listed too, as Kafka lists them
    assert {tp for tp in merged if not tp[0].startswith("__")} == \
        {("orders", i) for i in range(4)} | {("audit", 0)}
    lm = broker.services.log_manager
    for d, parts in by_dir.items():
        assert all(lm.log_dir_of(*tp) == d for tp in parts)
    assert merged[("orders", 2)][0] > 1000
    assert merged[("orders", 2)][0] == broker.partition("orders", 2).log.size
    assert merged[("orders", 0)] == (0, 0, False)
    for r in got.results:
        if version >= 4:
            st = os.statvfs(r.log_dir)
            assert r.total_bytes == st.f_blocks * st.f_frsize
            assert 0 < r.usable_bytes <= r.total_bytes
        else:
            assert (r.total_bytes, r.usable_bytes) == (-1, -1)


def test_only_the_requested_partitions_and_unknown_ones_absent(broker: Broker) -> None:
    request = DescribeLogDirsRequest(topics=[Topic(topic="orders", partitions=[1, 3, 9]),
                                             Topic(topic="ghost", partitions=[0])])
    got = asyncio.run(broker.call(ApiKey.DESCRIBE_LOG_DIRS, 4, request))
    listed = {tp for parts in sizes(got).values() for tp in parts}
    assert listed == {("orders", 1), ("orders", 3)}
    # a dir holding none of them lists no topic at all (not a topic with no partitions)
    assert all(t.partitions for r in got.results for t in r.topics)
    got = asyncio.run(broker.call(ApiKey.DESCRIBE_LOG_DIRS, 4,
                                  DescribeLogDirsRequest(topics=[])))
    assert [r.topics for r in got.results] == [[], []]


def test_an_offline_dir_answers_a_storage_error(broker: Broker, tmp_path: Path) -> None:
    bad = str(tmp_path / "b")
    broker.services.log_manager.failure_channel.maybe_add_offline_log_dir(
        bad, "test: disk gone", OSError(5, "EIO"))
    got = asyncio.run(broker.call(ApiKey.DESCRIBE_LOG_DIRS, 4,
                                  DescribeLogDirsRequest(topics=None)))
    by_dir = {r.log_dir: r for r in got.results}
    assert by_dir[bad].error_code == Errors.KAFKA_STORAGE_ERROR
    assert (by_dir[bad].topics, by_dir[bad].total_bytes) == ([], -1)
    assert by_dir[str(tmp_path / "a")].error_code == 0


@pytest.mark.parametrize("version", range(5))
def test_without_describe_on_the_cluster_the_answer_is_empty(tmp_path: Path,
                                                             version: int) -> None:
    b = Broker(str(tmp_path / "a"), **AUTHORIZER)
    try:
        b.create_topic("orders", 1)
        bob = KafkaPrincipal.user("bob")
        request = DescribeLogDirsRequest(topics=None)
        got = asyncio.run(b.call(ApiKey.DESCRIBE_LOG_DIRS, version, request, principal=bob))
        assert got.results == []
        assert got.error_code == (Errors.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0)
        b.allow("User:bob", AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
        got = asyncio.run(b.call(ApiKey.DESCRIBE_LOG_DIRS, version, request, principal=bob))
        assert got.error_code == 0
        assert "orders" in [t.name for r in got.results for t in r.topics]
    finally:
        b.close()
