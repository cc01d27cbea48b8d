"""Burrow's partition rules and group status over hand-made windows (each status with
the window that just fails to reach it as its negative control), and the window's
bookkeeping: min-distance, the ring of ``intervals``, negative lag, forgetting."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from millrace.broker.metrics.burrow import (
    BurrowConfig,
    BurrowEvaluator,
    CommitEntry,
    PartitionStatus,
    Status,
    group_status,
    partition_status,
)

T0 = 1_700_000_000_000
S = 1000


def window(*entries: tuple[int, int, int | None]) -> list[CommitEntry]:
    """(offset, seconds after T0, lag at receipt) per commit, oldest first."""
    return [CommitEntry(offset, T0 + s * S, lag) for offset, s, lag in entries]


def status(w: Sequence[CommitEntry], now_s: int, current_lag: int = 10,
           log_ends: Sequence[int] = (1_000_000,), allowed_lag: int = 0) -> Status:
    return partition_status(w, log_ends, current_lag, T0 + now_s * S, allowed_lag)


def test_enum_numbers_are_burrows() -> None:
    assert [(s.name, int(s)) for s in Status] == [
        ("NOTFOUND", 0), ("OK", 1), ("WARN", 2), ("ERR", 3), ("STOP", 4), ("STALL", 5),
        ("REWIND", 6)]


# ---------------------------------------------------------------------- precondition
def test_no_rule_applies_while_current_lag_is_within_allowed_lag() -> None:
    stopped = window((10, 0, 5), (20, 10, 5))
    assert status(stopped, now_s=100, current_lag=1) is Status.STOP           # control
    assert status(stopped, now_s=100, current_lag=0) is Status.OK
    assert status(stopped, now_s=100, current_lag=3, allowed_lag=3) is Status.OK
    assert status(stopped, now_s=100, current_lag=4, allowed_lag=3) is Status.STOP


def test_an_empty_window_is_ok() -> None:
    assert status([], now_s=100) is Status.OK


# ---------------------------------------------------------------------- STOP
def test_stop_when_the_silence_outlasts_the_window_span() -> None:
    w = window((10, 0, 5), (20, 5, 5), (30, 10, 5))           # span 10 s
    assert status(w, now_s=21) is Status.STOP                  # 11 s silent > 10 s
    assert status(w, now_s=20) is not Status.STOP              # 10 s: not more than it
    assert status(w, now_s=20) is Status.WARN                  # (lag never decreased)


def test_no_stop_when_the_last_commit_reached_a_recently_polled_log_end() -> None:
    w = window((10, 0, 5), (20, 5, 5), (30, 10, 5))
    assert status(w, now_s=100, log_ends=(35, 40)) is Status.STOP     # behind them all
    assert status(w, now_s=100, log_ends=(30, 40)) is not Status.STOP  # at one
    assert status(w, now_s=100, log_ends=(25, 40)) is not Status.STOP  # ahead of one
    assert status(w, now_s=100, log_ends=()) is Status.STOP            # nothing polled


def test_stop_outranks_rewind_and_stall() -> None:
    rewound = window((30, 0, 5), (10, 5, 5))
    assert status(rewound, now_s=100) is Status.STOP
    assert status(rewound, now_s=6) is Status.REWIND                    # control
    stalled = window((10, 0, 5), (10, 5, 5))
    assert status(stalled, now_s=100) is Status.STOP
    assert status(stalled, now_s=6) is Status.STALL                     # control


# ---------------------------------------------------------------------- REWIND
def test_rewind_when_a_commit_goes_back_and_stays_behind() -> None:
    w = window((10, 0, 5), (20, 1, 5), (15, 2, 9), (18, 3, 9))
    assert status(w, now_s=3) is Status.REWIND


def test_no_rewind_once_the_partition_recovered_to_the_earlier_offset() -> None:
    recovered = window((10, 0, 5), (20, 1, 5), (15, 2, 9), (20, 3, 4))
    assert status(recovered, now_s=3) is Status.OK              # lag decreased: OK
    past = window((10, 0, 5), (20, 1, 5), (15, 2, 9), (25, 3, 4))
    assert status(past, now_s=3) is Status.OK


def test_rewind_is_not_gated_by_lag_in_every_entry() -> None:
    w = window((10, 0, 0), (20, 1, 0), (5, 2, 7))
    assert status(w, now_s=2) is Status.REWIND


def test_any_unrecovered_drop_is_a_rewind() -> None:
    # the first drop recovered (30 -> 20 -> 30), the second (40 -> 35) did not
    w = window((30, 0, 5), (20, 1, 5), (30, 2, 5), (40, 3, 5), (35, 4, 5))
    assert status(w, now_s=4) is Status.REWIND


# ---------------------------------------------------------------------- STALL
def test_stall_when_the_same_offset_is_committed_with_lag() -> None:
    w = window((10, 0, 5), (10, 1, 6), (10, 2, 7))
    assert status(w, now_s=2) is Status.STALL


def test_no_stall_when_some_entry_had_no_lag() -> None:
    w = window((10, 0, 5), (10, 1, 0), (10, 2, 7))
    assert status(w, now_s=2) is Status.OK


def test_no_stall_when_the_offsets_move() -> None:
    w = window((10, 0, 5), (11, 1, 4), (11, 2, 3))
    assert status(w, now_s=2) is Status.OK


def test_allowed_lag_counts_as_no_lag_in_the_window() -> None:
    w = window((10, 0, 3), (10, 1, 3), (10, 2, 3))
    assert status(w, now_s=2, allowed_lag=3) is Status.OK
    assert status(w, now_s=2, allowed_lag=2) is Status.STALL


# ---------------------------------------------------------------------- WARN
def test_warn_when_offsets_advance_but_lag_never_decreases() -> None:
    w = window((10, 0, 5), (20, 1, 5), (30, 2, 6))
    assert status(w, now_s=2) is Status.WARN


def test_no_warn_when_the_lag_decreased_once() -> None:
    w = window((10, 0, 5), (20, 1, 6), (30, 2, 4))
    assert status(w, now_s=2) is Status.OK


def test_entries_of_unknown_lag_are_left_out_of_the_lag_rules() -> None:
    assert status(window((10, 0, None), (20, 1, 5), (30, 2, 6)), now_s=2) is Status.WARN
    assert status(window((10, 0, None), (20, 1, 6), (30, 2, 5)), now_s=2) is Status.OK
    assert status(window((10, 0, 0), (20, 1, None), (30, 2, 5)), now_s=2) is Status.OK


# ---------------------------------------------------------------------- the window
def test_commits_closer_than_min_distance_replace_the_newest_entry() -> None:
    ev = BurrowEvaluator(BurrowConfig(intervals=3, min_distance_ms=1000))
    tp = ("t", 0)
    ev.record_commit("g", tp, 10, T0, 5)
    ev.record_commit("g", tp, 12, T0 + 999, 3)      # too close: replaces, keeps the time
    assert ev.window("g", tp) == (CommitEntry(12, T0, 3),)
    ev.record_commit("g", tp, 14, T0 + 1000, 1)     # at min-distance: a new entry
    assert ev.window("g", tp) == (CommitEntry(12, T0, 3), CommitEntry(14, T0 + 1000, 1))


def test_the_window_keeps_the_last_intervals_commits_and_no_negative_lag() -> None:
    ev = BurrowEvaluator(BurrowConfig(intervals=3, min_distance_ms=0))
    for i in range(5):
        ev.record_commit("g", ("t", 0), i, T0 + i, 2 - i)
    assert ev.window("g", ("t", 0)) == (CommitEntry(2, T0 + 2, 0), CommitEntry(3, T0 + 3, 0),
                                        CommitEntry(4, T0 + 4, 0))


def test_polled_log_ends_keep_the_last_intervals_per_isolation() -> None:
    ev = BurrowEvaluator(BurrowConfig(intervals=2))
    for end in (5, 6, 7):
        ev.record_log_end(("t", 0), end)
    ev.record_log_end(("t", 0), 4, read_committed=True)
    assert ev.recent_log_ends(("t", 0)) == (6, 7)
    assert ev.recent_log_ends(("t", 0), read_committed=True) == (4,)
    ev.retain_log_ends([(("t", 0), True)])
    assert ev.recent_log_ends(("t", 0)) == ()


def test_minimum_complete_holds_the_rules_back_until_the_window_fills() -> None:
    def stalled(minimum: float) -> Status:
        ev = BurrowEvaluator(BurrowConfig(intervals=4, min_distance_ms=0,
                                          minimum_complete=minimum))
        for i in range(2):
            ev.record_commit("g", ("t", 0), 10, T0 + i, 5)
        return ev.evaluate_partition("g", ("t", 0), 5, T0 + 1).status

    assert stalled(0.75) is Status.OK       # 2 of 4 < 0.75
    assert stalled(0.5) is Status.STALL     # 2 of 4 reaches 0.5


def test_forgetting_groups_and_partitions() -> None:
    ev = BurrowEvaluator()
    ev.record_commit("a", ("t", 0), 1, T0, 0)
    ev.record_commit("a", ("t", 1), 1, T0, 0)
    ev.record_commit("b", ("t", 0), 1, T0, 0)
    ev.retain_groups(["a"])
    ev.retain_partitions("a", [("t", 1)])
    assert ev.window("b", ("t", 0)) == ()
    assert ev.window("a", ("t", 0)) == ()
    assert len(ev.window("a", ("t", 1))) == 1


def test_intervals_must_be_positive() -> None:
    with pytest.raises(ValueError):
        BurrowEvaluator(BurrowConfig(intervals=0))


# ---------------------------------------------------------------------- groups
def part(p: int, st: Status, lag: int, complete: float = 1.0) -> PartitionStatus:
    return PartitionStatus("t", p, st, lag, complete, ())


@pytest.mark.parametrize(("statuses", "expected"), [
    ((Status.OK, Status.OK), Status.OK),
    ((Status.OK, Status.WARN), Status.WARN),
    ((Status.WARN, Status.STOP), Status.ERR),
    ((Status.OK, Status.STALL), Status.ERR),
    ((Status.REWIND, Status.WARN), Status.ERR),
])
def test_group_status_is_the_worst_partition_with_errors_as_err(
        statuses: tuple[Status, ...], expected: Status) -> None:
    assert group_status("g", [part(i, s, 1) for i, s in enumerate(statuses)]).status \
        is expected


def test_group_maxlag_totallag_and_complete() -> None:
    g = group_status("g", [part(0, Status.OK, 5), part(1, Status.WARN, 9, 0.5),
                           part(2, Status.OK, 9), part(3, Status.OK, 0)])
    assert g.maxlag is not None and (g.maxlag.partition, g.maxlag.current_lag) == (1, 9)
    assert g.totallag == 23
    assert g.complete == 0.75


def test_a_group_without_partitions_is_ok_and_not_complete() -> None:
    g = group_status("g", [])
    assert (g.status, g.complete, g.maxlag, g.totallag) == (Status.OK, 0.0, None, 0)


def test_an_unknown_group_is_notfound() -> None:
    ev = BurrowEvaluator()
    assert ev.evaluate("nope", None, T0).status is Status.NOTFOUND
    assert ev.evaluate("known", {}, T0).status is Status.OK


def test_evaluate_reads_windows_log_ends_and_current_lags() -> None:
    ev = BurrowEvaluator(BurrowConfig(intervals=2, min_distance_ms=0))
    for i, offset in enumerate((10, 20)):
        ev.record_commit("g", ("t", 0), offset, T0 + i * S, 5)
        ev.record_commit("g", ("t", 1), offset, T0 + i * S, 5)
    ev.record_log_end(("t", 1), 20)          # partition 1 was caught up at a poll
    g = ev.evaluate("g", {("t", 0): 7, ("t", 1): 7}, T0 + 10 * S)
    assert [(p.partition, p.status) for p in g.partitions] == [(0, Status.STOP),
                                                               (1, Status.WARN)]
    assert (g.status, g.complete, g.totallag) == (Status.ERR, 1.0, 14)
    assert [p.status for p in ev.evaluate("g", {("t", 0): 0}, T0 + 10 * S).partitions] == \
        [Status.OK]
