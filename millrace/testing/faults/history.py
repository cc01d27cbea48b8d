"""The history of a fault run: what the clients did and saw, and what the nemesis did.

- ``SendOp``: one record sent by a workload producer: its unique value, the partition
  it was sent to, and its outcome -- ``ok`` (acknowledged, with the offset), ``fail`` (the
  client refused it before anything was sent: nothing can be on the broker) or ``info``
  (unknown: a timeout or a broker error after the request may have been written; Jepsen's
  word for an indeterminate operation).  A record whose outcome never came is ``info``.
- ``CommitObservation``: a consumer group's committed offset for a partition, as the
  group coordinator reported it at a moment of the run.
- ``FaultEvent``: one fault (kind, what it hit, when injected, healed and settled).

Times are seconds since the run started (``History.now``, a monotonic clock).  A history
is written as JSON lines (``dump``) and read back (``load``) so a run can be checked and
plotted again without running it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Outcome = Literal["ok", "fail", "info"]


@dataclass
class SendOp:
    producer: str  # the writer's name, e.g. "confluent-0"
    value: bytes  # unique in the run: producer name and sequence number
    topic: str
    partition: int
    invoked: float
    outcome: Outcome = "info"
    offset: int = -1
    completed: float | None = None
    error: str | None = None

    @property
    def seq(self) -> int:
        return parse_value(self.value)[1]


@dataclass
class CommitObservation:
    group: str
    topic: str
    partition: int
    offset: int
    at: float
    # "observed": what OffsetFetch returned; "acked": a member's commit the coordinator
    # acknowledged (librdkafka's commit callback), at the time the callback ran
    kind: str = "observed"


@dataclass
class FaultEvent:
    kind: str
    description: str
    start: float
    healed: float | None
    settled: float | None


def make_value(producer: str, seq: int, pad: int = 0) -> bytes:
    """``b"<producer>:<seq>"`` (plus ``|`` and padding to reach a record size)."""
    v = f"{producer}:{seq:09d}".encode()
    return v + b"|" + b"x" * pad if pad else v


def parse_value(value: bytes) -> tuple[str, int]:
    """``(producer, seq)`` of a workload value; ValueError for anything else."""
    head = value.split(b"|", 1)[0]
    producer, _, seq = head.decode("ascii").rpartition(":")
    if not producer or not seq.isdigit():
        raise ValueError(f"not a workload value: {value[:40]!r}")
    return producer, int(seq)


@dataclass
class History:
    sends: list[SendOp] = field(default_factory=list)
    commits: list[CommitObservation] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)
    # final group state: member -> assigned (topic, partition)s, read once the run settled
    final_assignment: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._t0 = time.monotonic()
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def invoke(self, producer: str, value: bytes, topic: str, partition: int) -> SendOp:
        op = SendOp(producer, value, topic, partition, self.now())
        with self._lock:
            self.sends.append(op)
        return op

    def complete(self, op: SendOp, outcome: Outcome, offset: int = -1,
                 error: str | None = None) -> None:
        op.outcome, op.offset, op.error, op.completed = outcome, offset, error, self.now()

    def add_commit(self, c: CommitObservation) -> None:
        with self._lock:
            self.commits.append(c)

    def add_fault(self, e: FaultEvent) -> None:
        with self._lock:
            self.faults.append(e)

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)

    # ------------------------------------------------------------------ files
    def dump(self, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for s in self.sends:
                d = asdict(s)
                d["value"] = s.value.decode("ascii", errors="replace")
                f.write(json.dumps({"type": "send", **d}) + "\n")
            for c in self.commits:
                f.write(json.dumps({"type": "commit", **asdict(c)}) + "\n")
            for e in self.faults:
                f.write(json.dumps({"type": "fault", **asdict(e)}) + "\n")
            f.write(json.dumps({"type": "assignment", "members": self.final_assignment}) + "\n")
            for n in self.notes:
                f.write(json.dumps({"type": "note", "text": n}) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        h = cls()
        with open(path, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                kind = d.pop("type")
                if kind == "send":
                    d["value"] = d["value"].encode("ascii")
                    h.sends.append(SendOp(**d))
                elif kind == "commit":
                    h.commits.append(CommitObservation(**d))
                elif kind == "fault":
                    h.faults.append(FaultEvent(**d))
                elif kind == "assignment":
                    h.final_assignment = {m: [tuple(tp) for tp in tps]
                                          for m, tps in d["members"].items()}
                elif kind == "note":
                    h.notes.append(d["text"])
        return h
