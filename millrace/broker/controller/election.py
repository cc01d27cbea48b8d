"""Partition leader election: who leads a partition next, and with which ISR.

Java counterpart: ``PartitionLeaderElectionAlgorithms`` and ``Election`` (Kafka's
``core/.../controller``).  Pure functions over plain values; the controller supplies the
assignment (AR, the preferred leader first), the current ISR and the set of brokers that
count as live for the strategy, and writes the answer with a conditional ZooKeeper write.

| Strategy            | Leader                                           | New ISR                  |
|---------------------|--------------------------------------------------|--------------------------|
| New partition       | first live AR replica                            | live AR replicas         |
| Offline, clean      | first AR replica that is live and in the ISR     | ISR and live              |
| Offline, unclean    | first live AR replica (only when enabled and no  | [leader], RECOVERING     |
|                     | ISR member is live)                              |                          |
| Preferred           | AR[0], only if live and in the ISR               | unchanged                |
| Controlled shutdown | first AR replica live, in the ISR, not shutting  | ISR - shutting down      |
|                     | down                                             |                          |

Every function returns ``None`` when no replica qualifies: the partition keeps (or gets)
no leader, and the caller reports the failure.  Unclean election trades acknowledged data
for availability (Jepsen 2013), so it is off unless ``unclean.leader.election.enable``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum


class LeaderRecoveryState(Enum):
    """KIP-704: RECOVERING marks a leader elected uncleanly until its ISR grows again."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class ElectedLeader:
    """The outcome of one election: the new leader, the new ISR, its recovery state."""

    leader: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED


def new_partition_leader(assignment: Sequence[int],
                         live: Collection[int]) -> ElectedLeader | None:
    """A partition without state yet: the first live replica leads, the live ones are in sync."""
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return None
    return ElectedLeader(live_replicas[0], live_replicas)


def offline_partition_leader(assignment: Sequence[int], isr: Sequence[int],
                             live: Collection[int], unclean_enabled: bool,
                             recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
                             ) -> ElectedLeader | None:
    """The leader is gone: the first live in-sync replica; failing that, only when unclean
    election is enabled, the first live replica, alone in the ISR and RECOVERING."""
    clean = next((r for r in assignment if r in live and r in isr), None)
    if clean is not None:
        return ElectedLeader(clean, tuple(r for r in isr if r in live), recovery_state)
    if not unclean_enabled:
        return None
    unclean = next((r for r in assignment if r in live), None)
    if unclean is None:
        return None
    return ElectedLeader(unclean, (unclean,), LeaderRecoveryState.RECOVERING)


def preferred_replica_leader(assignment: Sequence[int], isr: Sequence[int],
                             live: Collection[int]) -> ElectedLeader | None:
    """Give leadership back to AR[0], if it is live and in sync; the ISR stays as it is."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return ElectedLeader(preferred, tuple(isr))
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int],
                               live_or_shutting_down: Collection[int],
                               shutting_down: Collection[int]) -> ElectedLeader | None:
    """Move leadership off brokers that are shutting down, to an in-sync replica that stays."""
    leader = next((r for r in assignment if r in live_or_shutting_down and r in isr
                   and r not in shutting_down), None)
    if leader is None:
        return None
    return ElectedLeader(leader, tuple(r for r in isr if r not in shutting_down))


def reassignment_leader(target_replicas: Sequence[int], isr: Sequence[int],
                        live: Collection[int]) -> ElectedLeader | None:
    """A reassignment moves the leader into the target set: its first live in-sync member."""
    leader = next((r for r in target_replicas if r in live and r in isr), None)
    return None if leader is None else ElectedLeader(leader, tuple(isr))
