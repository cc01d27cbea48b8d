"""Leader-side replication rules of ``Partition``: follower positions, the high watermark
over the ISR, ISR expansion (KAFKA-7128) and shrink (replica.lag.time.max.ms), and the
follower side (append what the leader sent, follow its high watermark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.broker.metadata import PartitionState
from millrace.broker.partition import Partition
from millrace.common.errors import NotLeaderOrFollowerError
from millrace.record import RecordBatchBuilder
from millrace.storage import Log, LogConfig

T0 = 1_700_000_000_000
LAG = 30_000


class RecordingIsrManager:
    def __init__(self) -> None:
        self.proposals: list[tuple[str, int, tuple[int, ...]]] = []

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        self.proposals.append((partition.topic, partition.index, new_isr))


def batch(n: int, ts: int = T0) -> bytearray:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(ts, f"k{i}".encode(), f"v{i}".encode())
    return bytearray(b.build())


def make(tmp_path: Path, name: str = "t-0", broker: int = 1,
         config: dict[str, str] | None = None) -> tuple[Partition, RecordingIsrManager]:
    log = Log(str(tmp_path / f"b{broker}" / name), LogConfig.from_props(config or {}))
    manager = RecordingIsrManager()
    topic, index = name.rsplit("-", 1)
    return Partition(topic, int(index), log, broker, manager), manager


def leader(tmp_path: Path, isr: tuple[int, ...] = (1, 2, 3), epoch: int = 5,
           **kw: dict[str, str]) -> tuple[Partition, RecordingIsrManager]:
    p, m = make(tmp_path, **kw)  # type: ignore[arg-type]
    assert p.make_leader(PartitionState(1, epoch, isr, partition_epoch=7), [1, 2, 3], T0)
    return p, m


def test_the_high_watermark_is_the_smallest_log_end_over_the_isr(tmp_path: Path) -> None:
    p, _ = leader(tmp_path)
    p.append_records_to_leader(batch(10), T0)
    assert (p.log.log_end_offset, p.log.high_watermark) == (10, 0)  # followers unknown
    assert not p.update_follower_fetch_state(2, 4, T0)
    assert p.log.high_watermark == 0                                 # 3 still unknown
    assert p.update_follower_fetch_state(3, 7, T0)
    assert p.log.high_watermark == 4
    assert p.update_follower_fetch_state(2, 10, T0)
    assert p.log.high_watermark == 7
    assert p.update_follower_fetch_state(3, 10, T0)
    assert p.log.high_watermark == 10


def test_the_high_watermark_never_moves_back(tmp_path: Path) -> None:
    p, _ = leader(tmp_path)
    p.append_records_to_leader(batch(6), T0)
    p.update_follower_fetch_state(2, 6, T0)
    p.update_follower_fetch_state(3, 6, T0)
    assert p.log.high_watermark == 6
    # A follower that restarted and fetches from further back cannot lower it.
    assert not p.update_follower_fetch_state(3, 2, T0)
    assert p.log.high_watermark == 6


def test_a_fetch_from_a_broker_that_is_no_follower_is_refused(tmp_path: Path) -> None:
    p, _ = leader(tmp_path)
    with pytest.raises(NotLeaderOrFollowerError):
        p.update_follower_fetch_state(9, 0, T0)


def test_a_follower_joins_the_isr_once_at_the_high_watermark_and_epoch_start(
        tmp_path: Path) -> None:
    p, manager = make(tmp_path)
    p.make_leader(PartitionState(1, 0, (1,)), [1, 2], T0)
    p.append_records_to_leader(batch(5), T0)          # epoch 0: offsets 0-4, HW 5
    assert p.log.high_watermark == 5
    p.make_leader(PartitionState(1, 1, (1,)), [1, 2], T0)  # epoch 1 starts at 5
    assert p.leader_epoch_start_offset == 5
    p.update_follower_fetch_state(2, 3, T0)           # behind the HW: not yet
    assert manager.proposals == []
    p.update_follower_fetch_state(2, 5, T0)           # at HW and epoch start
    assert manager.proposals == [("t", 0, (1, 2))]
    assert p.maximal_isr == (1, 2) and p.isr == (1,)
    # While the addition is in flight the high watermark waits for the new member too.
    p.append_records_to_leader(batch(2), T0)
    assert p.log.high_watermark == 5
    assert p.on_isr_change_completed(PartitionState(1, 1, (1, 2), partition_epoch=8)) is False
    assert (p.isr, p.pending_isr, p.partition_epoch) == ((1, 2), None, 8)
    assert p.update_follower_fetch_state(2, 7, T0)
    assert p.log.high_watermark == 7


def test_kafka_7128_no_join_before_the_epoch_start_even_at_the_high_watermark(
        tmp_path: Path) -> None:
    p, manager = make(tmp_path)
    p.make_leader(PartitionState(1, 0, (1, 2)), [1, 2], T0)
    p.append_records_to_leader(batch(4), T0)
    p.update_follower_fetch_state(2, 2, T0)
    assert p.log.high_watermark == 2
    # New term (2 was dropped meanwhile); the epoch starts at the log end, 4.
    p.make_leader(PartitionState(1, 1, (1,)), [1, 2], T0)
    p.update_follower_fetch_state(2, 3, T0)           # >= HW (2) but < epoch start (4)
    assert manager.proposals == []
    p.update_follower_fetch_state(2, 4, T0)
    assert manager.proposals == [("t", 0, (1, 2))]
    assert p.pending_isr_reason == "caught up to the high watermark 4"


def test_a_follower_that_lags_longer_than_the_lag_time_leaves_the_isr(tmp_path: Path) -> None:
    p, manager = leader(tmp_path)
    p.append_records_to_leader(batch(3), T0)
    p.update_follower_fetch_state(2, 3, T0 + 1000)    # caught up at T0+1000
    p.update_follower_fetch_state(3, 1, T0 + 1000)    # behind; caught up last at T0 (reset)
    assert p.maybe_shrink_isr(T0 + LAG, LAG) == []
    assert p.maybe_shrink_isr(T0 + LAG + 1, LAG) == [3]
    assert manager.proposals == [("t", 0, (1, 2))]
    assert p.pending_isr_reason == (f"not caught up to the log end within "
                                    f"replica.lag.time.max.ms={LAG}")   # the state log's why
    assert p.maybe_shrink_isr(T0 + LAG + 2, LAG) == []   # one change in flight at a time
    assert p.on_isr_change_completed(PartitionState(1, 5, (1, 2), partition_epoch=8))
    assert p.isr == (1, 2) and p.log.high_watermark == 3


def test_caught_up_as_of_the_previous_fetch(tmp_path: Path) -> None:
    p, _ = leader(tmp_path)
    p.append_records_to_leader(batch(4), T0)
    p.update_follower_fetch_state(2, 4, T0 + 10)      # caught up at +10
    p.append_records_to_leader(batch(2), T0 + 20)     # leader at 6
    p.update_follower_fetch_state(2, 4, T0 + 40)      # had all the leader had at +10
    replica = p.remote_replicas[2]
    assert replica.last_caught_up_time_ms == T0 + 10
    p.update_follower_fetch_state(2, 5, T0 + 50)      # >= leader LEO at previous fetch (6)? no
    assert replica.last_caught_up_time_ms == T0 + 10
    p.update_follower_fetch_state(2, 6, T0 + 60)
    assert replica.last_caught_up_time_ms == T0 + 60


def test_a_refused_isr_change_keeps_the_old_isr(tmp_path: Path) -> None:
    p, _ = leader(tmp_path)
    p.maybe_shrink_isr(T0 + LAG + 1, LAG)
    assert p.pending_isr == (1,)
    assert not p.on_isr_change_completed(None)
    assert (p.isr, p.pending_isr) == ((1, 2, 3), None)


def test_a_follower_appends_the_leaders_batches_and_follows_its_high_watermark(
        tmp_path: Path) -> None:
    lp, _ = make(tmp_path, broker=1)
    fp, _ = make(tmp_path, broker=2)
    lp.make_leader(PartitionState(1, 3, (1, 2)), [1, 2], T0)
    assert fp.make_follower(PartitionState(1, 3, (1, 2)), [1, 2])
    assert not fp.make_follower(PartitionState(1, 3, (1, 2)), [1, 2])  # same term
    lp.append_records_to_leader(batch(3), T0)
    lp.append_records_to_leader(batch(2), T0)
    data = lp.log.read(0, 1 << 20, min_one_message=True, max_offset=lp.log.log_end_offset).read()
    fp.append_records_to_follower(data, leader_high_watermark=0, now_ms=T0)
    assert (fp.log.log_end_offset, fp.log.high_watermark) == (5, 0)
    assert lp.update_follower_fetch_state(2, 5, T0)
    fp.update_follower_high_watermark(lp.log.high_watermark)
    assert fp.log.high_watermark == 5
    assert lp.log.read_all_bytes() == fp.log.read_all_bytes()
    with pytest.raises(NotLeaderOrFollowerError):
        fp.append_records_to_leader(batch(1), T0)


def test_single_node_needs_no_isr_manager(tmp_path: Path) -> None:
    log = Log(str(tmp_path / "solo-0"), LogConfig.from_props({}))
    p = Partition("solo", 0, log, 1)
    p.make_leader(PartitionState(1, 0, (1,)), [1], T0)
    p.append_records_to_leader(batch(2), T0)
    assert p.log.high_watermark == 2
    assert p.maybe_shrink_isr(T0 + 10 * LAG, LAG) == []
