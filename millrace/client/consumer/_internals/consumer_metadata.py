"""Metadata narrowed to what the consumer reads (Java ``ConsumerMetadata``).

A refresh asks for the subscribed topics (plus, for the group leader, every member's
topics), the topics of manually assigned partitions, and "transient" topics that an
offsets or ``partitions_for`` call needs for a moment.  A pattern subscription asks for
every topic: the pattern is matched here, on the client, as classic Kafka consumers do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from millrace.client.consumer._internals.subscription_state import SubscriptionState
from millrace.client.metadata import Metadata


class ConsumerMetadata(Metadata):
    def __init__(self, subscriptions: SubscriptionState, *, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000, metadata_max_age_ms: int = 300_000,
                 include_internal_topics: bool = False,
                 allow_auto_topic_creation: bool = True) -> None:
        super().__init__(retry_backoff_ms, retry_backoff_max_ms, metadata_max_age_ms)
        self._subscriptions = subscriptions
        self.include_internal_topics = include_internal_topics
        self._allow_auto_topic_creation = allow_auto_topic_creation
        self._transient: set[str] = set()  # guarded by _transient_lock
        self._transient_lock = threading.Lock()

    def add_transient_topics(self, topics: Iterable[str]) -> None:
        with self._transient_lock:
            new = set(topics) - self._transient
            self._transient |= new
        if new and not new <= self.fetch().topics:
            self.request_update_for_new_topics()

    def clear_transient_topics(self) -> None:
        with self._transient_lock:
            self._transient.clear()

    def metadata_request_topics(self, now_ms: int) -> list[str] | None:
        if self._subscriptions.has_pattern_subscription():
            return None
        with self._transient_lock:
            topics = self._subscriptions.metadata_topics() | self._transient
        return sorted(topics)

    def allow_auto_topic_creation(self) -> bool:
        return self._allow_auto_topic_creation
