"""Kafka's replica assignment (AdminUtils): exact placements for fixed and seeded starts."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from millrace.broker.controller.replica_assignment import (
    BrokerMetadata,
    assign_added_partitions,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from millrace.common.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def test_rack_unaware_fixed_start_matches_kafkas_table() -> None:
    # The 5-broker, 10-partition, RF 3 table of AdminUtils' documentation.
    got = assign_replicas_to_brokers(brokers(4, 2, 0, 3, 1), 10, 3, fixed_start_index=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_unaware_seeded_random_start() -> None:
    # Random(7) draws start 1 then shift 0 over three brokers; the shift grows at p3.
    got = assign_replicas_to_brokers(brokers(1, 2, 3), 6, 2, rng=random.Random(7))
    assert got == {0: [2, 3], 1: [3, 1], 2: [1, 2], 3: [2, 1], 4: [3, 2], 5: [1, 3]}
    leaders = Counter(r[0] for r in got.values())
    assert leaders == {1: 2, 2: 2, 3: 2}


def test_rack_alternated_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_fixed_start_matches_kafkas_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    metas = [BrokerMetadata(b, r) for b, r in racks.items()]
    got = assign_replicas_to_brokers(metas, 7, 3, fixed_start_index=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                   5: [2, 0, 3], 6: [0, 4, 2]}
    for replicas in got.values():                  # three racks, three replicas: one each
        assert len({racks[b] for b in replicas}) == 3


def test_rack_aware_seeded_random_start() -> None:
    metas = [BrokerMetadata(1, "a"), BrokerMetadata(2, "a"), BrokerMetadata(3, "b"),
             BrokerMetadata(4, "b")]
    got = assign_replicas_to_brokers(metas, 4, 2, rng=random.Random(7))
    assert got == {0: [2, 3], 1: [4, 2], 2: [1, 4], 3: [3, 1]}


def test_replication_factor_above_brokers_is_refused() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers(brokers(1, 2), 1, 3)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers(brokers(1, 2), 1, 0)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(brokers(1, 2), 0, 1)


def test_partial_rack_information_is_refused() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="Not all brokers have rack"):
        assign_replicas_to_brokers([BrokerMetadata(1, "a"), BrokerMetadata(2)], 1, 1)


def test_added_partitions_continue_the_walk() -> None:
    existing = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    got = assign_added_partitions(brokers(1, 2, 3), existing, 5)
    # start index = position of broker 1 (first replica of p0) = 0, used for the shift too;
    # p3 starts a new round, so the shift grows to 1.
    assert got == {3: [1, 3], 4: [2, 1]}
    with pytest.raises(InvalidPartitionsError):
        assign_added_partitions(brokers(1, 2, 3), existing, 3)
