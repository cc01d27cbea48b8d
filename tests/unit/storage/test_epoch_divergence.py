"""KIP-101 and KIP-279 at the storage level: replicas as plain logs, no broker.

Each replica is a ``Log`` in its own directory.  A leader change is what the replica layer
will do: the new leader records (epoch, log end) in its cache (KAFKA-7415), a follower
truncates by leader epoch — it asks the leader's log for the end of its own latest epoch,
and when the leader answers with an older epoch it looks up its own end of that epoch and
asks again (Kafka's ``AbstractFetcherThread`` rule) — then copies the leader's batches from
its log end.  A crash drops the ``Log`` object without closing it and reopens the directory
as after an unclean shutdown.  Every scenario ends with logs identical byte for byte and
every committed record at its offset.
"""

from __future__ import annotations

from pathlib import Path

from millrace.storage import FetchIsolation, Log, LogConfig
from millrace.storage.leader_epoch_cache import UNDEFINED_EPOCH_OFFSET
from tests.unit.storage.storagegen import batch, records


class Replica:
    """One broker's copy of partition t-0."""

    def __init__(self, root: Path, broker: str) -> None:
        self.dir = str(root / broker / "t-0")
        self.log = Log(self.dir, LogConfig())
        self.epoch = -1

    def become_leader(self, epoch: int) -> None:
        self.epoch = epoch
        self.log.leader_epoch_cache.assign(epoch, self.log.log_end_offset)

    def produce(self, value: bytes) -> int:
        return self.log.append_as_leader(batch([value]), self.epoch).first_offset

    def crash_and_restart(self) -> None:
        """kill -9: nothing closed or flushed; the HW comes back from its checkpoint."""
        hw = self.log.high_watermark
        self.log._local.close(sync=False)  # release descriptors only
        self.log = Log(self.dir, LogConfig(), high_watermark=hw, had_clean_shutdown=False)

    def truncate_by_epoch(self, leader: Replica) -> list[int]:
        """Kafka's follower truncation (KIP-101 with KIP-279's extra round trips); returns
        the offsets truncated to, one per round trip."""
        steps = []
        while True:
            own = self.log.latest_epoch
            leader_epoch, leader_end = leader.log.end_offset_for_epoch(own)
            end = self.log.log_end_offset
            if leader_end == UNDEFINED_EPOCH_OFFSET:
                raise AssertionError("no epoch in common: the HW fallback is not modelled")
            my_epoch, my_end = self.log.end_offset_for_epoch(leader_epoch)
            if my_end == UNDEFINED_EPOCH_OFFSET:
                target, done = min(leader_end, end), True
            elif my_epoch != leader_epoch:
                target, done = min(my_end, end), False  # an epoch we never saw: ask again
            else:
                target, done = min(my_end, leader_end, end), True
            self.log.truncate_to(target)
            steps.append(self.log.log_end_offset)
            if done:
                return steps

    def fetch_from(self, leader: Replica) -> None:
        start = self.log.log_end_offset
        if start < leader.log.log_end_offset:
            self.log.append_as_follower(
                leader.log.read(start, 10**6, FetchIsolation.LOG_END).read())
        self.log.update_high_watermark(min(leader.log.high_watermark, self.log.log_end_offset))

    def values(self) -> list[bytes | None]:
        return [r.value for r in records(self.log.read_all_bytes())]

    def close(self) -> None:
        self.log.close()


def commit(leader: Replica, *isr: Replica) -> int:
    """The leader's high watermark: the smallest log end over the ISR."""
    leader.log.maybe_increment_high_watermark(
        min(r.log.log_end_offset for r in (leader, *isr)))
    return leader.log.high_watermark


def assert_identical(*replicas: Replica) -> None:
    first = replicas[0]
    for r in replicas[1:]:
        assert r.log.read_all_bytes() == first.log.read_all_bytes()
        assert r.log.leader_epoch_cache.entries() == first.log.leader_epoch_cache.entries()


def test_kip101_a_restarted_follower_keeps_what_the_leader_committed(tmp_path: Path) -> None:
    a, b = Replica(tmp_path, "a"), Replica(tmp_path, "b")
    a.become_leader(0)
    a.produce(b"m0")
    a.produce(b"m1")
    b.fetch_from(a)
    assert commit(a, b) == 2  # m0 and m1 acknowledged to an acks=all producer
    b.log.update_high_watermark(1)  # the watermark reaches b with its next fetch
    b.crash_and_restart()
    assert b.log.high_watermark == 1  # truncating to it would lose m1 (pre-KIP-101)
    assert b.truncate_by_epoch(a) == [2]  # a says epoch 0 ends at 2: nothing goes
    # a dies; b takes over with everything that was committed
    a.crash_and_restart()
    b.become_leader(1)
    b.produce(b"m2")
    assert a.truncate_by_epoch(b) == [2]
    a.fetch_from(b)
    assert commit(b, a) == 3
    assert a.values() == b.values() == [b"m0", b"m1", b"m2"]
    assert_identical(a, b)
    assert [(e.epoch, e.start_offset) for e in a.log.leader_epoch_cache.entries()] == [
        (0, 0), (1, 2)]
    a.close()
    b.close()


def test_kip101_replicas_do_not_diverge_after_both_crash(tmp_path: Path) -> None:
    a, b = Replica(tmp_path, "a"), Replica(tmp_path, "b")
    a.become_leader(0)
    a.produce(b"m0")
    b.fetch_from(a)
    assert commit(a, b) == 1
    a.produce(b"m1")  # only on a, never committed
    a.crash_and_restart()
    b.crash_and_restart()
    b.become_leader(1)  # b comes back first and is elected
    b.produce(b"m2")  # offset 1 on b, where a holds m1
    assert b.log.end_offset_for_epoch(0) == (0, 1)
    assert a.truncate_by_epoch(b) == [1]  # a's m1 goes
    a.fetch_from(b)
    assert commit(b, a) == 2
    assert a.values() == b.values() == [b"m0", b"m2"]
    assert_identical(a, b)
    a.close()
    b.close()


def test_kip279_two_fast_leader_changes(tmp_path: Path) -> None:
    a, b = Replica(tmp_path, "a"), Replica(tmp_path, "b")
    a.become_leader(1)
    a.produce(b"m0")
    b.fetch_from(a)
    assert commit(a, b) == 1
    a.produce(b"m1")  # epoch 1, offset 1, only on a
    b.become_leader(2)  # first change: b writes before a fetches
    b.produce(b"m2")  # epoch 2, offset 1, only on b
    a.become_leader(3)  # second change, straight back to a
    # the start of epoch 3 is recorded before a writes (KAFKA-7415), so a can already
    # tell b where b's epoch 2 ends in its log: where its own epoch 1 ended
    assert a.log.end_offset_for_epoch(2) == (1, 2)
    a.produce(b"m3")  # epoch 3, offset 2
    # KIP-101 alone would truncate b to min(2, its end 2): nothing, and offset 1 would
    # hold m1 on a and m2 on b for ever
    assert (a.values()[1], b.values()[1]) == (b"m1", b"m2")
    assert b.log.end_offset_for_epoch(1) == (1, 1)  # KIP-279: b's own end of epoch 1
    assert b.truncate_by_epoch(a) == [1]
    b.fetch_from(a)
    assert commit(a, b) == 3
    assert a.values() == b.values() == [b"m0", b"m1", b"m3"]
    assert_identical(a, b)
    assert [(e.epoch, e.start_offset) for e in b.log.leader_epoch_cache.entries()] == [
        (1, 0), (3, 2)]
    a.close()
    b.close()


def test_three_replicas_two_fast_failovers_and_a_crash(tmp_path: Path) -> None:
    a, b, c = (Replica(tmp_path, n) for n in "abc")
    a.become_leader(0)
    for v in (b"a0", b"a1", b"a2"):
        a.produce(v)
    b.fetch_from(a)
    c.fetch_from(a)
    assert commit(a, b, c) == 3
    committed = a.values()
    a.produce(b"a3")
    b.fetch_from(a)  # b has a3, c does not
    # a fails; b (in the ISR) leads epoch 1 and writes, c never fetches
    b.become_leader(1)
    b.produce(b"b4")
    b.produce(b"b5")
    # b fails at once; c, still in the ISR, leads epoch 2
    c.become_leader(2)
    c.produce(b"c3")
    c.crash_and_restart()  # and c crashes and comes back, still leader
    c.become_leader(3)
    c.produce(b"c4")
    for r in (a, b):
        r.crash_and_restart()
    assert a.truncate_by_epoch(c) == [3]  # a's epoch 0 ends at 3 on c: a3 goes
    assert b.truncate_by_epoch(c) == [3]  # b's epoch 1 is unknown to c: ends at 3
    for r in (a, b):
        r.fetch_from(c)
    assert commit(c, a, b) == 5
    assert a.values() == b.values() == c.values() == [*committed, b"c3", b"c4"]
    assert_identical(a, b, c)
    for r in (a, b, c):
        r.close()


def test_truncation_steps_back_over_epochs_the_leader_never_had(tmp_path: Path) -> None:
    leader, follower = Replica(tmp_path, "l"), Replica(tmp_path, "f")
    leader.become_leader(0)
    for i in range(3):
        leader.produce(b"x%d" % i)
    follower.fetch_from(leader)
    follower.become_leader(0)  # an odd history: the follower went on writing epoch 0 ...
    for i in range(3, 5):
        follower.produce(b"f%d" % i)
    for epoch, n in ((2, 2), (3, 2)):  # ... then epochs 2 and 3 the leader never saw
        follower.become_leader(epoch)
        for _ in range(n):
            follower.produce(b"f")
    leader.become_leader(1)
    for i in range(3, 10):
        leader.produce(b"l%d" % i)
    leader.become_leader(4)
    leader.produce(b"l10")
    # f asks for epoch 3: the leader answers epoch 1 ending at 10; the follower does not
    # know epoch 1, so it cuts to the end of its epoch 0 (5) and asks for epoch 0: 3
    assert follower.truncate_by_epoch(leader) == [5, 3]
    follower.fetch_from(leader)
    assert_identical(leader, follower)
    assert follower.values()[:4] == [b"x0", b"x1", b"x2", b"l3"]
    leader.close()
    follower.close()
