"""Assignors: Kafka's documented examples, properties over random groups (every partition
exactly once, only to subscribers, balance within one), stickiness across rebalances, and
cooperative-sticky's two-phase moves (no partition ever owned by two members)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.client.cluster import TopicPartition
from millrace.client.consumer._internals.consumer_coordinator import common_protocol
from millrace.client.consumer.assignors import (
    ConsumerGroupMetadata,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    load_assignors,
)
from millrace.client.consumer.assignors.sticky import decode_sticky_user_data
from millrace.common.errors import ConfigError
from millrace.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_subscription,
)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def subs(**members: list[str]) -> dict[str, Subscription]:
    return {m: Subscription(topics) for m, topics in members.items()}


def flat(result: dict[str, Assignment]) -> dict[str, list[TopicPartition]]:
    return {m: a.partitions for m, a in result.items()}


def check_valid(partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription],
                result: dict[str, Assignment], *, complete: bool = True) -> None:
    assert set(result) == set(subscriptions)
    owners = Counter(p for a in result.values() for p in a.partitions)
    assert all(n == 1 for n in owners.values()), "a partition was assigned twice"
    for member, assignment in result.items():
        for p in assignment.partitions:
            assert p.topic in subscriptions[member].topics, (member, p)
            assert 0 <= p.partition < partitions_per_topic[p.topic]
    if complete:
        wanted = {tp(t, p) for s in subscriptions.values() for t in s.topics
                  if t in partitions_per_topic for p in range(partitions_per_topic[t])}
        assert set(owners) == wanted


# ---------------------------------------------------------------------- examples
def test_range_example_from_kafka_docs() -> None:
    # two consumers, two topics of three partitions each
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert flat(result) == {"C0": [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)],
                            "C1": [tp("t0", 2), tp("t1", 2)]}


def test_roundrobin_example_from_kafka_docs() -> None:
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3},
                                         subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert flat(result) == {"C0": [tp("t0", 0), tp("t0", 2), tp("t1", 1)],
                            "C1": [tp("t0", 1), tp("t1", 0), tp("t1", 2)]}


def test_roundrobin_skips_members_not_subscribed() -> None:
    # Kafka's example: C0 {t0}, C1 {t0, t1}, C2 {t0, t1, t2}; t0 1, t1 2, t2 3 partitions
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3},
                                         subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"]))
    assert flat(result) == {"C0": [tp("t0", 0)], "C1": [tp("t1", 0)],
                            "C2": [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)]}


def test_range_orders_static_members_first() -> None:
    members = {"b-dynamic": Subscription(["t"]),
               "z-static": Subscription(["t"], group_instance_id="i1"),
               "a-dynamic": Subscription(["t"])}
    result = flat(RangeAssignor().assign({"t": 3}, members))
    assert result == {"z-static": [tp("t", 0)], "a-dynamic": [tp("t", 1)],
                      "b-dynamic": [tp("t", 2)]}


def test_unknown_topics_and_members_without_partitions() -> None:
    result = RangeAssignor().assign({"t": 1}, subs(A=["t", "missing"], B=["t"]))
    assert flat(result) == {"A": [tp("t", 0)], "B": []}


def test_sticky_keeps_partitions_when_a_member_joins() -> None:
    a = StickyAssignor()
    first = a.assign({"t": 6}, subs(A=["t"]))
    a.on_assignment(first["A"], ConsumerGroupMetadata("g", 1, "A"))
    owned = a.subscription_user_data({"t"})
    assert owned is not None
    assert decode_sticky_user_data(owned).generation == 1
    second = flat(StickyAssignor().assign({"t": 6}, {"A": Subscription(["t"], owned),
                                                     "B": Subscription(["t"])}))
    assert len(second["A"]) == len(second["B"]) == 3
    assert set(second["A"]) <= set(first["A"].partitions)


def test_sticky_prefers_the_newest_generation_claim() -> None:
    old = Subscription(["t"], None, [tp("t", 0), tp("t", 1)], 3)
    new = Subscription(["t"], None, [tp("t", 0)], 4)
    result = flat(CooperativeStickyAssignor().assign({"t": 2}, {"old": old, "new": new}))
    assert result["new"] == [tp("t", 0)]
    assert result["old"] == [tp("t", 1)]


def test_cooperative_withholds_moving_partitions() -> None:
    owned = Subscription(["t"], None, [tp("t", p) for p in range(4)], 1)
    result = flat(CooperativeStickyAssignor().assign({"t": 4}, {"A": owned,
                                                                "B": Subscription(["t"])}))
    # A keeps two; the two that move are given to nobody until A has revoked them
    assert len(result["A"]) == 2 and result["B"] == []


def test_protocol_selection() -> None:
    assert common_protocol(load_assignors(["range", "cooperative-sticky"])) \
        is RebalanceProtocol.EAGER
    assert common_protocol(load_assignors(["cooperative-sticky"])) \
        is RebalanceProtocol.COOPERATIVE


def test_load_assignors_by_name_java_name_and_instance() -> None:
    loaded = load_assignors(["range", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                             StickyAssignor, CooperativeStickyAssignor()])
    assert [a.name for a in loaded] == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    with pytest.raises(ConfigError, match=r"partition\.assignment\.strategy"):
        load_assignors(["range", "range"])
    with pytest.raises(ConfigError, match=r"partition\.assignment\.strategy"):
        load_assignors([object()])


def test_cooperative_user_data_carries_the_generation() -> None:
    a = CooperativeStickyAssignor()
    a.on_assignment(Assignment([]), ConsumerGroupMetadata("g", 7, "m"))
    data = a.subscription_user_data({"t"})
    sub = decode_subscription(encode_subscription(
        Subscription(["t"], data, [tp("t", 0)], -1), 1))  # v1: no generation field
    assert a.member_data(sub).generation == 7


# ---------------------------------------------------------------------- properties
@st.composite
def groups(draw: st.DrawFn, equal: bool = False) -> tuple[dict[str, int],
                                                          dict[str, Subscription]]:
    topics = {f"t{i}": draw(st.integers(1, 12)) for i in range(draw(st.integers(1, 4)))}
    names = sorted(topics)
    n = draw(st.integers(1, 7))
    shared = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    members = {}
    for i in range(n):
        chosen = shared if equal else draw(st.lists(st.sampled_from([*names, "gone"]),
                                                    min_size=1, unique=True))
        members[f"m{i:02d}"] = Subscription(list(chosen))
    return topics, members


ALL = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
@given(group=groups())
@settings(max_examples=150, deadline=None)
def test_every_partition_exactly_once_to_a_subscriber(assignor: type, group: tuple) -> None:
    topics, members = group
    check_valid(topics, members, assignor().assign(topics, members))


@pytest.mark.parametrize("assignor", [RoundRobinAssignor, StickyAssignor,
                                      CooperativeStickyAssignor], ids=lambda a: a.name)
@given(group=groups(equal=True))
@settings(max_examples=150, deadline=None)
def test_identical_subscriptions_balance_within_one(assignor: type, group: tuple) -> None:
    topics, members = group
    counts = [len(a.partitions) for a in assignor().assign(topics, members).values()]
    assert max(counts) - min(counts) <= 1


@given(group=groups(equal=True))
@settings(max_examples=150, deadline=None)
def test_range_balances_each_topic_within_one(group: tuple) -> None:
    topics, members = group
    result = RangeAssignor().assign(topics, members)
    for topic in members[next(iter(members))].topics:
        counts = [sum(p.topic == topic for p in a.partitions) for a in result.values()]
        assert max(counts) - min(counts) <= 1


@given(group=groups())
@settings(max_examples=150, deadline=None)
def test_sticky_moves_nothing_when_nothing_changed(group: tuple) -> None:
    topics, members = group
    a = CooperativeStickyAssignor()
    first = flat(a.assign(topics, members))
    # nothing changes in the group: a rebalance must not move anything
    again = {m: Subscription(s.topics, None, first[m], 1) for m, s in members.items()}
    assert flat(a.assign(topics, again)) == first


@given(group=groups(equal=True), leaving=st.data())
@settings(max_examples=150, deadline=None)
def test_sticky_moves_only_the_partitions_of_a_departed_member(group: tuple,
                                                               leaving: st.DataObject) -> None:
    topics, members = group
    if len(members) < 2:
        return
    first = flat(StickyAssignor().assign(topics, members))
    gone = leaving.draw(st.sampled_from(sorted(members)))
    remaining = {m: Subscription(s.topics, None, first[m], 1)
                 for m, s in members.items() if m != gone}
    second = flat(CooperativeStickyAssignor().assign(topics, remaining))
    # survivors keep everything they had, or all they get now was theirs before
    for member, parts in second.items():
        kept = set(first[member]) & set(parts)
        assert len(kept) >= min(len(first[member]), len(parts))


class _Member:
    def __init__(self, name: str, topics: list[str]) -> None:
        self.name = name
        self.topics = topics
        self.owned: list[TopicPartition] = []
        self.generation = -1


def _rebalance(assignor: CooperativeStickyAssignor, topics: dict[str, int],
               members: list[_Member], generation: int) -> bool:
    """One cooperative rebalance; True if some member revoked (a follow-up is needed)."""
    subscriptions = {m.name: Subscription(m.topics, None, list(m.owned), m.generation)
                     for m in members}
    result = assignor.assign(topics, subscriptions)
    check_valid(topics, subscriptions, result, complete=False)
    revoked_any = False
    # members process their assignments in any order; ownership is checked at every step
    for m in members:
        new = set(result[m.name].partitions)
        revoked = set(m.owned) - new
        added = new - set(m.owned)
        for other in members:
            if other is not m:
                assert not added & set(other.owned), "a partition would be owned twice"
        m.owned = sorted(new)
        m.generation = generation
        revoked_any |= bool(revoked)
    return revoked_any


@given(group=groups(equal=True), joiners=st.integers(1, 3))
@settings(max_examples=100, deadline=None)
def test_cooperative_two_phase_rebalance_converges(group: tuple, joiners: int) -> None:
    topics, members = group
    assignor = CooperativeStickyAssignor()
    live = [_Member(name, s.topics) for name, s in members.items()]
    generation = 1
    while _rebalance(assignor, topics, live, generation):
        generation += 1
    live += [_Member(f"new{i}", live[0].topics) for i in range(joiners)]
    generation += 1
    phases = 1
    while _rebalance(assignor, topics, live, generation):
        generation += 1
        phases += 1
    assert phases <= 2, "revocation and reassignment take two rebalances"
    counts = [len(m.owned) for m in live]
    assert max(counts) - min(counts) <= 1
    total = sum(topics[t] for t in set(live[0].topics))
    assert sum(counts) == total
