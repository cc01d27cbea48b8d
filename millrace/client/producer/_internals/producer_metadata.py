"""Metadata narrowed to the topics this producer sends to (Java ``ProducerMetadata``).

A topic joins when ``send`` first needs it (which requests an update at once) and
leaves after ``metadata.max.idle.ms`` without sends, so a long-lived producer does not
keep refreshing topics it no longer uses.
"""

from __future__ import annotations

import threading

from millrace.client.cluster import Cluster
from millrace.client.metadata import Metadata


class ProducerMetadata(Metadata):
    def __init__(self, refresh_backoff_ms: int = 100, refresh_backoff_max_ms: int = 1000,
                 metadata_max_age_ms: int = 300_000,
                 metadata_max_idle_ms: int = 300_000) -> None:
        super().__init__(refresh_backoff_ms, refresh_backoff_max_ms, metadata_max_age_ms)
        self._idle_ms = metadata_max_idle_ms
        # topic -> expiry ms; guarded by _topics_lock, except on KafkaProducer.send's
        # per-record path, which reads _cluster and touches an existing key without it
        # (the store of an existing key is atomic, and expiry is only a hint)
        self._topics: dict[str, int] = {}
        self._topics_lock = threading.Lock()

    def add(self, topic: str, now_ms: int) -> None:
        """Track ``topic``; a new one triggers an update."""
        with self._topics_lock:
            new = topic not in self._topics
            self._topics[topic] = now_ms + self._idle_ms
        if new:
            self.request_update_for_new_topics()

    def touch(self, topic: str, now_ms: int) -> bool:
        """Record a send to ``topic``; False if it is not tracked (call ``add``).

        On the per-record path: one dict lookup and store, no lock (the store of an
        existing key is atomic, and expiry is only a hint)."""
        if topic in self._topics:
            self._topics[topic] = now_ms + self._idle_ms
            return True
        return False

    def contains_topic(self, topic: str) -> bool:
        return topic in self._topics

    def metadata_request_topics(self, now_ms: int) -> list[str] | None:
        with self._topics_lock:
            return list(self._topics)

    def on_update(self, cluster: Cluster, now_ms: int) -> None:
        with self._topics_lock:
            for topic, expiry in list(self._topics.items()):
                if expiry <= now_ms:
                    del self._topics[topic]
