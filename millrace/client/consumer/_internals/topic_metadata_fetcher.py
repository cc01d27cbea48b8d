"""``list_topics``: every topic's partitions from a MetadataRequest of its own (Java
``TopicMetadataFetcher``).

The answer goes to the caller, not into the consumer's ``Metadata``: a listing is not a
refresh, so it neither waits for the refresh backoff (``retry.backoff.ms`` after the last
refresh, which made back-to-back listings take 100 ms each) nor replaces the cached
cluster the fetcher and the coordinator work from.  A retriable failure (disconnect, a topic
still electing its leader) is retried after ``retry.backoff.ms`` until the timeout.
"""

from __future__ import annotations

import logging

from millrace.client.cluster import Cluster, PartitionInfo
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.request_future import Timer
from millrace.client.metadata import cluster_from_response
from millrace.common.errors import Errors, for_code
from millrace.common.time import Time
from millrace.protocol import MetadataRequest

log = logging.getLogger(__name__)


class TopicMetadataFetcher:
    def __init__(self, client: ConsumerNetworkClient, time: Time, *,
                 retry_backoff_ms: int = 100) -> None:
        self._client = client
        self._time = time
        self._retry_backoff_ms = retry_backoff_ms

    def all_topics(self, timeout_ms: float, include_internal: bool = False
                   ) -> dict[str, list[PartitionInfo]]:
        """Topic -> its partitions, sorted by topic; ``KafkaTimeoutError`` after
        ``timeout_ms`` without a complete answer."""
        timer = Timer(self._time, timeout_ms)
        while True:
            cluster = self._request(timer)
            if cluster is not None:
                return {t: sorted(cluster.partitions_for_topic(t), key=lambda p: p.partition)
                        for t in sorted(cluster.topics)
                        if include_internal or t not in cluster.internal_topics}
            timer.update()
            if timer.is_expired():
                raise self._client.metadata.timeout_error(
                    f"Timeout of {int(timeout_ms)}ms expired before the list of topics could "
                    "be fetched", timeout_ms)
            self._client.sleep(min(self._retry_backoff_ms, timer.remaining_ms))

    def _request(self, timer: Timer) -> Cluster | None:
        """One attempt: the cluster, or None when a retriable failure says to try again."""
        node = self._client.least_loaded_node()
        if node is None:
            log.debug("no node to ask for the list of topics yet")
            return None
        future = self._client.send(node, MetadataRequest(topics=None,
                                                         allow_auto_topic_creation=False),
                                   min_version=1)
        if not self._client.poll_until(future, timer.remaining_ms):
            return None
        if future.failed():
            if not future.is_retriable():
                raise future.exception
            log.debug("listing topics at node %s failed (%s); will retry", node,
                      future.exception)
            return None
        cluster, _ = cluster_from_response(future.value.body, Cluster.empty())
        retry = False
        for topic, code in cluster.topic_errors.items():
            if code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
                continue  # deleted between the broker's listing and its lookup
            cls = for_code(code)
            if not cls.retriable:
                raise cls(f"{cls.name} for topic {topic}")
            retry = True
        return None if retry else cluster
