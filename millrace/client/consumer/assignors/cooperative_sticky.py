"""``cooperative-sticky`` (Java ``CooperativeStickyAssignor``, KIP-429).

The sticky algorithm over what each member owns *now* (``owned_partitions`` and
``generation_id`` of the Subscription; for old subscription versions the generation comes
from ``user_data``, an int32).  Then the two-phase rule: a partition the new assignment moves
from a current member to another is left out of the new owner's assignment.  The old owner,
seeing it missing from its own assignment, revokes it and rejoins; the follow-up rebalance
hands the now free partition to its new owner.  No partition is ever owned by two members at
once, and partitions that do not move are never revoked.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from millrace.client.consumer.assignors.abstract import (
    ConsumerGroupMetadata,
    RebalanceProtocol,
)
from millrace.client.consumer.assignors.sticky import AbstractStickyAssignor, MemberData
from millrace.protocol.consumer_protocol import Assignment, Subscription

_GENERATION = struct.Struct(">i")


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"

    def __init__(self) -> None:
        self._generation = -1

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def on_assignment(self, assignment: Assignment, metadata: ConsumerGroupMetadata) -> None:
        self._generation = metadata.generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return _GENERATION.pack(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        generation: int | None = subscription.generation_id
        if generation is None or generation < 0:
            data = subscription.user_data
            generation = _GENERATION.unpack_from(data)[0] if data and len(data) >= 4 \
                else None
        return MemberData(list(subscription.owned_partitions), generation)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        result = self.sticky_assign(partitions_per_topic, subscriptions)
        owners = result.previous_owners
        return {member: Assignment([tp for tp in result.assignment.get(member, ())
                                    if owners.get(tp, member) == member])
                for member in subscriptions}
