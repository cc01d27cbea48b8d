"""MetadataCache: UpdateMetadata replaces the live brokers, overwrites the partitions it
names, and removes partitions marked for deletion (leader -2)."""

from __future__ import annotations

import uuid

from millrace.broker.metadata import BrokerRegistration, PartitionState
from millrace.broker.metadata.metadata_cache import MetadataCache, PartitionMetadata

B1, B2, B3 = (BrokerRegistration(i, "localhost", 9090 + i) for i in (1, 2, 3))
TID = uuid.UUID(int=7)


def pm(topic: str, p: int, leader: int, epoch: int = 0,
       isr: tuple[int, ...] = (1, 2, 3)) -> PartitionMetadata:
    return PartitionMetadata(topic, p, PartitionState(leader, epoch, isr), (1, 2, 3))


def test_update_metadata_replaces_brokers_and_overwrites_named_partitions() -> None:
    cache = MetadataCache(1)
    assert cache.update_metadata(2, 5, [B1, B2, B3], [pm("t", 0, 1), pm("t", 1, 2)],
                                 {"t": TID}) == []
    assert (cache.controller_id, cache.controller_epoch) == (2, 5)
    assert cache.topic_names() == ["t"] and cache.topic_ids == {"t": TID}
    assert cache.leader_of("t", 1) == B2
    cache.update_metadata(2, 5, [B1, B3], [pm("t", 1, 3, epoch=1, isr=(1, 3))])
    assert sorted(cache.alive_brokers) == [1, 3]
    part = cache.partition("t", 1)
    assert part is not None and (part.state.leader, part.state.leader_epoch) == (3, 1)
    assert cache.leader_of("t", 0) == B1          # untouched partition kept
    assert cache.alive_broker(2) is None


def test_leader_minus_two_deletes_the_partition_and_then_the_topic() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(1, 1, [B1], [pm("t", 0, 1), pm("t", 1, 1)], {"t": TID})
    assert cache.update_metadata(1, 1, [B1], [pm("t", 0, -2)]) == [("t", 0)]
    assert cache.topic_names() == ["t"]
    assert cache.update_metadata(1, 1, [B1], [pm("t", 1, -2), pm("t", 9, -2)]) == [("t", 1)]
    assert cache.topic_names() == [] and cache.topic_ids == {}
