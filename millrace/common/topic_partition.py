"""``TopicPartition``: the name of one partition of one topic (Java
``org.apache.kafka.common.TopicPartition``).

It lives below ``protocol`` so that payloads declared there (the consumer protocol's
subscriptions and assignments) can hand out the same value the clients use.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
