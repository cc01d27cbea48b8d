"""DescribeLogDirs (the body of ``KafkaAdminClient.describe_log_dirs``; Java's
``KafkaAdminClient.describeLogDirs``).

A broker describes only its own log dirs, so the request (Topics null: every partition)
goes to each broker asked for, one request each.  A broker not in the metadata fails the
call with BrokerNotAvailableError.  A broker's top-level error (v3+:
CLUSTER_AUTHORIZATION_FAILED) fails the call; so does an empty answer, which is how a
broker refuses before v3 (no error field) -- Java reads it the same way, since every
broker has at least one log dir.  A dir's own error (an offline dir: KAFKA_STORAGE_ERROR)
is that dir's ``LogDirDescription.error``, not the call's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.results import kafka_error
from millrace.client.admin.types import LogDirDescription, ReplicaInfo
from millrace.client.cluster import TopicPartition
from millrace.common.errors import Errors, for_code
from millrace.protocol import DescribeLogDirsRequest


def _description(result: Any) -> LogDirDescription:
    error = (kafka_error(result.error_code, None, "log dir", result.log_dir)
             if result.error_code else None)
    return LogDirDescription(
        error,
        {TopicPartition(t.name, p.partition_index):
         ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
         for t in result.topics for p in t.partitions},
        None if result.total_bytes < 0 else result.total_bytes,
        None if result.usable_bytes < 0 else result.usable_bytes)


def describe_log_dirs(net: AdminNetwork, brokers: Iterable[int], deadline_ms: int
                      ) -> dict[int, dict[str, LogDirDescription]]:
    out: dict[int, dict[str, LogDirDescription]] = {}
    for broker_id in dict.fromkeys(brokers):
        cluster = net.cluster(deadline_ms)
        node = cluster.node_by_id(broker_id)
        if node is None:
            known = ", ".join(str(n.id) for n in cluster.nodes)
            raise for_code(Errors.BROKER_NOT_AVAILABLE)(
                f"broker {broker_id} is not in the cluster (brokers: {known})")
        response, _ = net.send(DescribeLogDirsRequest(topics=None), deadline_ms, node)
        if response.error_code or not response.results:
            code = response.error_code or Errors.CLUSTER_AUTHORIZATION_FAILED
            raise for_code(code)(f"describing the log dirs of broker {broker_id}")
        out[broker_id] = {r.log_dir: _description(r) for r in response.results}
    return out
