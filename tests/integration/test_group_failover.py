"""A consumer group surviving the loss of members, against a real broker process.

Three millrace consumers, each a child process (``group_member.py``), share a topic of 12
partitions while a producer keeps appending numbered records.  One member is killed with
SIGKILL mid-stream (the group notices only when its session times out), one is closed
cleanly with SIGTERM (it leaves the group), and the survivor carries on until it has
caught up.  From the members' logs and the broker's committed offsets the test proves:

* at-least-once: every record the producer got an acknowledgement for was processed;
* no double ownership: within one generation no partition is assigned to, or processed
  by, two members (a member's records are labelled with the generation it owns them in);
* commits never go backwards, per partition: in the commit log ordered by generation
  (and within a generation by its single owner's sequence), and in the broker's
  committed offsets sampled with OffsetFetch all along.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 12
MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")
WAIT = 90.0  # a generous bound on each phase; the test asserts outcomes, not speed


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by SIGKILL
            continue
    return entries


def wait_for(what: str, condition: Callable[[], bool], diagnostics: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}:\n{diagnostics()}")
        time.sleep(0.1)


class NumberedProducer(threading.Thread):
    """Sends "0", "1", ... round-robin over the partitions until stopped; remembers every
    acknowledged (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer: Any = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                            "acks": "all"})
        self.acked: dict[tuple[int, int], str] = {}
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self._halt.is_set():
            value = str(i)

            def done(metadata: Any, error: BaseException | None, value: str = value) -> None:
                with self._lock:
                    if error is not None:
                        self.errors.append(error)
                    else:
                        self.acked[(metadata.partition, metadata.offset)] = value

            self.producer.send(ProducerRecord(self.topic, value.encode(),
                                              partition=i % PARTITIONS), done)
            i += 1
            if i % 50 == 0:
                time.sleep(0.05)  # a steady stream, not a flood: the consumers must keep up

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def finish(self) -> None:
        self._halt.set()
        self.join(30)
        self.producer.flush(30)
        self.producer.close(30)


class CommittedOffsetsSampler(threading.Thread):
    """Reads the group's committed offsets from the broker (OffsetFetch) over and over."""

    def __init__(self, admin: KafkaAdminClient, group: str) -> None:
        super().__init__(daemon=True)
        self.admin, self.group = admin, group
        self.samples: list[dict[int, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            offsets = self.admin.list_group_offsets(self.group, include_lag=False)
            self.samples.append({tp.partition: o.offset for tp, o in offsets.items()})
            self._halt.wait(0.2)

    def finish(self) -> None:
        self._halt.set()
        self.join(30)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


def test_group_survives_a_killed_and_a_closed_member(broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    topic, group = f"failover-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, default_api_timeout_ms=15_000)
    members: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: tmp_path / f"{name}.log" for name in ("killed", "closed", "survivor")}
    producer = NumberedProducer(broker.bootstrap, topic)
    sampler = CommittedOffsetsSampler(admin, group)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).all()
        producer.start()
        sampler.start()
        for name, path in logs.items():
            with open(tmp_path / f"{name}.err", "wb") as err:
                members[name] = subprocess.Popen(
                    [sys.executable, str(MEMBER_SCRIPT), broker.bootstrap, topic, group, name,
                     str(path)], stderr=err)

        def diagnostics() -> str:
            return "\n".join(f"--- {name} (rc={members[name].poll()})\n"
                             + (tmp_path / f"{name}.err").read_text(errors="replace")[-3000:]
                             + "\n".join(json.dumps(e) for e in read_log(path)
                                         if e["e"] != "rec")[-3000:]
                             for name, path in logs.items())

        def latest_assignment(name: str) -> dict[str, Any] | None:
            assigned = [e for e in read_log(logs[name]) if e["e"] == "assigned"]
            return assigned[-1] if assigned else None

        def processed_since(name: str, generation: int, at_least: int) -> bool:
            return sum(e["e"] == "rec" and e["gen"] >= generation
                       for e in read_log(logs[name])) >= at_least

        def stable_with(names: list[str], at_least: int = 1) -> int | None:
            """The generation in which exactly ``names`` share all partitions, once each of
            them processed ``at_least`` records in it."""
            latest = [latest_assignment(n) for n in names]
            if any(a is None for a in latest):
                return None
            generations = {a["gen"] for a in latest if a is not None}
            if len(generations) != 1:
                return None
            owned = [p for a in latest if a is not None for p in a["owned"]]
            if sorted(owned) != list(range(PARTITIONS)):
                return None
            (generation,) = generations
            if not all(processed_since(n, generation, at_least) for n in names):
                return None
            return generation

        # 1. three members share the partitions and make progress
        three = ["killed", "closed", "survivor"]
        wait_for("three members sharing the partitions",
                 lambda: stable_with(three, at_least=200) is not None, diagnostics)
        first = stable_with(three, at_least=200)
        assert first is not None

        # 2. SIGKILL one mid-stream: once its session times out the others take over
        members["killed"].send_signal(signal.SIGKILL)
        assert members["killed"].wait(10) == -signal.SIGKILL
        wait_for("two members after the kill",
                 lambda: (stable_with(["closed", "survivor"]) or 0) > first, diagnostics)
        second = stable_with(["closed", "survivor"])
        assert second is not None

        # 3. close one cleanly: it leaves the group, the survivor takes everything
        members["closed"].send_signal(signal.SIGTERM)
        assert members["closed"].wait(60) == 0, diagnostics()
        assert read_log(logs["closed"])[-1]["e"] == "closed"
        wait_for("the survivor alone", lambda: (stable_with(["survivor"]) or 0) > second,
                 diagnostics)

        # 4. stop producing; the survivor catches up (its commits reach the log end)
        producer.finish()
        assert not producer.errors, producer.errors[:3]
        produced = dict(producer.acked)
        ends: dict[int, int] = defaultdict(int)
        for partition, offset in produced:
            ends[partition] = max(ends[partition], offset + 1)

        def caught_up() -> bool:
            committed = admin.list_group_offsets(group, include_lag=False)
            return all(committed.get(TopicPartition(topic, p)) is not None
                       and committed[TopicPartition(topic, p)].offset == ends[p]
                       for p in range(PARTITIONS))

        wait_for("the survivor to catch up", caught_up, diagnostics)
        members["survivor"].send_signal(signal.SIGTERM)
        assert members["survivor"].wait(60) == 0, diagnostics()
        sampler.finish()
        final = admin.list_group_offsets(group)
    finally:
        for proc in members.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        if producer.is_alive():
            producer.finish()
        if sampler.is_alive():
            sampler.finish()
        admin.close()

    entries = {name: read_log(path) for name, path in logs.items()}
    records = [e for log in entries.values() for e in log if e["e"] == "rec"]

    # at-least-once: every acknowledged record was processed, with the value it was sent with
    processed = {(e["p"], e["o"]): e["v"] for e in records}
    missing = sorted(set(produced) - set(processed))
    assert not missing, f"{len(missing)} records never processed, e.g. {missing[:10]}"
    assert all(processed[key] == value for key, value in produced.items())
    assert len(produced) > 1000 and len(records) >= len(produced)

    # no double ownership: per generation, members' partitions are disjoint ...
    assigned: dict[int, dict[str, set[int]]] = defaultdict(dict)
    for log in entries.values():
        for e in log:
            if e["e"] == "assigned":
                assigned[e["gen"]][e["member"]] = set(e["owned"])
    for generation, owners in assigned.items():
        seen: set[int] = set()
        for partitions in owners.values():
            assert not seen & partitions, f"generation {generation}: {owners}"
            seen |= partitions
    assert len(assigned) >= 3  # at least: three members, two, one
    # ... and no partition's records were processed by two members in one generation
    processors: dict[tuple[int, int], set[str]] = defaultdict(set)
    for e in records:
        processors[(e["gen"], e["p"])].add(e["member"])
        assert e["p"] in assigned[e["gen"]][e["member"]], e
    doubled = {k: v for k, v in processors.items() if len(v) > 1}
    assert not doubled, doubled

    # commits never go backwards: the commit log, ordered by generation, then by the
    # single owner's own sequence within it ...
    commits = sorted((e["gen"], e["seq"], e["member"], e["offsets"])
                     for log in entries.values() for e in log if e["e"] == "commit")
    last: dict[int, tuple[int, int]] = {}
    for generation, _seq, _member, offsets in commits:
        for p, offset in offsets.items():
            previous = last.get(int(p))
            assert previous is None or offset >= previous[1], (p, previous, generation, offset)
            last[int(p)] = (generation, offset)
    assert {p: o for p, (_g, o) in last.items()} == dict(ends)
    # ... and the broker's committed offsets, sampled throughout
    assert len(sampler.samples) > 10
    high: dict[int, int] = {}
    for sample in sampler.samples:
        for p, offset in sample.items():
            assert offset >= high.get(p, -1), (p, high.get(p), offset)
            high[p] = offset
    assert {tp.partition: (o.offset, o.lag) for tp, o in final.items()} == {
        p: (ends[p], 0) for p in range(PARTITIONS)}
