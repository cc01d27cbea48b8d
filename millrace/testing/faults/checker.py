"""The verdict on a fault run: the history against what the replicas hold.

``check`` is a pure function of the ``History`` and the replica logs read from disk (so
it is unit-tested on synthetic histories, and its self-test injects anomalies into a
real run's data).  What it requires, with Jepsen's names where they exist:

- **replicas agree** (divergence): for every partition, each replica's batches below the
  high watermark are byte-identical to those of the replica with the highest watermark
  (a replica that is shorter than that watermark is divergent too);
- **lost-write**: every ``ok`` send is present in the committed log;
- **inconsistent offset**: ... at the partition and offset it was acknowledged at;
- **duplicate**: no value appears at two offsets (idempotence);
- **nonmonotonic-send**: one producer's values appear in one partition in send order;
- **phantom**: no value that was never sent, and no ``fail`` send present;
- **committed offsets never go backwards** (per group and partition, as the coordinator
  reported them over time);
- **ownership**: at the end every partition is owned by exactly one group member;
- **unconsumed** (at-least-once): every ``ok`` value was seen by the group (checked only
  when the run says its readers caught up).

``info`` sends (unknown outcome) may be present or absent, but never twice.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from millrace.testing.faults.history import History, parse_value
from millrace.testing.faults.replica_logs import ReplicaLog

EXAMPLES = 5  # anomalies quoted per kind in a report


@dataclass
class Report:
    acknowledged: int = 0
    unknown: int = 0
    failed: int = 0
    unknown_present: int = 0
    committed_records: int = 0
    commits_reordered_by_client: int = 0
    lost: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    divergent: list[str] = field(default_factory=list)
    commits_backwards: list[str] = field(default_factory=list)
    ownership: list[str] = field(default_factory=list)
    unconsumed: list[str] = field(default_factory=list)

    ANOMALIES = ("lost", "misplaced", "duplicated", "reordered", "phantom", "divergent",
                 "commits_backwards", "ownership", "unconsumed")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, k) for k in self.ANOMALIES)

    def counts(self) -> dict[str, int]:
        return {k: len(getattr(self, k)) for k in self.ANOMALIES}

    def summary(self) -> str:
        head = (f"{self.acknowledged} acknowledged, {self.unknown} unknown "
                f"({self.unknown_present} present), {self.failed} failed; "
                f"{self.committed_records} committed records")
        bad = {k: v for k, v in self.counts().items() if v}
        if not bad:
            return head + "; no anomaly"
        lines = [head + "; ANOMALIES: " + ", ".join(f"{k}={v}" for k, v in bad.items())]
        for k in bad:
            for example in getattr(self, k)[:EXAMPLES]:
                lines.append(f"  {k}: {example}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "acknowledged": self.acknowledged, "unknown": self.unknown,
                "unknown_present": self.unknown_present, "failed": self.failed,
                "committed_records": self.committed_records,
                "commits_reordered_by_client": self.commits_reordered_by_client,
                **self.counts(),
                "examples": {k: getattr(self, k)[:EXAMPLES] for k in self.ANOMALIES
                             if getattr(self, k)}}


def check_replicas(replicas: dict[tuple[str, int], dict[int, ReplicaLog]], report: Report
                   ) -> dict[tuple[str, int], ReplicaLog]:
    """Compare replicas below the high watermark; return the reference replica (highest
    watermark) of each partition."""
    reference: dict[tuple[str, int], ReplicaLog] = {}
    for tp, by_broker in sorted(replicas.items()):
        ref = max(by_broker.values(), key=lambda r: (r.high_watermark, r.log_end_offset))
        hw = ref.high_watermark if ref.high_watermark >= 0 else ref.log_end_offset
        reference[tp] = ref
        expected = ref.bytes_below(hw)
        for broker, r in sorted(by_broker.items()):
            if r is ref:
                continue
            if r.log_end_offset < hw:
                report.divergent.append(
                    f"{tp[0]}-{tp[1]}: broker {broker} ends at {r.log_end_offset}, below the "
                    f"high watermark {hw} of broker {ref.broker}")
                continue
            mine = r.bytes_below(hw)
            if mine != expected:
                first = next((f"offset {a[0]}" for a, b in zip(mine, expected, strict=False)
                              if a != b), f"{len(mine)} vs {len(expected)} batches")
                report.divergent.append(
                    f"{tp[0]}-{tp[1]}: broker {broker} differs from broker {ref.broker} "
                    f"below the high watermark {hw} (first difference at {first})")
    return reference


def committed(ref: ReplicaLog) -> Iterable[tuple[int, bytes | None]]:
    hw = ref.high_watermark if ref.high_watermark >= 0 else ref.log_end_offset
    return ((o, v) for o, v in ref.records if o < hw)


def check(history: History, replicas: dict[tuple[str, int], dict[int, ReplicaLog]], *,
          consumed: set[bytes] | None = None) -> Report:
    report = Report()
    reference = check_replicas(replicas, report)

    # where each value is, in the committed part of the log
    found: dict[bytes, list[tuple[str, int, int]]] = defaultdict(list)
    order: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)
    sent = {op.value: op for op in history.sends}
    for (topic, p), ref in sorted(reference.items()):
        for offset, value in committed(ref):
            report.committed_records += 1
            if value is None:
                report.phantom.append(f"{topic}-{p}@{offset}: a record with no value")
                continue
            found[value].append((topic, p, offset))
            try:
                producer, seq = parse_value(value)
            except ValueError:
                report.phantom.append(f"{topic}-{p}@{offset}: {value[:40]!r} is no workload "
                                      "value")
                continue
            if value not in sent:
                report.phantom.append(f"{topic}-{p}@{offset}: {value[:40]!r} was never sent")
            order[(producer, topic, p)].append((offset, seq))

    for value, places in found.items():
        if len(places) > 1:
            report.duplicated.append(
                f"{value[:40]!r} at " + ", ".join(f"{t}-{p}@{o}" for t, p, o in places))

    for op in history.sends:
        places = found.get(op.value, [])
        if op.outcome == "ok":
            report.acknowledged += 1
            if not places:
                report.lost.append(f"{op.value[:40]!r} acknowledged at {op.topic}-"
                                   f"{op.partition}@{op.offset} (t={op.completed:.2f}s) is "
                                   "missing")
            elif op.offset >= 0 and (op.topic, op.partition, op.offset) not in places:
                report.misplaced.append(
                    f"{op.value[:40]!r} acknowledged at {op.topic}-{op.partition}@{op.offset}, "
                    "found at " + ", ".join(f"{t}-{p}@{o}" for t, p, o in places))
            if consumed is not None and op.value not in consumed:
                report.unconsumed.append(f"{op.value[:40]!r} ({op.topic}-{op.partition}"
                                         f"@{op.offset}) never reached the group")
        elif op.outcome == "fail":
            report.failed += 1
            if places:
                report.phantom.append(f"{op.value[:40]!r} failed ({op.error}) but is at "
                                      + ", ".join(f"{t}-{p}@{o}" for t, p, o in places))
        else:
            report.unknown += 1
            report.unknown_present += bool(places)

    for (producer, topic, p), entries in sorted(order.items()):
        for (o1, s1), (o2, s2) in itertools.pairwise(entries):
            if s2 <= s1:
                report.reordered.append(f"{topic}-{p}: {producer}'s #{s2} at offset {o2} "
                                        f"after #{s1} at offset {o1}")

    check_commits(history, report)
    check_ownership(history, sorted(reference), report)
    return report


def check_commits(history: History, report: Report, slack: float = 1.0) -> None:
    """The committed offsets OffsetFetch returned must never go backwards -- unless the
    coordinator was handed the lower offset again: a member's commit of it acknowledged
    after the higher one was seen (librdkafka retries asynchronous commits, so an old
    one can arrive after a newer one; that is the client's doing, counted apart)."""
    acked: dict[tuple[str, str, int], list[tuple[float, int]]] = defaultdict(list)
    for c in history.commits:
        if c.kind == "acked":
            acked[(c.group, c.topic, c.partition)].append((c.at, c.offset))
    last: dict[tuple[str, str, int], tuple[int, float]] = {}
    for c in sorted((c for c in history.commits if c.kind == "observed"), key=lambda c: c.at):
        key = (c.group, c.topic, c.partition)
        if key in last and c.offset < last[key][0]:
            high, seen_at = last[key]
            if any(offset == c.offset and at >= seen_at - slack for at, offset in acked[key]):
                report.commits_reordered_by_client += 1
            else:
                report.commits_backwards.append(
                    f"group {c.group} {c.topic}-{c.partition}: committed {high} at "
                    f"t={seen_at:.2f}s, then {c.offset} at t={c.at:.2f}s, which no member "
                    "committed again")
        last[key] = (c.offset, c.at)


def check_ownership(history: History, partitions: list[tuple[str, int]], report: Report
                    ) -> None:
    if not history.final_assignment:
        return
    owners: dict[tuple[str, int], list[str]] = defaultdict(list)
    for member, tps in history.final_assignment.items():
        for tp in tps:
            owners[tuple(tp)].append(member)  # type: ignore[index]
    for tp in partitions:
        if len(owners.get(tp, [])) != 1:
            report.ownership.append(f"{tp[0]}-{tp[1]} is owned by {owners.get(tp, [])}")
