"""One member of a consumer group, run as a child process by test_group_failover.py.

    python tests/integration/group_member.py BOOTSTRAP TOPIC GROUP NAME LOG

Subscribes with ``group.id`` GROUP, processes records (processing = writing a line to LOG)
and commits synchronously after each poll what it processed.  SIGTERM closes the consumer
cleanly (leave the group) and exits 0; SIGKILL is the crash the test wants to see.

Every line of LOG is one JSON object, flushed as soon as it is written:

    {"e": "assigned", "gen": 5, "member": "...", "partitions": [0, 3, 7], "owned": [...]}
    {"e": "revoked" | "lost", "gen": 5, "member": "...", "partitions": [...]}
    {"e": "rec", "gen": 5, "member": "...", "p": 3, "o": 120, "v": "4711"}
    {"e": "commit", "gen": 5, "member": "...", "offsets": {"3": 121}, "seq": 17}
    {"e": "commit-failed", "gen": 5, "member": "...", "offsets": {...}, "error": "..."}
    {"e": "closed"}

``gen``/``member`` of a record or commit are those of the assignment under which this
member owns the partition (set in ``on_partitions_assigned``), not a later reading.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Collection
from typing import Any, TextIO

from millrace.client.consumer import (
    ConsumerRebalanceListener,
    KafkaConsumer,
    TopicPartition,
)
from millrace.common.errors import KafkaError


class Member(ConsumerRebalanceListener):
    def __init__(self, consumer: KafkaConsumer[bytes, bytes], log: TextIO) -> None:
        self.consumer = consumer
        self.log = log
        self.generation = -1
        self.member_id = ""
        self.stop = False
        self.seq = 0

    def write(self, **entry: Any) -> None:
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()

    def _identity(self) -> None:
        meta = self.consumer.group_metadata()
        self.generation, self.member_id = meta.generation_id, meta.member_id

    # ------------------------------------------------------------------ listener
    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        self._identity()
        owned = sorted(tp.partition for tp in self.consumer.assignment())
        self.write(e="assigned", gen=self.generation, member=self.member_id,
                   partitions=sorted(tp.partition for tp in partitions), owned=owned)

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        self.write(e="revoked", gen=self.generation, member=self.member_id,
                   partitions=sorted(tp.partition for tp in partitions))

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        self.write(e="lost", gen=self.generation, member=self.member_id,
                   partitions=sorted(tp.partition for tp in partitions))

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        while not self.stop:
            records = self.consumer.poll(200)
            if records.is_empty():
                continue
            gen, member = self.generation, self.member_id
            next_offsets: dict[Any, int] = {}
            lines = []
            for r in records:
                lines.append(json.dumps({"e": "rec", "gen": gen, "member": member,
                                         "p": r.partition, "o": r.offset,
                                         "v": (r.value or b"").decode()}))
                next_offsets[TopicPartition(r.topic, r.partition)] = r.offset + 1
            self.log.write("\n".join(lines) + "\n")
            self.log.flush()
            offsets = {str(tp.partition): o for tp, o in sorted(next_offsets.items())}
            try:
                self.consumer.commit_sync(next_offsets)
            except KafkaError as e:  # CommitFailedError, RebalanceInProgressError
                self.write(e="commit-failed", gen=gen, member=member, offsets=offsets,
                           error=f"{type(e).__name__}: {e}")
                continue
            self.seq += 1
            self.write(e="commit", gen=gen, member=member, offsets=offsets, seq=self.seq)


def main(argv: list[str]) -> int:
    bootstrap, topic, group, name, log_path = argv
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(config={
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "max.poll.records": 50, "partition.assignment.strategy": "range"})
    with open(log_path, "a", encoding="utf-8") as log:
        member = Member(consumer, log)

        def on_sigterm(signum: int, frame: Any) -> None:
            member.stop = True

        signal.signal(signal.SIGTERM, on_sigterm)
        consumer.subscribe([topic], member)
        member.write(e="started", name=name)
        try:
            member.run()
        finally:
            consumer.close()
            member.write(e="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
