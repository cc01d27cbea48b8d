"""A consume-transform-produce copier: Kafka's ``TransactionalMessageCopier`` with
librdkafka (confluent-kafka) as the client, so that what it proves about the broker does
not rest on millrace's own client.

    python -m millrace.testing.txn_copier --bootstrap HOST:PORT --input in --output out \\
        --group g --transactional-id copier-1 [--max-txn 50]

Theory.  The copier is a member of consumer group ``--group`` (``read_committed``, no
auto commit, ``earliest``) and owns one transactional producer.  Each loop takes up to
``--max-txn`` records and, in one transaction, writes each one unchanged (key, value) to
the same partition number of ``--output`` and commits the group's offsets after them
(``send_offsets_to_transaction`` with ``consumer_group_metadata()``: KIP-447, the group
coordinator refuses the commit of a member that was rebalanced away).  So a record's copy
and the offset past it become visible together or not at all: after any crash, the group
resumes where the last committed transaction left it and nothing is copied twice into
what ``read_committed`` readers see.

Errors follow Kafka's rules: an *abortable* error (``txn_requires_abort``: a failed
produce, a stale generation, a coordinator that lost the transaction) aborts the
transaction and rewinds the consumer to the group's committed offsets, which are exactly
the records whose copies were just thrown away; a *retriable* error on commit is retried;
a *fatal* one (``PRODUCER_FENCED``: another process took the transactional id) ends the
process with exit status 2.

Done.  At start the copier reads the input's end offsets (the high watermarks; the input
is written without transactions).  It exits 0 once the group's committed offsets reach
them on every input partition -- whichever member copied them -- or on SIGTERM (after the
transaction in hand, if any, is finished).  Progress goes to stdout as JSON lines::

    {"event": "progress", "consumed": 150, "committed": 100, "aborted": 50,
     "transactions": 2, "remaining": 2900}
    {"event": "done", ...}    {"event": "fenced", "error": "..."}

``consumed`` counts records taken from the consumer (again after a rewind), ``committed``
those whose transaction committed, ``aborted`` those whose transaction was aborted,
``remaining`` the records of the input not yet behind the group's committed offsets.

Stalls.  librdkafka 2.x (2.16 included) can block in ``send_offsets_to_transaction`` long
past its timeout when the group coordinator it has cached leaves the cluster's metadata
(a broker stopped or killed): the coordinator request never checks its timeout
(confluentinc/librdkafka#5456), and a coordinator broker that was decommissioned is never
queried again until some other broker connection goes up or down (#5511; fix proposed in
PR #5512).  A process stuck there can neither finish nor abort its transaction, so every
transactional call runs under a :class:`CallWatchdog`: once a call overruns its own timeout
by ``--stall-grace-s``, the copier reports ``{"event": "stalled", "call": ..., "started":
<unix time>, "timeout_s": ...}`` and ends with exit status 3, to be restarted like a crashed copier (its
transaction is aborted at its timeout or fenced by the restart's ``init_transactions``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, TextIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

# ``TransactionalMessageCopier``'s exit status when the producer was fenced
EXIT_FENCED = 2
# a librdkafka call overran its timeout (see "Stalls" above): restart the copier
EXIT_STALLED = 3
# librdkafka's warnings and errors go to stderr; connection closes are expected here
_LOGGING: dict[str, Any] = {"log_level": 4, "log.connection.close": False}


class CallWatchdog:
    """Ends the process (``EXIT_STALLED``) when a call overruns its timeout by ``grace_s``.

    The watched call blocks the copier's only thread inside librdkafka, so the watchdog is
    a timer thread; it reports through ``report`` and leaves with ``os._exit`` (the stuck
    thread cannot be unwound)."""

    def __init__(self, report: Callable[..., None], grace_s: float) -> None:
        self._report = report
        self.grace_s = grace_s

    @contextlib.contextmanager
    def watch(self, call: str, timeout_s: float) -> Iterator[None]:
        started = time.time()
        timer = threading.Timer(timeout_s + self.grace_s, self._expired,
                                (call, started, timeout_s))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _expired(self, call: str, started: float, timeout_s: float) -> None:
        self._report("stalled", call=call, started=started, timeout_s=timeout_s,
                     after_s=round(time.time() - started, 1))
        os._exit(EXIT_STALLED)


class TransactionalMessageCopier:
    """Owned by the thread that calls ``run`` (librdkafka's own threads aside)."""

    def __init__(self, bootstrap: str, input_topic: str, output_topic: str, group: str,
                 transactional_id: str, *, max_txn: int = 50,
                 transaction_timeout_ms: int = 30_000, debug: str = "",
                 stall_grace_s: float = 30.0, out: TextIO = sys.stdout) -> None:
        self.input = input_topic
        self.output = output_topic
        self.max_txn = max_txn
        self._out = out
        self._stop = False
        self.consumed = self.committed = self.aborted = self.transactions = 0
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1000, **_LOGGING})
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
            "transaction.timeout.ms": transaction_timeout_ms, "linger.ms": 5,
            "message.timeout.ms": transaction_timeout_ms, **_LOGGING,
            **({"debug": debug, "log_level": 7} if debug else {})})
        self.end_offsets: dict[int, int] = {}
        self.watchdog = CallWatchdog(self._report, stall_grace_s)

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        """Finish the transaction in hand, then leave ``run`` (SIGTERM)."""
        self._stop = True

    def run(self) -> int:
        try:
            self.end_offsets = self._input_end_offsets()
            self._retry("init_transactions", self.producer.init_transactions, 30)
            self.consumer.subscribe([self.input])
            while not self._stop:
                if self.remaining() == 0:
                    self._report("done")
                    return 0
                batch = [m for m in self.consumer.consume(self.max_txn, 1.0)
                         if m.error() is None]
                if batch:
                    self._copy(batch)
            self._report("stopped")
            return 0
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal():
                self._report("fenced", error=str(err))
                return EXIT_FENCED
            raise
        finally:
            self.consumer.close()

    # ------------------------------------------------------------------ one transaction
    def _copy(self, batch: Sequence[Message]) -> None:
        self.consumed += len(batch)
        next_offsets: dict[int, int] = {}
        try:
            self.producer.begin_transaction()
            for m in batch:
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None  # a record, not an event
                self.producer.produce(self.output, m.value(), m.key(), partition=partition)
                next_offsets[partition] = offset + 1  # the consumer's position after it
            offsets = [TopicPartition(self.input, p, o) for p, o in sorted(next_offsets.items())]
            group_metadata = self.consumer.consumer_group_metadata()
            self._retry("send_offsets_to_transaction",
                        lambda t: self.producer.send_offsets_to_transaction(
                            offsets, group_metadata, t), 30)
            self._retry("commit_transaction", self.producer.commit_transaction, 60)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() or not err.txn_requires_abort():
                raise
            self._retry("abort_transaction", self.producer.abort_transaction, 60)
            self.aborted += len(batch)
            self._report("aborted", error=str(err))
            self._rewind()
            return
        self.committed += len(batch)
        self.transactions += 1
        self._report("progress")

    def _rewind(self) -> None:
        """Seek every assigned partition back to the group's committed offset."""
        assigned = self.consumer.assignment()
        if not assigned:
            return
        for tp in self.consumer.committed(assigned, 30):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            # not fetching yet (just assigned): it starts from the committed offset anyway
            with contextlib.suppress(KafkaException):
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def _retry(self, name: str, call: Callable[[float], object], call_timeout_s: float,
               timeout_s: float = 120.0) -> None:
        """``call(call_timeout_s)`` again while librdkafka says the error is retriable, for
        up to ``timeout_s``: librdkafka retries a transactional request only a few times,
        and CONCURRENT_TRANSACTIONS lasts as long as the previous transaction's markers wait
        for a partition leader (a killed broker's partitions: a ZooKeeper session).  Each
        call runs under the watchdog."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with self.watchdog.watch(name, call_timeout_s):
                    call(call_timeout_s)
                return
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    # ------------------------------------------------------------------ progress
    def _input_end_offsets(self) -> dict[int, int]:
        md = self.consumer.list_topics(self.input, timeout=30)
        topic = md.topics[self.input]
        if topic.error is not None or not topic.partitions:
            raise SystemExit(f"input topic {self.input!r}: {topic.error}")
        return {p: self.consumer.get_watermark_offsets(
                    TopicPartition(self.input, p), timeout=30)[1]
                for p in sorted(topic.partitions)}

    def remaining(self) -> int:
        """Input records not yet behind the group's committed offsets."""
        tps = [TopicPartition(self.input, p) for p in self.end_offsets]
        try:
            committed = {tp.partition: max(tp.offset, 0)
                         for tp in self.consumer.committed(tps, 10)}
        except KafkaException:
            return -1      # unknown for now (coordinator moving): not done
        return sum(max(end - committed.get(p, 0), 0) for p, end in self.end_offsets.items())

    def _report(self, event: str, **extra: object) -> None:
        line = {"event": event, "consumed": self.consumed, "committed": self.committed,
                "aborted": self.aborted, "transactions": self.transactions}
        if event in ("progress", "done"):
            line["remaining"] = self.remaining() if event == "progress" else 0
        line.update(extra)
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m millrace.testing.txn_copier",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--max-txn", type=int, default=50,
                        help="records per transaction at most (default 50)")
    parser.add_argument("--transaction-timeout-ms", type=int, default=30_000)
    parser.add_argument("--debug", default="",
                        help="librdkafka debug contexts of the producer (e.g. eos), to stderr")
    parser.add_argument("--stall-grace-s", type=float, default=30.0,
                        help="end with status 3 when a librdkafka call overruns its timeout "
                             "by this much (default 30)")
    args = parser.parse_args(argv)
    copier = TransactionalMessageCopier(
        args.bootstrap, args.input, args.output, args.group, args.transactional_id,
        max_txn=args.max_txn, transaction_timeout_ms=args.transaction_timeout_ms,
        debug=args.debug, stall_grace_s=args.stall_grace_s)

    def on_term(signum: int, frame: FrameType | None) -> None:
        copier.stop()

    signal.signal(signal.SIGTERM, on_term)
    return copier.run()


if __name__ == "__main__":
    sys.exit(main())
