"""The assignor contract (Java ``ConsumerPartitionAssignor`` / ``AbstractPartitionAssignor``).

The group leader runs one assignor -- the protocol the coordinator chose, the first in every
member's preference list that all members support -- over all members' subscriptions:
``assign(partitions_per_topic, subscriptions) -> {member_id: Assignment}``.  Topics missing
from ``partitions_per_topic`` (unknown to the leader's metadata) are not assigned.

``supported_protocols`` says whether the assignor works with the EAGER protocol (every member
revokes everything before rejoining) or also the COOPERATIVE one (KIP-429: members keep
their partitions while rejoining and revoke only those the assignment moves away; moved
partitions are given to their new owner in a follow-up rebalance).  A consumer whose
assignors do not all support COOPERATIVE behaves eagerly, as Java does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import ClassVar, NamedTuple

from millrace.client.cluster import TopicPartition
from millrace.protocol.consumer_protocol import Assignment, Subscription


class RebalanceProtocol(enum.IntEnum):
    EAGER = 0
    COOPERATIVE = 1


class ConsumerGroupMetadata(NamedTuple):
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ConsumerPartitionAssignor:
    name: ClassVar[str] = ""

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER]

    def version(self) -> int:
        return 0

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """Extra bytes sent in this member's Subscription."""
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        raise NotImplementedError

    def on_assignment(self, assignment: Assignment, metadata: ConsumerGroupMetadata) -> None:
        """Called on every member with its own assignment after each rebalance."""


class AbstractPartitionAssignor(ConsumerPartitionAssignor):
    """Assignors that only need each member's topics implement ``assign_partitions``."""

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        raw = self.assign_partitions(partitions_per_topic, subscriptions)
        return {member: Assignment(sorted(raw.get(member, ()))) for member in subscriptions}

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError


def member_order_key(member_id: str, subscription: Subscription) -> tuple[int, str, str]:
    """Java's ``MemberInfo`` order: static members first (by instance id), then member id."""
    instance = subscription.group_instance_id
    return (0, instance, member_id) if instance is not None else (1, "", member_id)


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def subscribed_partitions(partitions_per_topic: Mapping[str, int],
                          topics: Iterable[str]) -> list[TopicPartition]:
    """Every existing partition of ``topics``, sorted."""
    out = []
    for topic in sorted(set(topics)):
        count = partitions_per_topic.get(topic)
        if count:
            out.extend(partitions_of(topic, count))
    return out
