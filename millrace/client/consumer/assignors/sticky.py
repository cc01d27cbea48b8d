"""``sticky`` (Java ``StickyAssignor``) and the algorithm shared with ``cooperative-sticky``.

Goals, in order: every partition of a subscribed topic goes to exactly one member that
subscribes to its topic; the counts are as balanced as possible; as many partitions as
possible stay where they were (each member reports what it owned).

How (this implementation's own algorithm, not a port of Java's):

1. *Previous owners.*  Every member's claims are collected; a partition's owner is the
   claimant with the highest generation.  Two claims in the same generation cancel out
   (the partition is treated as free), and claims for topics a member no longer subscribes
   to, or for partitions that no longer exist, are dropped.
2. *Identical subscriptions* (the usual case) get exact quotas: with ``P`` partitions and
   ``M`` members everyone ends with ``P // M`` and ``P % M`` members with one more.  Members
   keep up to their quota of what they own (those owning the most keep the larger quota);
   the rest is dealt to the members below quota.
3. *Different subscriptions*: members keep what they own, free partitions go (most
   constrained first) to the eligible member with the fewest, then single partitions move
   from a member to an eligible one with at least two fewer until no such move exists
   (each move lowers the sum of squared counts, so this ends).

``StickyAssignor`` (eager) sends its last assignment and generation in ``user_data`` in
Kafka's layout (``[topic STRING, [int32]]``, then ``generation int32``), because an eager
member has revoked everything by the time it sends ``owned_partitions``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.assignors.abstract import (
    AbstractPartitionAssignor,
    ConsumerGroupMetadata,
    subscribed_partitions,
)
from millrace.common.errors import ProtocolDecodeError
from millrace.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
)


class MemberData(NamedTuple):
    owned: list[TopicPartition]
    generation: int | None


class StickyResult(NamedTuple):
    assignment: dict[str, list[TopicPartition]]
    previous_owners: dict[TopicPartition, str]


class AbstractStickyAssignor(AbstractPartitionAssignor):
    def member_data(self, subscription: Subscription) -> MemberData:
        raise NotImplementedError

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        return self.sticky_assign(partitions_per_topic, subscriptions).assignment

    def sticky_assign(self, partitions_per_topic: Mapping[str, int],
                      subscriptions: Mapping[str, Subscription]) -> StickyResult:
        members = sorted(subscriptions)
        topics_of = {m: {t for t in subscriptions[m].topics if partitions_per_topic.get(t)}
                     for m in members}
        all_partitions = subscribed_partitions(partitions_per_topic,
                                               set().union(*topics_of.values())
                                               if members else ())
        owners = self._previous_owners(members, subscriptions, topics_of, set(all_partitions))
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
        free: list[TopicPartition] = []
        for tp in all_partitions:
            owner = owners.get(tp)
            if owner is None:
                free.append(tp)
            else:
                assignment[owner].append(tp)
        if members and all(topics_of[m] == topics_of[members[0]] for m in members):
            _constrained(assignment, free, len(all_partitions))
        else:
            _general(assignment, free, all_partitions, topics_of)
        for parts in assignment.values():
            parts.sort()
        return StickyResult(assignment, owners)

    def _previous_owners(self, members: list[str], subscriptions: Mapping[str, Subscription],
                         topics_of: Mapping[str, set[str]], existing: set[TopicPartition]
                         ) -> dict[TopicPartition, str]:
        owner: dict[TopicPartition, str] = {}
        owner_generation: dict[TopicPartition, int] = {}
        contested: set[TopicPartition] = set()
        for member in members:
            data = self.member_data(subscriptions[member])
            generation = data.generation if data.generation is not None else -1
            for tp in dict.fromkeys(data.owned):
                if tp not in existing or tp.topic not in topics_of[member]:
                    continue
                seen = owner_generation.get(tp)
                if seen is None or generation > seen:
                    owner[tp] = member
                    owner_generation[tp] = generation
                    contested.discard(tp)
                elif generation == seen:
                    contested.add(tp)
        for tp in contested:
            del owner[tp]
        return owner


def _constrained(assignment: dict[str, list[TopicPartition]], free: list[TopicPartition],
                 total: int) -> None:
    """Identical subscriptions: exact quotas, keeping owned partitions where possible."""
    members = list(assignment)
    min_quota, extra = divmod(total, len(members))
    max_quota = min_quota + (1 if extra else 0)
    max_slots = extra
    for member in sorted(members, key=lambda m: (-len(assignment[m]), m)):
        owned = assignment[member]
        if extra and len(owned) >= max_quota and max_slots > 0:
            keep = max_quota
            max_slots -= 1
        else:
            keep = min(len(owned), min_quota)
        free.extend(owned[keep:])
        del owned[keep:]
    queue = deque(sorted(free))
    for member in sorted(members, key=lambda m: (len(assignment[m]), m)):
        while len(assignment[member]) < min_quota:
            assignment[member].append(queue.popleft())
    for member in sorted(members, key=lambda m: (len(assignment[m]), m)):
        if not queue or max_slots == 0:
            break
        if len(assignment[member]) < max_quota:
            assignment[member].append(queue.popleft())
            max_slots -= 1
    assert not queue, "sticky assignment left partitions unassigned"


def _general(assignment: dict[str, list[TopicPartition]], free: list[TopicPartition],
             all_partitions: list[TopicPartition], topics_of: Mapping[str, set[str]]) -> None:
    """Different subscriptions: greedy placement, then single moves while they help."""
    eligible = {tp: [m for m in assignment if tp.topic in topics_of[m]]
                for tp in all_partitions}
    counts = {m: len(ps) for m, ps in assignment.items()}
    current = {tp: m for m, ps in assignment.items() for tp in ps}
    for tp in sorted(free, key=lambda tp: (len(eligible[tp]), tp)):
        member = min(eligible[tp], key=lambda m: (counts[m], m))
        current[tp] = member
        counts[member] += 1
    moved = True
    while moved:
        moved = False
        for tp in all_partitions:
            owner = current[tp]
            target = min(eligible[tp], key=lambda m: (counts[m], m))
            if counts[owner] - counts[target] > 1:
                current[tp] = target
                counts[owner] -= 1
                counts[target] += 1
                moved = True
    for ps in assignment.values():
        ps.clear()
    for tp in all_partitions:
        assignment[current[tp]].append(tp)


# ---------------------------------------------------------------------- StickyAssignor
class StickyAssignor(AbstractStickyAssignor):
    name = "sticky"

    def __init__(self) -> None:
        self._member_assignment: list[TopicPartition] | None = None
        self._generation: int | None = None

    def on_assignment(self, assignment: Assignment, metadata: ConsumerGroupMetadata) -> None:
        self._member_assignment = list(assignment.partitions)
        self._generation = metadata.generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self._member_assignment is None:
            return None
        return encode_sticky_user_data(self._member_assignment, self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.user_data:
            try:
                return MemberData(*decode_sticky_user_data(subscription.user_data))
            except ProtocolDecodeError:
                pass  # another client's user data: treat the member as owning nothing
        generation = subscription.generation_id if subscription.generation_id >= 0 else None
        return MemberData(list(subscription.owned_partitions), generation)
