"""Hooks around consumption (Java ``ConsumerInterceptor``).

``on_consume`` runs on the application thread just before ``poll`` returns and may return
different records (filtered, enriched); ``on_commit`` runs after offsets were committed
(synchronously or asynchronously, including auto-commits).  Interceptors are chained in
``interceptor.classes`` order; an exception from one is logged and the chain goes on with
the records it was given, as in Java.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.consumer_record import ConsumerRecords, OffsetAndMetadata

log = logging.getLogger(__name__)


class ConsumerInterceptor:
    def configure(self, configs: Mapping[str, Any]) -> None:
        """Called once with the consumer's configuration."""

    def on_consume(self, records: ConsumerRecords[Any, Any]) -> ConsumerRecords[Any, Any]:
        return records

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        pass

    def close(self) -> None:
        pass


class ConsumerInterceptors:
    """The chain (Java ``internals.ConsumerInterceptors``)."""

    def __init__(self, interceptors: Sequence[ConsumerInterceptor]) -> None:
        self.interceptors = list(interceptors)

    def on_consume(self, records: ConsumerRecords[Any, Any]) -> ConsumerRecords[Any, Any]:
        out = records
        for interceptor in self.interceptors:
            try:
                out = interceptor.on_consume(out)
            except Exception:
                log.warning("error executing interceptor on_consume callback", exc_info=True)
        return out

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        for interceptor in self.interceptors:
            try:
                interceptor.on_commit(offsets)
            except Exception:
                log.warning("error executing interceptor on_commit callback", exc_info=True)

    def close(self) -> None:
        for interceptor in self.interceptors:
            try:
                interceptor.close()
            except Exception:
                log.warning("failed to close consumer interceptor", exc_info=True)
