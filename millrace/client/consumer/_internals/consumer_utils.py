"""Wiring the consumer's parts from its configuration (Java ``ConsumerUtils`` and the
constructor of ``ClassicKafkaConsumer``).

``create_components`` builds, in dependency order, ``SubscriptionState`` ->
``ConsumerMetadata`` -> ``NetworkClient`` wrapped in ``ConsumerNetworkClient`` ->
``Fetcher``, ``OffsetFetcher`` and (with a ``group.id``) ``ConsumerCoordinator``.  If anything
fails after the network client exists, its sockets are closed before the error propagates.
Class-valued settings (interceptors, deserializers, assignors) are resolved by the caller,
before any socket is opened, so a bad class name never leaks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millrace.client.client_utils import create_network_client
from millrace.client.consumer._internals.consumer_coordinator import ConsumerCoordinator
from millrace.client.consumer._internals.consumer_metadata import ConsumerMetadata
from millrace.client.consumer._internals.consumer_metrics import (
    GroupCoordinatorMetrics,
    KafkaConsumerMetrics,
)
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.fetch_metrics import FetchMetrics
from millrace.client.consumer._internals.fetcher import Fetcher
from millrace.client.consumer._internals.offset_fetcher import OffsetFetcher
from millrace.client.consumer._internals.subscription_state import (
    OffsetResetStrategy,
    SubscriptionState,
)
from millrace.client.consumer._internals.topic_metadata_fetcher import TopicMetadataFetcher
from millrace.client.consumer.assignors import ConsumerPartitionAssignor
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.consumer.interceptor import ConsumerInterceptors
from millrace.client.metadata import parse_bootstrap_servers
from millrace.client.metrics import Metrics, load_reporters
from millrace.client.serialization import Deserializer
from millrace.common.time import Time


@dataclass
class ConsumerComponents:
    subscriptions: SubscriptionState
    metadata: ConsumerMetadata
    client: ConsumerNetworkClient
    metrics: Metrics
    fetch_metrics: FetchMetrics
    poll_metrics: KafkaConsumerMetrics
    fetcher: Fetcher
    offset_fetcher: OffsetFetcher
    topic_metadata_fetcher: TopicMetadataFetcher
    coordinator: ConsumerCoordinator | None


def create_components(cfg: ConsumerConfig, *, client_id: str, time: Time,
                      key_deserializer: Deserializer[Any],
                      value_deserializer: Deserializer[Any],
                      interceptors: ConsumerInterceptors,
                      assignors: list[ConsumerPartitionAssignor],
                      selector: Any = None) -> ConsumerComponents:
    v = cfg.values
    subscriptions = SubscriptionState(OffsetResetStrategy.of(v["auto.offset.reset"]))
    metadata = ConsumerMetadata(
        subscriptions, retry_backoff_ms=v["retry.backoff.ms"],
        retry_backoff_max_ms=v["retry.backoff.max.ms"],
        metadata_max_age_ms=v["metadata.max.age.ms"],
        include_internal_topics=not v["exclude.internal.topics"],
        allow_auto_topic_creation=v["allow.auto.create.topics"])
    metadata.bootstrap(parse_bootstrap_servers(v["bootstrap.servers"]))
    network = create_network_client(v, metadata, client_id=client_id,
                                    max_in_flight_requests_per_connection=100, time=time,
                                    selector=selector)
    client = ConsumerNetworkClient(network, metadata, time, v["request.timeout.ms"],
                                   v["retry.backoff.ms"])
    try:
        metrics = Metrics(time, v["metrics.sample.window.ms"], v["metrics.num.samples"],
                          namespace="kafka.consumer", tags={"client-id": client_id},
                          reporters=load_reporters(v["metric.reporters"], v))
        fetch_metrics = FetchMetrics(metrics)
        poll_metrics = KafkaConsumerMetrics(metrics)
        coordinator_metrics = GroupCoordinatorMetrics(metrics)
        coordinator_metrics.add_assigned_partitions(subscriptions.num_assigned_partitions)
        fetcher = Fetcher(
            client, metadata, subscriptions,
            fetch_min_bytes=v["fetch.min.bytes"], fetch_max_bytes=v["fetch.max.bytes"],
            fetch_max_wait_ms=v["fetch.max.wait.ms"],
            max_partition_fetch_bytes=v["max.partition.fetch.bytes"],
            max_poll_records=v["max.poll.records"], check_crcs=v["check.crcs"],
            isolation_level=cfg.isolation_level, client_rack=v["client.rack"],
            key_deserializer=key_deserializer, value_deserializer=value_deserializer,
            request_timeout_ms=v["request.timeout.ms"], metrics=fetch_metrics)
        offset_fetcher = OffsetFetcher(
            client, metadata, subscriptions, time, isolation_level=cfg.isolation_level,
            request_timeout_ms=v["request.timeout.ms"], retry_backoff_ms=v["retry.backoff.ms"])
        topic_metadata_fetcher = TopicMetadataFetcher(client, time,
                                                      retry_backoff_ms=v["retry.backoff.ms"])
        coordinator = None
        if v["group.id"] is not None:
            coordinator = ConsumerCoordinator(
                client, metadata, subscriptions, assignors, time,
                group_id=v["group.id"], group_instance_id=v["group.instance.id"],
                client_id=client_id, client_rack=v["client.rack"] or None,
                session_timeout_ms=v["session.timeout.ms"],
                rebalance_timeout_ms=v["max.poll.interval.ms"],
                heartbeat_interval_ms=v["heartbeat.interval.ms"],
                retry_backoff_ms=v["retry.backoff.ms"],
                request_timeout_ms=v["request.timeout.ms"],
                auto_commit_enabled=v["enable.auto.commit"],
                auto_commit_interval_ms=v["auto.commit.interval.ms"],
                leave_group_on_close=v["internal.leave.group.on.close"],
                interceptors=interceptors, require_stable=cfg.isolation_level == 1,
                metrics=coordinator_metrics)
    except BaseException:
        client.close()
        raise
    return ConsumerComponents(subscriptions, metadata, client, metrics, fetch_metrics,
                              poll_metrics, fetcher, offset_fetcher, topic_metadata_fetcher, coordinator)
