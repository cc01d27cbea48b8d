"""One member of a classic consumer group (Java: ``MemberMetadata`` / ``ClassicGroupMember``).

A member is what one JoinGroup created: its id, optional static ``group.instance.id``,
the client that sent it, its timeouts, the protocols it supports (name + the opaque
subscription metadata the leader's assignor reads) and, once the leader's SyncGroup was
persisted, its assignment.  The rebalance machinery parks at most one JoinGroup and one
SyncGroup per member: ``join_waiter`` / ``sync_waiter`` hold the coordinator's token for
the request that waits for an answer, with the request version the answer must fit.

Owned by the event-loop thread (through ``GroupCoordinator``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Waiter:
    """A parked request: the token its answer is delivered under, and its API version."""

    token: int
    version: int


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    # True from its first JoinGroup until that join completes (KIP-394: a new member that
    # vanished before getting its answer is dropped after the new-member join timeout).
    is_new: bool = False
    joined_at_ms: int = 0
    heartbeat_deadline_ms: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        """The subscription this member sent for ``protocol`` (empty if it has none)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a rejoin carries exactly the protocols (names, order, bytes) we hold."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
