"""``range`` (Java ``RangeAssignor``), the default of Java and librdkafka.

Per topic, the members subscribed to it are ordered (static members by instance id, then
member id) and the partitions are cut into contiguous ranges: with ``n`` partitions and
``m`` members, member ``i`` gets ``n // m`` partitions plus one more if ``i < n % m``.
Topics are assigned independently, so the first members of every topic may each get one
extra partition.
"""

from __future__ import annotations

from collections.abc import Mapping

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.assignors.abstract import (
    AbstractPartitionAssignor,
    member_order_key,
)
from millrace.protocol.consumer_protocol import Subscription


class RangeAssignor(AbstractPartitionAssignor):
    name = "range"

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members_by_topic: dict[str, list[str]] = {}
        for member, subscription in subscriptions.items():
            for topic in set(subscription.topics):
                members_by_topic.setdefault(topic, []).append(member)
        for topic, members in sorted(members_by_topic.items()):
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            members.sort(key=lambda m: member_order_key(m, subscriptions[m]))
            per_member, extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                assignment[member].extend(TopicPartition(topic, p)
                                          for p in range(start, start + length))
        return assignment
