"""``KafkaStore``: the ``_schemas`` topic as the registry's storage.

The topic has one partition (the records' order is the registry's history) and is
compacted; it is created at start when missing, replicated ``min(3, live brokers)`` times
unless ``kafkastore.topic.replication.factor`` says otherwise.  An existing topic with
more than one partition is refused, as Confluent does.

Reading.  One thread (``KafkaStoreReaderThread``) consumes the partition from the start,
``read_committed``, and applies every record to the ``SchemaStore``.  ``wait_until_caught_up``
asks the partition's last stable offset (ListOffsets, read_committed) and waits until the
reader has applied everything before it: an instance answers nothing until it has read
the topic to its end once, and the leader does so again before each write.

Writing (the leader only).  ``KafkaStoreWriter`` owns a transactional producer whose id is
the same for every instance of the group (``<group id>-writer``): ``init_transactions`` on
the new leader fences the producer of the old one, so an old leader that has not yet
noticed it lost the election cannot append afterwards (its commit fails with
PRODUCER_FENCED and it answers the client with an error, never a success).  A write is
one transaction; the writer then waits for its own reader to apply it, so the state it
answers from includes the write.  Ids are handed out as max id + 1 after that read, under
the writer's lock: two registrations never share an id.

Thread ownership: the reader thread owns its consumer; the writer's producer is used under
``KafkaStoreWriter.lock`` by the HTTP handlers' executor threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.client.admin import KafkaAdminClient
from millrace.client.admin.types import NewTopic, OffsetSpec
from millrace.client.cluster import TopicPartition
from millrace.client.consumer import KafkaConsumer
from millrace.client.errors import KafkaTimeoutError
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.errors import KafkaError, TopicExistsError
from millrace.schema_registry.errors import StoreError, StoreTimeout
from millrace.schema_registry.store import SchemaStore

log = logging.getLogger(__name__)

READ_COMMITTED = 1
# client settings a registry passes through to its Kafka clients (security, timeouts)
CLIENT_KEYS_EXCLUDED = {"group.id", "transactional.id", "isolation.level", "enable.auto.commit",
                        "key.serializer", "value.serializer", "key.deserializer",
                        "value.deserializer"}


def client_config(bootstrap: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in properties.items() if k not in CLIENT_KEYS_EXCLUDED}
    out["bootstrap.servers"] = bootstrap
    return out


class KafkaStore:
    def __init__(self, store: SchemaStore, clients: Mapping[str, Any], *,
                 topic: str = "_schemas", replication_factor: int | None = None,
                 timeout_s: float = 60.0) -> None:
        self.store = store
        self.clients = dict(clients)
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self._admin: KafkaAdminClient | None = None
        self._reader: KafkaStoreReaderThread | None = None
        self._admin_lock = threading.Lock()

    def start(self) -> None:
        self._admin = KafkaAdminClient({**self.clients, "client.id": "schema-registry-admin"})
        try:
            self._ensure_topic()
            self._reader = KafkaStoreReaderThread(self.store, self.clients, self.tp)
            self._reader.start()
            self.wait_until_caught_up()
        except BaseException:
            self.close()  # no sockets or threads left behind by a start that failed
            raise

    @property
    def reading(self) -> bool:
        """The reader thread runs (it stops only on a bug: logged)."""
        return self._reader is not None and self._reader.is_alive()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.stop()
        if self._admin is not None:
            self._admin.close()

    def _ensure_topic(self) -> None:
        assert self._admin is not None
        topics = self._admin.describe_topics([self.topic])
        future = topics[self.topic]
        if future.exception() is None:
            partitions = len(future.result().partitions)
            if partitions != 1:
                raise StoreError(f"topic {self.topic} has {partitions} partitions; the "
                                 "schema registry needs exactly one")
            return
        rf = self.replication_factor
        if rf is None:
            rf = min(3, len(self._admin.describe_cluster().nodes))
        result = self._admin.create_topics([NewTopic(self.topic, 1, rf, {
            "cleanup.policy": "compact"})])
        error = result[self.topic].exception()
        if error is not None and not isinstance(error, TopicExistsError):
            raise StoreError(f"cannot create topic {self.topic}: {error}")
        log.info("created the schema topic %s (replication factor %d)", self.topic, rf)

    def end_offset(self) -> int:
        """The partition's last stable offset: the offset after the last committed record."""
        assert self._admin is not None
        with self._admin_lock:
            result = self._admin.list_offsets({self.tp: OffsetSpec.latest()},
                                              isolation_level=READ_COMMITTED,
                                              timeout_ms=int(self.timeout_s * 1000))
            try:
                return result[self.tp].result().offset
            except KafkaError as e:
                raise StoreError(f"cannot read the end of {self.topic}: {e}") from None

    def wait_until_caught_up(self, timeout_s: float | None = None) -> None:
        end = self.end_offset()
        if not self.store.wait_for(end, timeout_s or self.timeout_s):
            raise StoreTimeout(f"the registry has not read {self.topic} up to offset {end} "
                               f"(read up to {self.store.position})")


class KafkaStoreReaderThread(threading.Thread):
    def __init__(self, store: SchemaStore, clients: Mapping[str, Any], tp: TopicPartition) -> None:
        super().__init__(name="schemas-reader", daemon=True)
        self.store = store
        self.tp = tp
        self._stop_event = threading.Event()
        self.failure = False
        self.consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(config={
            **clients, "client.id": "schema-registry-reader", "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.consumer.assign([tp])
        self.consumer.seek_to_beginning([tp])

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                try:
                    records = self.consumer.poll(200)
                    for record in records:
                        self.store.apply(record.offset, record.key, record.value)
                    # the position also moves past transaction markers and aborted records
                    position = self.consumer.position(self.tp, timeout_ms=0)
                except (KafkaError, KafkaTimeoutError) as e:
                    # retried: a leader moving, a broker restarting, a position not known yet
                    log.warning("reading the schema topic: %s", e)
                    self._stop_event.wait(0.5)
                    continue
                self.store.advance(position)
        except Exception:
            self.failure = True
            log.exception("the schema topic's reader stopped; this instance answers 503 "
                          "on /readyz and cannot serve writes")
            raise
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)


class KafkaStoreWriter:
    """The leader's side: transactional appends to the schema topic."""

    def __init__(self, kafka_store: KafkaStore, transactional_id: str) -> None:
        self.kafka_store = kafka_store
        self.transactional_id = transactional_id
        self.lock = threading.RLock()
        self._producer: KafkaProducer[bytes, bytes] | None = None

    def open(self) -> None:
        """Become the writer: fence every earlier writer, then read the topic to its end."""
        with self.lock:
            self.close()
            producer: KafkaProducer[bytes, bytes] = KafkaProducer(config={
                **self.kafka_store.clients, "client.id": "schema-registry-writer",
                "transactional.id": self.transactional_id, "acks": "all",
                "enable.idempotence": True})
            try:
                producer.init_transactions(self.kafka_store.timeout_s)
            except BaseException:
                producer.close(0)
                raise
            self._producer = producer
            self.kafka_store.wait_until_caught_up()

    @property
    def is_open(self) -> bool:
        return self._producer is not None

    def close(self) -> None:
        with self.lock:
            if self._producer is not None:
                self._producer.close(5)
                self._producer = None

    def write(self, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Append ``records`` in one transaction; the offset of the last once applied."""
        with self.lock:
            producer = self._producer
            if producer is None:
                raise StoreError("this instance is not the writer")
            topic = self.kafka_store.topic
            try:
                producer.begin_transaction()
                futures = [producer.send(ProducerRecord(topic, value=value, key=key,
                                                        partition=0))
                           for key, value in records]
                producer.commit_transaction(self.kafka_store.timeout_s)
                last = max(f.get(self.kafka_store.timeout_s).offset for f in futures)
            except KafkaError as e:
                log.warning("writing to %s failed (%s); giving up the writer's producer",
                            topic, e)
                self.close()  # fenced or broken: the next leader term opens a new one
                raise StoreError(f"cannot write to {topic}: {e}") from None
            if not self.kafka_store.store.wait_for(last + 1, self.kafka_store.timeout_s):
                raise StoreTimeout(f"the write at offset {last} was not read back in time")
            return last
