"""Kafka's replica assignment: which brokers hold the replicas of new partitions.

Java counterpart: ``org.apache.kafka.admin.AdminUtils.assignReplicasToBrokers`` (called by
``AdminZkClient`` for CreateTopics and CreatePartitions).  Pure: the random start comes
from an injected ``random.Random`` so a seeded source gives the same assignment every run.

The goals, in order: spread replicas evenly over the brokers; spread the followers of the
partitions a broker leads over the *other* brokers; and, when every broker has a rack,
put a partition's replicas on different racks.

Rack-unaware, over the n brokers sorted by id::

    start = rand(n), shift = rand(n)            (a fixed start index replaces both)
    for each partition p:
        if p > 0 and p % n == 0: shift += 1     (a new round: shift the followers)
        first = (p + start) % n                 (leaders walk round-robin)
        follower j = (first + 1 + (shift + j) % (n - 1)) % n

The follower formula never lands on ``first`` itself, and the growing shift keeps a
second round from repeating the pairs of the first.

Rack-aware: the same walk over a *rack-alternating* broker list (racks sorted by name,
brokers within a rack by id, taken one from each rack in turn: ``0, 3, 1, 5, 4, 2`` for
``0:r1 1:r3 2:r3 3:r2 4:r2 5:r1``), with the follower shift scaled by the number of racks
and a candidate follower skipped while its rack already holds a replica and some rack
holds none, or while it already holds one and some broker holds none.

Adding partitions to a topic continues its walk: partition ids start at the current
count, and the start index (used for both start and shift) is the position of the first
broker whose id is >= the first replica of partition 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from millrace.common.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as the assignment sees it (Java ``BrokerMetadata``): id and optional rack."""

    id: int
    rack: str | None = None


def assign_replicas_to_brokers(brokers: Iterable[BrokerMetadata], n_partitions: int,
                               replication_factor: int, *, rng: random.Random | None = None,
                               fixed_start_index: int = -1,
                               start_partition_id: int = -1) -> dict[int, list[int]]:
    """Partition id -> replicas (the preferred leader first) for ``n_partitions`` partitions.

    Raises InvalidPartitionsError / InvalidReplicationFactorError on non-positive counts or
    a replication factor above the number of brokers, and InvalidReplicaAssignmentError when
    only some brokers have a rack (Kafka refuses to guess).
    """
    metas = sorted(brokers, key=lambda b: b.id)
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(metas):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(metas)}.")
    rng = rng if rng is not None else random.Random()
    if all(b.rack is None for b in metas):
        return _rack_unaware(n_partitions, replication_factor, [b.id for b in metas], rng,
                             fixed_start_index, start_partition_id)
    if any(b.rack is None for b in metas):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment.")
    racks = {b.id: b.rack for b in metas if b.rack is not None}
    return _rack_aware(n_partitions, replication_factor, racks, rng, fixed_start_index,
                       start_partition_id)


def assign_added_partitions(brokers: Iterable[BrokerMetadata],
                            existing: Mapping[int, Sequence[int]], new_total: int
                            ) -> dict[int, list[int]]:
    """Replicas for partitions ``len(existing) .. new_total - 1`` of an existing topic
    (CreatePartitions), continuing the topic's walk deterministically."""
    metas = sorted(brokers, key=lambda b: b.id)
    count = len(existing)
    if new_total <= count:
        raise InvalidPartitionsError(
            f"Topic currently has {count} partitions, {new_total} would not be an increase.")
    first_of_p0 = existing[0][0] if existing.get(0) else -1
    start = next((i for i, b in enumerate(metas) if b.id >= first_of_p0), -1)
    return assign_replicas_to_brokers(metas, new_total - count, len(existing.get(0, ())),
                                      fixed_start_index=max(0, start),
                                      start_partition_id=count)


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks by name, brokers by id within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(broker_racks):
        result.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return result


def replica_index(first_replica_index: int, second_replica_shift: int, replica: int,
                  n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _start(rng: random.Random, n: int, fixed_start_index: int) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start = rng.randrange(n)
    return start, rng.randrange(n)


def _rack_unaware(n_partitions: int, rf: int, broker_list: list[int], rng: random.Random,
                  fixed_start_index: int, start_partition_id: int) -> dict[int, list[int]]:
    n = len(broker_list)
    start, shift = _start(rng, n, fixed_start_index)
    result: dict[int, list[int]] = {}
    for p in range(max(0, start_partition_id), max(0, start_partition_id) + n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [broker_list[first]]
        replicas += [broker_list[replica_index(first, shift, j, n)] for j in range(rf - 1)]
        result[p] = replicas
    return result


def _rack_aware(n_partitions: int, rf: int, racks: Mapping[int, str], rng: random.Random,
                fixed_start_index: int, start_partition_id: int) -> dict[int, list[int]]:
    arranged = rack_alternated_broker_list(racks)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    start, shift = _start(rng, n, fixed_start_index)
    result: dict[int, list[int]] = {}
    for p in range(max(0, start_partition_id), max(0, start_partition_id) + n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack = racks[broker]
                if ((rack not in racks_used or len(racks_used) == n_racks)
                        and (broker not in brokers_used or len(brokers_used) == n)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[p] = replicas
    return result
