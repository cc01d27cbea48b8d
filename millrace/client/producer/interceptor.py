"""Hooks around every record (Java ``ProducerInterceptor``).

``on_send`` runs on the caller's thread before serialization and may return a different
record; ``on_acknowledgement`` runs on the sender thread for every outcome -- success,
broker error, expiry -- and also when ``send`` itself fails.  Exceptions from either are
logged and ignored (the chain goes on with the previous record), as in Java.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.client.producer.producer_record import ProducerRecord, RecordMetadata


class ProducerInterceptor:
    def configure(self, configs: Mapping[str, Any]) -> None:
        """Called once with the producer's configuration."""

    def on_send(self, record: ProducerRecord[Any, Any]) -> ProducerRecord[Any, Any]:
        return record

    def on_acknowledgement(self, metadata: RecordMetadata | None,
                           exception: Exception | None) -> None:
        """Keep this fast: it runs on the sender thread."""

    def close(self) -> None:
        pass
