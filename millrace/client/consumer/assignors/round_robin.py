"""``roundrobin`` (Java ``RoundRobinAssignor``).

All partitions of all subscribed topics, sorted by topic then partition, are dealt one at a
time to the members in order (static members by instance id, then member id), skipping a
member that is not subscribed to the partition's topic.  With identical subscriptions the
counts differ by at most one.
"""

from __future__ import annotations

from collections.abc import Mapping

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.assignors.abstract import (
    AbstractPartitionAssignor,
    member_order_key,
    subscribed_partitions,
)
from millrace.protocol.consumer_protocol import Subscription


class RoundRobinAssignor(AbstractPartitionAssignor):
    name = "roundrobin"

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions, key=lambda m: member_order_key(m, subscriptions[m]))
        if not members:
            return assignment
        topics_of = {m: set(subscriptions[m].topics) for m in members}
        all_topics = set().union(*topics_of.values())
        i = 0
        for tp in subscribed_partitions(partitions_per_topic, all_topics):
            while tp.topic not in topics_of[members[i % len(members)]]:
                i += 1
            assignment[members[i % len(members)]].append(tp)
            i += 1
        return assignment
