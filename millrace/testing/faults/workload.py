"""The workload of a fault run: producers whose every send lands in the history, a
consumer group committing what it processed, and a watcher of the committed offsets.

- ``ConfluentWriter`` (librdkafka, the judge nobody here wrote) and ``MillraceWriter``
  (our own client) send unique values (``history.make_value``) at a steady rate,
  round-robin over the partitions, each to an explicit partition so that per-producer
  order is checkable partition by partition.  Every send is an ``invoke`` in the
  history; the delivery report completes it: ``ok`` with the offset, else ``info``
  (after a send the outcome of an error is unknown: an earlier attempt may have been
  written).  A send the client refuses locally (queue full) is not recorded at all: it
  is retried as the same value, so a value is never sent twice.
- ``GroupReaders``: confluent-kafka consumers in one group, subscribed to the topics,
  committing after processing each record (at-least-once), never below what the
  member itself committed last.  They remember
  which values they saw, and at the end report what each member owns.
- ``CommitWatcher`` asks the group coordinator (OffsetFetch) for the group's
  committed offsets every half second; the checker requires them never to go backwards.

Every client takes ``config``: the security settings of a secured cluster (the security
scenario runs the workload as ``User:client``, with exactly the ACLs it needs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from millrace.testing.faults.history import CommitObservation, History, SendOp, make_value

QUIET: dict[str, Any] = {"log_level": 0, "log.connection.close": False}


class Writer:
    """A producer thread: ``rate`` sends per second until ``stop``; ``finish`` flushes."""

    def __init__(self, name: str, history: History, topic: str, partitions: int,
                 rate: float, pad: int = 0) -> None:
        self.name = name
        self.history = history
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.pad = pad
        self.seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{name}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        t0 = time.monotonic()
        try:
            while not self._stop.is_set():
                due = t0 + self.seq / self.rate
                now = time.monotonic()
                if due > now:
                    self.poll(min(due - now, 0.05))
                    continue
                value = make_value(self.name, self.seq, self.pad)
                partition = self.seq % self.partitions
                op = self.history.invoke(self.name, value, self.topic, partition)
                while not self._stop.is_set() and not self.send(op):
                    self.poll(0.01)  # local queue full: try the same value again
                self.seq += 1
        except BaseException as e:  # the runner reports it
            self.error = e

    def send(self, op: SendOp) -> bool:
        """Hand ``op`` to the client; False when it refused locally (retry later)."""
        raise NotImplementedError

    def poll(self, seconds: float) -> None:
        time.sleep(seconds)

    def finish(self, timeout: float) -> None:
        """Wait for every outstanding delivery report, then close; what has none is info."""
        raise NotImplementedError


class ConfluentWriter(Writer):
    def __init__(self, name: str, history: History, bootstrap: str, topic: str,
                 partitions: int, rate: float, config: dict[str, Any] | None = None,
                 pad: int = 0) -> None:
        super().__init__(name, history, topic, partitions, rate, pad)
        from confluent_kafka import Producer
        self.producer = Producer({
            **QUIET, "bootstrap.servers": bootstrap, "acks": "all",
            "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 60_000,
            **(config or {})})

    def send(self, op: SendOp) -> bool:
        from confluent_kafka import KafkaError, KafkaException

        def report(err: Any, msg: Any) -> None:
            if err is None:
                # no offset: librdkafka's DUPLICATE_SEQUENCE_NUMBER is a success whose
                # offset the broker could no longer tell
                offset = msg.offset()
                self.history.complete(op, "ok", offset if offset is not None else -1)
            else:
                self.history.complete(op, "info", error=str(err))
        try:
            self.producer.produce(op.topic, value=op.value, partition=op.partition,
                                  on_delivery=report)
        except BufferError:
            return False
        except KafkaException as e:
            if e.args[0].code() != KafkaError._UNKNOWN_TOPIC:
                raise
            # metadata from a broker that does not know the topic (yet): nothing was sent
            self.history.note(f"{self.name}: produce refused locally, retrying: {e}")
            return False
        self.producer.poll(0)
        return True

    def poll(self, seconds: float) -> None:
        self.producer.poll(seconds)

    def finish(self, timeout: float) -> None:
        self.producer.flush(timeout)


class MillraceWriter(Writer):
    def __init__(self, name: str, history: History, bootstrap: str, topic: str,
                 partitions: int, rate: float, config: dict[str, Any] | None = None,
                 pad: int = 0) -> None:
        super().__init__(name, history, topic, partitions, rate, pad)
        from millrace.client.producer import KafkaProducer
        self.producer: Any = KafkaProducer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "delivery.timeout.ms": 60_000, "max.block.ms": 1000,
            **(config or {})})

    def send(self, op: SendOp) -> bool:
        from millrace.client.producer import ProducerRecord

        def report(metadata: Any, exc: BaseException | None) -> None:
            if exc is None:
                self.history.complete(op, "ok", metadata.offset)
            else:
                self.history.complete(op, "info", error=f"{type(exc).__name__}: {exc}")
        try:
            self.producer.send(ProducerRecord(op.topic, op.value, partition=op.partition),
                               report)
        except Exception as e:  # max.block.ms: metadata or buffer not ready
            self.history.note(f"{self.name}: send refused locally, retrying: {e}")
            return False
        return True

    def finish(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout)
        finally:
            self.producer.close(0)


class GroupReaders:
    """``members`` confluent-kafka consumers of one group, each polling on its own thread
    and committing (asynchronously) after each record it processed."""

    def __init__(self, bootstrap: str, group: str, topics: Sequence[str], members: int,
                 history: History, config: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Consumer
        self.group = group
        self.history = history
        self.seen: set[bytes] = set()
        self.commit_errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumers = [Consumer({
            **QUIET, **(config or {}), "bootstrap.servers": bootstrap, "group.id": group,
            "on_commit": self._on_commit,
            "client.id": f"{group}-{i}", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1000}) for i in range(members)]
        for c in self.consumers:
            c.subscribe(list(topics))
        # each member's assignment, as its own thread last saw it (a Consumer is called
        # from its own thread only: assignment() from another thread while this one is
        # in poll() deadlocked, the caller holding the GIL)
        self._assigned: dict[str, list[tuple[str, int]]] = {}
        self._threads = [threading.Thread(target=self._run, args=(f"{group}-{i}", c),
                                          daemon=True, name=f"reader-{i}")
                         for i, c in enumerate(self.consumers)]
        self.error: BaseException | None = None

    def start(self) -> GroupReaders:
        for t in self._threads:
            t.start()
        return self

    def _run(self, member: str, consumer: Any) -> None:
        from confluent_kafka import KafkaException
        committed: dict[tuple[str, int], int] = {}  # what this member committed last
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                assigned = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
                with self._lock:
                    self._assigned[member] = assigned
                if msg is None or msg.error() is not None:
                    continue
                with self._lock:
                    self.seen.add(msg.value())
                key = (msg.topic(), msg.partition())
                if msg.offset() + 1 <= committed.get(key, -1):
                    continue  # re-read after a rebalance: never commit backwards
                committed[key] = msg.offset() + 1
                try:
                    # asynchronous: librdkafka's synchronous commit has no bound and was
                    # seen waiting for good after a coordinator move
                    consumer.commit(message=msg, asynchronous=True)
                except KafkaException:
                    with self._lock:
                        self.commit_errors += 1
        except BaseException as e:  # the runner reports it
            self.error = e

    def _on_commit(self, err: Any, partitions: Any) -> None:
        if err is not None:  # rebalanced away, coordinator moving: the next owner re-reads
            with self._lock:
                self.commit_errors += 1
            return
        at = self.history.now()
        for tp in partitions:
            if tp.error is None and tp.offset >= 0:
                self.history.add_commit(CommitObservation(self.group, tp.topic, tp.partition,
                                                          tp.offset, at, kind="acked"))

    def seen_values(self) -> set[bytes]:
        with self._lock:
            return set(self.seen)

    def assignment(self) -> dict[str, list[tuple[str, int]]]:
        with self._lock:
            return {m: list(tps) for m, tps in self._assigned.items()}

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        for t, c in zip(self._threads, self.consumers, strict=True):
            if t.is_alive():  # closing a consumer another thread is inside would hang
                self.history.note(f"{t.name} did not stop within 30 s; left running")
                continue
            try:
                c.close()
            except Exception as e:  # closing after a fault may fail; noted
                self.history.note(f"closing consumer: {e}")


class CommitWatcher:
    """Polls the group's committed offsets: OffsetFetch to the group coordinator through
    a confluent-kafka consumer of the group that never subscribes (so it never joins).
    (The admin client's ``list_consumer_group_offsets`` was tried first: librdkafka
    aborted on an assertion when it timed out during a coordinator move.)"""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int,
                 history: History, interval: float = 0.5,
                 config: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Consumer, TopicPartition
        self.consumer = Consumer({**QUIET, **(config or {}), "bootstrap.servers": bootstrap,
                                  "group.id": group, "enable.auto.commit": False})
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.group = group
        self.history = history
        self.interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commit-watcher", daemon=True)

    def start(self) -> CommitWatcher:
        self._thread.start()
        return self

    def observe(self) -> None:
        with self._lock:
            try:
                got = self.consumer.committed(self.tps, timeout=5)
            except Exception:  # coordinator moving during a fault: try again
                return
            at = self.history.now()
            for tp in got:
                if tp.error is None and tp.offset >= 0:
                    self.history.add_commit(CommitObservation(self.group, tp.topic,
                                                              tp.partition, tp.offset, at))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.observe()

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def stop(self) -> None:
        self.stop_polling()
        with self._lock:
            self.consumer.close()
