"""Custom partitioning (Java ``Partitioner``), set with ``partitioner.class``.

Without one the producer uses the built-in partitioner (murmur2 for keys, KIP-794
uniform sticky otherwise).  ``RoundRobinPartitioner`` is Kafka's alternative that cycles
through the available partitions record by record.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from typing import Any

from millrace.client.cluster import Cluster


class Partitioner:
    def configure(self, configs: Mapping[str, Any]) -> None:
        """Called once with the producer's configuration."""

    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
                  value_bytes: bytes | None, cluster: Cluster) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RoundRobinPartitioner(Partitioner):
    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
                  value_bytes: bytes | None, cluster: Cluster) -> int:
        with self._lock:
            counter = self._counters.setdefault(topic, itertools.count())
            n = next(counter)
        available = cluster.available_partitions_for_topic(topic)
        if available:
            return available[n % len(available)].partition
        return n % (cluster.partition_count(topic) or 1)
