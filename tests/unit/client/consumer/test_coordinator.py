"""ConsumerCoordinator against the broker's own pure group coordinator (``SimBroker``), on a
MockTime, with the heartbeat loop stepped by hand: joining (MEMBER_ID_REQUIRED), the leader's
assignment, rebalances on join/leave, heartbeat errors, session and poll timeouts, commits
for stale generations, static membership, eager vs cooperative revocation."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

import pytest
from consumergen import FakeNetworkClient, SimBroker, consumer_metadata, subscriptions, tps

from millrace.client.cluster import TopicPartition
from millrace.client.consumer._internals.abstract_coordinator import MemberState
from millrace.client.consumer._internals.consumer_coordinator import ConsumerCoordinator
from millrace.client.consumer._internals.request_future import Timer
from millrace.client.consumer._internals.subscription_state import FetchPosition
from millrace.client.consumer.assignors import RebalanceProtocol, load_assignors
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.errors import CommitFailedError
from millrace.client.consumer.listener import ConsumerRebalanceListener
from millrace.common.errors import KafkaError
from millrace.common.time import MockTime
from millrace.protocol.consumer_protocol import decode_subscription

ALL = tps("t", 0, 1, 2, 3)


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.fail_on: str | None = None

    def _record(self, kind: str, partitions: Collection[TopicPartition]) -> None:
        self.events.append((kind, list(partitions)))
        if kind == self.fail_on:
            raise RuntimeError(f"listener fails on {kind}")

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        self._record("assigned", partitions)

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        self._record("revoked", partitions)

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        self._record("lost", partitions)


class Member:
    def __init__(self, broker: SimBroker, name: str, *, assignors: tuple[str, ...] = ("range",),
                 instance_id: str | None = None, topics: dict[str, int] | None = None,
                 auto_commit: bool = False, max_poll_interval_ms: int = 30_000,
                 pattern: str | None = None) -> None:
        self.time = broker.time
        self.name = name
        self.subs = subscriptions()
        self.metadata = consumer_metadata(self.subs, topics or {"t": 4}, self.time)
        self.client = FakeNetworkClient(broker, self.time, client_id=name, metadata=self.metadata)
        self.listener = Recorder()
        self.coord = ConsumerCoordinator(
            self.client, self.metadata, self.subs, load_assignors(assignors),  # type: ignore[arg-type]
            self.time, group_id="g", group_instance_id=instance_id, client_id=name,
            session_timeout_ms=10_000, rebalance_timeout_ms=max_poll_interval_ms,
            heartbeat_interval_ms=1000, auto_commit_enabled=auto_commit,
            auto_commit_interval_ms=1000, start_heartbeat_thread=False)
        if pattern is not None:
            self.subs.subscribe_pattern(re.compile(pattern), self.listener)
        else:
            self.subs.subscribe(["t"], self.listener)

    def poll(self, ms: int = 0) -> bool:
        return self.coord.poll(Timer(self.time, ms))

    def heartbeat(self) -> None:
        self.coord.heartbeat_run_once(wait=False)

    @property
    def assigned(self) -> set[TopicPartition]:
        return set(self.subs.assigned_partitions())

    @property
    def stable(self) -> bool:
        return self.coord.state is MemberState.STABLE and not self.coord.rejoin_needed_or_pending()


def settle(*members: Member, max_rounds: int = 200, check: Any = None,
           until: Any = None) -> None:
    """Poll and heartbeat every member, 100 ms apart, until all are stable (and ``until()``
    holds)."""
    for _ in range(max_rounds):
        for m in members:
            m.poll()
            m.heartbeat()
            if check is not None:
                check()
        if all(m.stable for m in members) and (until is None or until()):
            return
        members[0].time.sleep(100)
    raise AssertionError(f"no stable group: {[(m.name, m.coord.state) for m in members]}")


def disjoint(*members: Member) -> None:
    seen: set[TopicPartition] = set()
    for m in members:
        assert not seen & m.assigned, "a partition is owned by two members"
        seen |= m.assigned


@pytest.fixture
def broker() -> SimBroker:
    return SimBroker(MockTime())


def test_single_member_joins_and_gets_every_partition(broker: SimBroker) -> None:
    a = Member(broker, "a")
    settle(a)
    assert a.assigned == set(ALL)
    assert a.listener.events == [("assigned", ALL)]
    joins = broker.sent("JoinGroupRequest", "a")
    assert joins[0].member_id == "" and joins[1].member_id.startswith("a-")
    assert joins[1].protocol_type == "consumer"
    assert [p.name for p in joins[1].protocols] == ["range"]
    assert decode_subscription(joins[1].protocols[0].metadata).topics == ["t"]
    [sync] = broker.sent("SyncGroupRequest", "a")
    assert [x.member_id for x in sync.assignments] == [joins[1].member_id]


def test_members_split_partitions_and_rebalance_when_one_leaves(broker: SimBroker) -> None:
    a, b = Member(broker, "a"), Member(broker, "b")
    settle(a)
    settle(a, b, check=lambda: disjoint(a, b), until=lambda: a.assigned and b.assigned)
    assert a.assigned | b.assigned == set(ALL) and len(a.assigned) == len(b.assigned) == 2
    # eager (range): a revoked everything before rejoining
    assert ("revoked", ALL) in a.listener.events
    a.coord.close(Timer(a.time, 1000))
    assert broker.sent("LeaveGroupRequest", "a")
    settle(b, until=lambda: b.assigned == set(ALL))


def test_session_timeout_fences_a_silent_member(broker: SimBroker) -> None:
    a, b = Member(broker, "a"), Member(broker, "b")
    settle(a)
    settle(a, b, until=lambda: a.assigned and b.assigned)
    a.subs.seek(sorted(a.assigned)[0], 5)
    for _ in range(120):  # a goes silent for 12 s; b keeps the group alive
        b.poll()
        b.heartbeat()
        b.time.sleep(100)
    settle(b, until=lambda: b.assigned == set(ALL))
    # a still believes it is in the old generation: its commit is rejected
    with pytest.raises(CommitFailedError):
        a.coord.commit_offsets_sync(a.subs.all_consumed(), Timer(a.time, 1000))
    assert a.coord.generation.generation_id == -1
    settle(a, b, check=lambda: disjoint(a, b), until=lambda: a.assigned and b.assigned)
    assert [kind for kind, _ in a.listener.events][-2:] == ["lost", "assigned"]


def test_heartbeat_errors_reset_the_generation(broker: SimBroker) -> None:
    a = Member(broker, "a")
    settle(a)
    broker.handlers["HeartbeatRequest"] = lambda body, version: type(
        "R", (), {"error_code": 25, "throttle_time_ms": 0})()
    a.time.sleep(1000)
    a.heartbeat()
    a.client.poll(0)
    assert a.coord.state is MemberState.UNJOINED
    assert a.coord.generation.member_id == ""
    del broker.handlers["HeartbeatRequest"]
    settle(a)
    assert [kind for kind, _ in a.listener.events] == ["assigned", "lost", "assigned"]


def test_poll_timeout_leaves_the_group_and_the_next_poll_rejoins(broker: SimBroker) -> None:
    a = Member(broker, "a", max_poll_interval_ms=5000)
    settle(a)
    generation = a.coord.generation.generation_id
    for _ in range(60):  # the heartbeat thread runs, the application does not poll
        a.heartbeat()
        a.time.sleep(100)
    assert broker.sent("LeaveGroupRequest", "a"), "left the group on poll timeout"
    assert a.coord.generation.generation_id == -1
    with pytest.raises(CommitFailedError, match="not part of an active group"):
        a.coord.commit_offsets_sync({ALL[0]: OffsetAndMetadata(1)}, Timer(a.time, 1000))
    settle(a)
    assert a.coord.generation.generation_id > generation
    assert [kind for kind, _ in a.listener.events] == ["assigned", "lost", "assigned"]


def test_commit_and_fetch_committed_offsets(broker: SimBroker) -> None:
    a = Member(broker, "a")
    settle(a)
    assert a.coord.commit_offsets_sync({ALL[0]: OffsetAndMetadata(7, "meta", 0)},
                                       Timer(a.time, 1000))
    [commit] = broker.sent("OffsetCommitRequest", "a")
    assert commit.generation_id_or_member_epoch == a.coord.generation.generation_id
    assert commit.member_id == a.coord.generation.member_id
    found = a.coord.fetch_committed_offsets({ALL[0], ALL[1]}, Timer(a.time, 1000))
    assert found == {ALL[0]: OffsetAndMetadata(7, "meta", 0), ALL[1]: None}
    assert a.coord.refresh_committed_offsets_if_needed(Timer(a.time, 1000))
    # committed with its epoch: checked against the leader before it is fetched (KIP-320)
    position, _leader = a.subs.partitions_needing_validation(0)[ALL[0]]
    assert position == FetchPosition(7, 0)
    a.subs.complete_validation(ALL[0])
    assert a.subs.position(ALL[0]) == FetchPosition(7, 0)
    assert a.subs.position(ALL[1]) is None, "no committed offset: left to auto.offset.reset"


def test_commit_interceptors_see_successful_commits(broker: SimBroker) -> None:
    from millrace.client.consumer.interceptor import ConsumerInterceptor, ConsumerInterceptors

    class Seen(ConsumerInterceptor):
        def __init__(self) -> None:
            self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []

        def on_commit(self, offsets: Any) -> None:
            self.commits.append(dict(offsets))

    a = Member(broker, "a")
    seen = Seen()
    a.coord._interceptors = ConsumerInterceptors([seen])
    settle(a)
    a.coord.commit_offsets_sync({ALL[0]: OffsetAndMetadata(3)}, Timer(a.time, 1000))
    a.coord.commit_offsets_async({ALL[1]: OffsetAndMetadata(4)}, None)
    a.client.poll(0)
    assert seen.commits == [{ALL[0]: OffsetAndMetadata(3)}, {ALL[1]: OffsetAndMetadata(4)}]


def test_async_commit_callbacks_run_in_order_on_the_next_poll(broker: SimBroker) -> None:
    a = Member(broker, "a")
    settle(a)
    done: list[tuple[int, BaseException | None]] = []
    for offset in (1, 2):
        a.coord.commit_offsets_async({ALL[0]: OffsetAndMetadata(offset)},
                                     lambda o, e: done.append((o[ALL[0]].offset, e)))
    a.client.poll(0)
    assert done == []
    a.poll()
    assert done == [(1, None), (2, None)]


def test_auto_commit_sends_positions_every_interval(broker: SimBroker) -> None:
    a = Member(broker, "a", auto_commit=True)
    settle(a)
    for tp in ALL:
        a.subs.seek(tp, 3)
    a.poll()
    assert not broker.sent("OffsetCommitRequest")
    a.time.sleep(1000)
    a.poll()
    a.client.poll(0)
    [commit] = broker.sent("OffsetCommitRequest")
    assert {p.committed_offset for p in commit.topics[0].partitions} == {3}


def test_static_member_keeps_its_assignment_across_a_restart(broker: SimBroker) -> None:
    a = Member(broker, "a", instance_id="instance-a")
    b = Member(broker, "b", instance_id="instance-b")
    settle(a)
    settle(a, b, until=lambda: a.assigned and b.assigned)
    joins = broker.sent("JoinGroupRequest", "a")
    assert all(j.group_instance_id == "instance-a" for j in joins)
    assert all(j.member_id == "" or j.member_id.startswith("a-") for j in joins)
    generation, before = a.coord.generation.generation_id, a.assigned
    a.coord.close(Timer(a.time, 1000))
    assert not broker.sent("LeaveGroupRequest", "a"), "a static member does not leave"
    again = Member(broker, "a2", instance_id="instance-a")
    settle(again, b)
    assert again.assigned == before
    assert b.coord.generation.generation_id == generation, "no rebalance for the others"


def test_default_assignors_rebalance_eagerly(broker: SimBroker) -> None:
    a = Member(broker, "a", assignors=("range", "cooperative-sticky"))
    assert a.coord.protocol is RebalanceProtocol.EAGER
    b = Member(broker, "b", assignors=("range", "cooperative-sticky"))
    settle(a)
    settle(a, b, check=lambda: disjoint(a, b), until=lambda: a.assigned and b.assigned)
    assert ("revoked", ALL) in a.listener.events
    assert broker.sent("JoinGroupRequest", "b")[-1].protocols[1].name == "cooperative-sticky"


def test_cooperative_rebalance_revokes_only_what_moves(broker: SimBroker) -> None:
    a = Member(broker, "a", assignors=("cooperative-sticky",))
    b = Member(broker, "b", assignors=("cooperative-sticky",))
    settle(a)
    settle(a, b, check=lambda: disjoint(a, b), until=lambda: len(b.assigned) == 2)
    assert len(a.assigned) == len(b.assigned) == 2
    revoked = [p for kind, p in a.listener.events if kind == "revoked"]
    assert revoked == [sorted(set(ALL) - a.assigned)], "one revocation of the moved half"
    assert all(kind != "lost" for kind, _ in a.listener.events)
    # a kept its partitions through both rebalances: never revoked all
    owned = broker.sent("JoinGroupRequest", "a")[-1].protocols[0].metadata
    assert set(decode_subscription(owned).owned_partitions) == a.assigned


def test_pattern_subscription_assigns_matching_topics(broker: SimBroker) -> None:
    a = Member(broker, "a", topics={"orders.eu": 2, "orders.us": 1, "other": 3},
               pattern=r"orders\..*")
    settle(a)
    assert a.subs.subscription == {"orders.eu", "orders.us"}
    assert a.assigned == {TopicPartition("orders.eu", 0), TopicPartition("orders.eu", 1),
                          TopicPartition("orders.us", 0)}


def test_a_failing_listener_surfaces_after_the_assignment(broker: SimBroker) -> None:
    a = Member(broker, "a")
    a.listener.fail_on = "assigned"
    with pytest.raises(KafkaError, match="rebalance callback"):
        for _ in range(20):
            a.poll()
    assert a.assigned == set(ALL), "the assignment itself was applied"


def test_retries_join_after_a_lost_sync(broker: SimBroker) -> None:
    a = Member(broker, "a")
    a.client.drop_next.add("SyncGroupRequest")
    settle(a)
    assert a.assigned == set(ALL)
    assert len(broker.sent("SyncGroupRequest", "a")) >= 1
