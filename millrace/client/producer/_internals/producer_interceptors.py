"""The chain of configured interceptors (Java ``ProducerInterceptors``)."""

from __future__ import annotations

import logging
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.producer.interceptor import ProducerInterceptor
from millrace.client.producer.producer_record import ProducerRecord, RecordMetadata

log = logging.getLogger(__name__)


class ProducerInterceptors:
    def __init__(self, interceptors: list[ProducerInterceptor]) -> None:
        self.interceptors = interceptors

    def on_send(self, record: ProducerRecord[Any, Any]) -> ProducerRecord[Any, Any]:
        intercepted = record
        for interceptor in self.interceptors:
            try:
                result = interceptor.on_send(intercepted)
            except Exception:
                log.warning("error executing interceptor on_send for topic %s, partition %s",
                            record.topic, record.partition, exc_info=True)
                continue
            if result is not None:
                intercepted = result
        return intercepted

    def on_acknowledgement(self, metadata: RecordMetadata | None,
                           exception: Exception | None) -> None:
        for interceptor in self.interceptors:
            try:
                interceptor.on_acknowledgement(metadata, exception)
            except Exception:
                log.warning("error executing interceptor on_acknowledgement", exc_info=True)

    def on_send_error(self, record: ProducerRecord[Any, Any], tp: TopicPartition | None,
                      exception: Exception) -> None:
        """``send`` failed before the record reached the buffer."""
        topic = tp.topic if tp is not None else record.topic
        partition = tp.partition if tp is not None else (
            record.partition if record.partition is not None else -1)
        metadata = RecordMetadata(topic, partition, -1, -1, -1, -1)
        self.on_acknowledgement(metadata, exception)

    def close(self) -> None:
        for interceptor in self.interceptors:
            try:
                interceptor.close()
            except Exception:
                log.warning("failed to close interceptor %r", interceptor, exc_info=True)


class InterceptorCallback:
    """Wraps a record's callback: the interceptors see the outcome first (Java
    ``KafkaProducer.AppendCallbacks``)."""

    __slots__ = ("_callback", "_interceptors")

    def __init__(self, callback: Any, interceptors: ProducerInterceptors) -> None:
        self._callback = callback
        self._interceptors = interceptors

    def __call__(self, metadata: RecordMetadata, exception: Exception | None) -> None:
        self._interceptors.on_acknowledgement(metadata, exception)
        if self._callback is not None:
            self._callback(metadata, exception)
