"""The fault harness's checker on synthetic histories: a clean history passes, and every
kind of anomaly it claims to find is found (the checker's own self-test, as Jepsen's
checkers are tested: inject the anomaly, require the report).

A replica log here is built by hand (offsets, values, batch bytes); the real ones are
read from broker files by ``replica_logs`` and exercised by ``tests/faults``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.testing.faults.checker import Report, check
from millrace.testing.faults.history import (
    CommitObservation,
    History,
    make_value,
    parse_value,
)
from millrace.testing.faults.replica_logs import ReplicaLog

T = "t"


def replica(broker: int, partition: int, values: list[bytes], hw: int | None = None,
            corrupt_at: int | None = None) -> ReplicaLog:
    """One replica holding ``values`` at offsets 0.., one record per batch."""
    r = ReplicaLog(broker, T, partition, 0, len(values), len(values) if hw is None else hw)
    for offset, v in enumerate(values):
        data = b"batch:" + v
        if offset == corrupt_at:
            data = b"batch:something else"
        r.batches.append((offset, offset, data))
        r.records.append((offset, v))
    return r


def cluster_of(partitions: dict[int, list[bytes]]) -> dict[tuple[str, int], dict[int, ReplicaLog]]:
    return {(T, p): {b: replica(b, p, vs) for b in (1, 2, 3)} for p, vs in partitions.items()}


def acked(h: History, producer: str, seq: int, partition: int, offset: int) -> bytes:
    v = make_value(producer, seq)
    op = h.invoke(producer, v, T, partition)
    h.complete(op, "ok", offset)
    return v


def clean_run() -> tuple[History, dict[int, list[bytes]]]:
    h = History()
    logs: dict[int, list[bytes]] = {0: [], 1: []}
    for seq in range(6):
        p = seq % 2
        logs[p].append(acked(h, "w", seq, p, len(logs[p])))
    h.final_assignment = {"m0": [(T, 0)], "m1": [(T, 1)]}
    for at, offset in enumerate([1, 2, 3]):
        h.add_commit(CommitObservation("g", T, 0, offset, float(at)))
    return h, logs


def test_a_clean_history_passes() -> None:
    h, logs = clean_run()
    r = check(h, cluster_of(logs), consumed=set(logs[0] + logs[1]))
    assert r.ok, r.summary()
    assert (r.acknowledged, r.unknown, r.committed_records) == (6, 0, 6)
    assert "no anomaly" in r.summary()


def test_values_round_trip() -> None:
    assert parse_value(make_value("confluent-0", 42, pad=10)) == ("confluent-0", 42)
    with pytest.raises(ValueError, match="not a workload value"):
        parse_value(b"hello")


def test_a_lost_acknowledged_record_is_reported() -> None:
    h, logs = clean_run()
    logs[0].pop()  # the last acknowledged record of partition 0 is not in the log
    r = check(h, cluster_of(logs))
    assert not r.ok and len(r.lost) == 1 and "missing" in r.lost[0]


def test_a_record_at_another_offset_is_reported() -> None:
    h, logs = clean_run()
    logs[0][0], logs[0][1] = logs[0][1], logs[0][0]
    r = check(h, cluster_of(logs))
    assert len(r.misplaced) == 2
    assert len(r.reordered) == 1  # and the producer's order is broken


def test_a_duplicate_is_reported() -> None:
    h, logs = clean_run()
    logs[1].append(logs[1][0])
    r = check(h, cluster_of(logs))
    assert len(r.duplicated) == 1 and f"{T}-1@0" in r.duplicated[0]


def test_an_unknown_outcome_may_be_present_or_absent_but_never_twice() -> None:
    h, logs = clean_run()
    present = h.invoke("w", make_value("w", 100), T, 0)
    h.complete(present, "info", error="timed out")
    h.invoke("w", make_value("w", 101), T, 0)  # never completed: info too
    logs[0].append(present.value)
    r = check(h, cluster_of(logs))
    assert r.ok, r.summary()
    assert (r.unknown, r.unknown_present) == (2, 1)
    logs[0].append(present.value)
    assert len(check(h, cluster_of(logs)).duplicated) == 1


def test_phantoms_are_reported() -> None:
    h, logs = clean_run()
    logs[0].append(make_value("w", 999))  # never sent
    logs[1].append(b"garbage")  # no workload value
    failed = h.invoke("w", make_value("w", 7), T, 1)
    h.complete(failed, "fail", error="refused before sending")
    logs[1].append(failed.value)
    r = check(h, cluster_of(logs))
    assert len(r.phantom) == 3


def test_divergent_replicas_are_reported() -> None:
    h, logs = clean_run()
    replicas = cluster_of(logs)
    replicas[(T, 0)][2] = replica(2, 0, logs[0], corrupt_at=1)
    replicas[(T, 1)][3] = replica(3, 1, logs[1][:1], hw=1)  # shorter than the HW
    r = check(h, replicas)
    assert len(r.divergent) == 2
    assert any("offset 1" in d for d in r.divergent)
    assert any("below the high watermark" in d and "ends at 1" in d for d in r.divergent)


def test_replicas_may_differ_above_the_high_watermark() -> None:
    h, logs = clean_run()
    replicas = cluster_of(logs)
    longer = replica(2, 0, [*logs[0], make_value("w", 50)], hw=len(logs[0]))
    h.invoke("w", make_value("w", 50), T, 0)  # unknown outcome, not committed
    replicas[(T, 0)][2] = longer
    assert check(h, replicas).ok


def test_committed_offsets_going_backwards_are_reported() -> None:
    h, logs = clean_run()
    h.add_commit(CommitObservation("g", T, 0, 2, 10.0))  # after 3
    r = check(h, cluster_of(logs))
    assert len(r.commits_backwards) == 1 and "committed 3" in r.commits_backwards[0]


def test_a_partition_owned_twice_or_not_at_all_is_reported() -> None:
    h, logs = clean_run()
    h.final_assignment = {"m0": [(T, 0)], "m1": [(T, 0)]}
    r = check(h, cluster_of(logs))
    assert len(r.ownership) == 2  # t-0 twice, t-1 by nobody


def test_an_acknowledged_record_the_group_never_saw_is_reported() -> None:
    h, logs = clean_run()
    r = check(h, cluster_of(logs), consumed=set(logs[0]))
    assert len(r.unconsumed) == 3


def test_a_history_survives_its_file(tmp_path: Path) -> None:
    h, logs = clean_run()
    h.note("a note")
    h.dump(tmp_path / "h.jsonl")
    again = History.load(tmp_path / "h.jsonl")
    assert [(s.value, s.outcome, s.offset) for s in again.sends] == \
        [(s.value, s.outcome, s.offset) for s in h.sends]
    assert again.final_assignment == h.final_assignment and again.notes == ["a note"]
    assert check(again, cluster_of(logs)).to_json() == check(h, cluster_of(logs)).to_json()


def test_report_json_names_every_anomaly_kind() -> None:
    assert set(Report().to_json()) >= set(Report.ANOMALIES) | {"ok", "acknowledged"}


def test_a_lower_commit_the_coordinator_was_handed_again_is_the_clients_doing() -> None:
    """librdkafka retries asynchronous commits: an old one acknowledged after a newer one
    moves the group back, and the coordinator only did as told; an offset that goes back
    with no such acknowledgement is the broker's anomaly."""
    h, logs = clean_run()  # observed 1, 2, 3 at t=0..2
    h.add_commit(CommitObservation("g", T, 0, 2, 10.0))
    h.add_commit(CommitObservation("g", T, 0, 2, 9.8, kind="acked"))
    r = check(h, cluster_of(logs))
    assert r.ok and r.commits_reordered_by_client == 1, r.summary()
    h.add_commit(CommitObservation("g", T, 0, 1, 11.0))  # never handed 1 again
    r = check(h, cluster_of(logs))
    assert len(r.commits_backwards) == 1 and "no member committed again" in \
        r.commits_backwards[0]
