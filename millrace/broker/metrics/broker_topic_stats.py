"""``BrokerTopicStats``: the ``kafka.server:type=BrokerTopicMetrics`` meters, for all topics
and per topic (Kafka's ``BrokerTopicStats`` and ``BrokerTopicMetrics``).

Each name is one meter for all topics (no ``topic`` tag: what kafbat UI and most
dashboards read) and one per topic (``topic=T``), marked together:

=================================  ============================================  =========
name                               marked (by whom)                              per topic
=================================  ============================================  =========
``MessagesInPerSec``               records a leader appended (replica manager;   yes
                                   the batch headers' counts, a retried
                                   duplicate counts 0)
``BytesInPerSec``                  bytes of those batches                        yes
``BytesOutPerSec``                 bytes of a consumer fetch's answer            yes
``BytesRejectedPerSec``            bytes of a batch over ``max.message.bytes``   yes
``TotalProduceRequestsPerSec``     each partition of each append                 yes
``FailedProduceRequestsPerSec``    ... that failed for other reasons than        yes
                                   Kafka's expected ones (not leader, unknown
                                   partition, too large, corrupt, storage)
``TotalFetchRequestsPerSec``       each partition of each fetch (consumer or     yes
                                   follower)
``FailedFetchRequestsPerSec``      ... answered with an unexpected error         yes
``ReplicationBytesInPerSec``       bytes a follower appended (replica fetcher)   no
``ReplicationBytesOutPerSec``      bytes of a follower fetch's answer            no
``InvalidMessageCrcRecordsPerSec``, ``InvalidMagicNumberRecordsPerSec``,         no
``InvalidOffsetOrSequenceRecordsPerSec``, ``NoKeyCompactedTopicRecordsPerSec``:
                                   a produced batch refused for that reason
=================================  ============================================  =========

Marks are per partition of a request, never per record, and cost a dict lookup (the
topic's meters are cached) and a few additions.  A partition the broker does not host
counts for all topics only, so a client asking for names that do not exist cannot grow
the registry.  ``remove_topic`` forgets a deleted topic's meters (Kafka's
``removeMetrics``).  ``enabled=False`` (``metrics.enabled=false``) records nothing.

Thread ownership: the broker's event-loop thread (the replica manager and fetchers).
"""

from __future__ import annotations

from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.yammer import Meter
from millrace.common.errors import CorruptBatchError, Errors
from millrace.record.batch import MAGIC_OFFSET, RecordBatch, compute_crc, iter_batches

# Errors that do not count as a failed produce / fetch (Kafka's ``appendToLocalLog`` and
# ``readFromLocalLog``: the client's or the cluster's state, not the broker's failure).
EXPECTED_PRODUCE_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.MESSAGE_TOO_LARGE,
    Errors.RECORD_LIST_TOO_LARGE, Errors.CORRUPT_MESSAGE, Errors.KAFKA_STORAGE_ERROR,
    Errors.UNKNOWN_TOPIC_ID})
EXPECTED_FETCH_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_LEADER_EPOCH,
    Errors.FENCED_LEADER_EPOCH, Errors.REPLICA_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR,
    Errors.OFFSET_OUT_OF_RANGE, Errors.INCONSISTENT_TOPIC_ID, Errors.UNKNOWN_TOPIC_ID,
    Errors.TOPIC_AUTHORIZATION_FAILED})

DOMAIN = "kafka.server"
TYPE = "BrokerTopicMetrics"
PER_TOPIC = ("MessagesInPerSec", "BytesInPerSec", "BytesOutPerSec", "BytesRejectedPerSec",
             "TotalProduceRequestsPerSec", "FailedProduceRequestsPerSec",
             "TotalFetchRequestsPerSec", "FailedFetchRequestsPerSec")
ALL_TOPICS_ONLY = ("ReplicationBytesInPerSec", "ReplicationBytesOutPerSec",
                   "InvalidMessageCrcRecordsPerSec", "InvalidMagicNumberRecordsPerSec",
                   "InvalidOffsetOrSequenceRecordsPerSec", "NoKeyCompactedTopicRecordsPerSec")


class BrokerTopicMetrics:
    """The meters of one topic, or of all topics (``topic`` None)."""

    __slots__ = ("bytes_in", "bytes_out", "bytes_rejected", "failed_fetch", "failed_produce",
                 "messages_in", "topic", "total_fetch", "total_produce")

    def __init__(self, registry: KafkaMetricsRegistry, topic: str | None) -> None:
        self.topic = topic
        tags = None if topic is None else {"topic": topic}

        def meter(name: str) -> Meter:
            return registry.meter(DOMAIN, TYPE, name, tags)
        self.messages_in = meter("MessagesInPerSec")
        self.bytes_in = meter("BytesInPerSec")
        self.bytes_out = meter("BytesOutPerSec")
        self.bytes_rejected = meter("BytesRejectedPerSec")
        self.total_produce = meter("TotalProduceRequestsPerSec")
        self.failed_produce = meter("FailedProduceRequestsPerSec")
        self.total_fetch = meter("TotalFetchRequestsPerSec")
        self.failed_fetch = meter("FailedFetchRequestsPerSec")


class BrokerTopicStats:
    """All-topics and per-topic ``BrokerTopicMetrics`` (module docstring)."""

    def __init__(self, registry: KafkaMetricsRegistry, *, enabled: bool = True) -> None:
        self.registry = registry
        self.enabled = enabled
        self.all_topics = BrokerTopicMetrics(registry, None)

        def meter(name: str) -> Meter:
            return registry.meter(DOMAIN, TYPE, name)
        self.replication_bytes_in = meter("ReplicationBytesInPerSec")
        self.replication_bytes_out = meter("ReplicationBytesOutPerSec")
        self.invalid_message_crc = meter("InvalidMessageCrcRecordsPerSec")
        self.invalid_magic_number = meter("InvalidMagicNumberRecordsPerSec")
        self.invalid_offset_or_sequence = meter("InvalidOffsetOrSequenceRecordsPerSec")
        self.no_key_compacted_topic = meter("NoKeyCompactedTopicRecordsPerSec")
        self._topics: dict[str, BrokerTopicMetrics] = {}

    def topic_stats(self, topic: str) -> BrokerTopicMetrics:
        """The topic's meters, made (and registered) on first use."""
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = BrokerTopicMetrics(self.registry, topic)
        return stats

    def remove_topic(self, topic: str) -> None:
        """A deleted topic: its meters (and anything else tagged with it) leave the
        registry, and so the scrape."""
        self._topics.pop(topic, None)
        self.registry.remove_tagged("topic", topic)

    # ------------------------------------------------------------------ produce
    def produce_request(self, topic: str, hosted: bool) -> None:
        """One partition of an append (``hosted``: the broker has the partition)."""
        self.produce_requests(topic, 1, int(hosted))

    def produce_requests(self, topic: str, partitions: int, hosted: int) -> None:
        """``produce_request`` for ``partitions`` partitions of ``topic`` in one request,
        ``hosted`` of them here: the same counts, one mark per meter."""
        if self.enabled and partitions:
            self.all_topics.total_produce.mark(partitions)
            if hosted:
                self.topic_stats(topic).total_produce.mark(hosted)

    def appended(self, topic: str, size: int, records: int) -> None:
        """A leader appended ``records`` records in ``size`` bytes of batches."""
        if self.enabled:
            stats = self.topic_stats(topic)
            stats.bytes_in.mark(size)
            stats.messages_in.mark(records)
            everything = self.all_topics
            everything.bytes_in.mark(size)
            everything.messages_in.mark(records)

    def failed_produce(self, topic: str, hosted: bool) -> None:
        """An append that failed for a reason Kafka does not expect."""
        if self.enabled:
            self.all_topics.failed_produce.mark()
            if hosted:
                self.topic_stats(topic).failed_produce.mark()

    def produce_refused(self, topic: str, hosted: bool, error: int,
                        records: bytes | bytearray | None, compacted: bool,
                        from_client: bool) -> None:
        """A partition's append failed with ``error``: a failed produce unless Kafka
        expects the error, bytes rejected for a batch too large, and the validation
        meter of a batch refused for its CRC, magic, offsets/sequence or a missing key
        (the batch is looked at again only here, on the failure path)."""
        if not self.enabled:
            return
        if error not in EXPECTED_PRODUCE_ERRORS:
            self.failed_produce(topic, hosted)
        if error == Errors.MESSAGE_TOO_LARGE and hosted:
            size = len(records or b"")
            self.all_topics.bytes_rejected.mark(size)
            self.topic_stats(topic).bytes_rejected.mark(size)
        elif error in (Errors.CORRUPT_MESSAGE, Errors.INVALID_RECORD) and records:
            meter = self._invalid_batch_meter(records, compacted, from_client)
            if meter is not None:
                meter.mark()

    def _invalid_batch_meter(self, records: bytes | bytearray, compacted: bool,
                             from_client: bool) -> Meter | None:
        """Which validation check the refused ``records`` fail (None: another one)."""
        if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] != 2:
            return self.invalid_magic_number
        try:
            for pos, h in iter_batches(records):
                if compute_crc(records, pos) != h.crc:
                    return self.invalid_message_crc
                if h.records_count <= 0 or h.last_offset_delta + 1 != h.records_count or (
                        from_client and h.producer_id >= 0 and h.base_sequence < 0):
                    return self.invalid_offset_or_sequence
                if compacted and from_client and not h.is_control and any(
                        r.key is None for r in RecordBatch(records, pos).records()):
                    return self.no_key_compacted_topic
        except CorruptBatchError:
            return None
        return None

    # ------------------------------------------------------------------ fetch
    def fetch_request(self, topic: str, hosted: bool) -> None:
        """One partition of a fetch, consumer's or follower's."""
        self.fetch_requests(topic, 1, int(hosted))

    def fetch_requests(self, topic: str, partitions: int, hosted: int) -> None:
        """``fetch_request`` for ``partitions`` partitions of ``topic`` in one fetch,
        ``hosted`` of them here: the same counts, one mark per meter."""
        if self.enabled and partitions:
            self.all_topics.total_fetch.mark(partitions)
            if hosted:
                self.topic_stats(topic).total_fetch.mark(hosted)

    def failed_fetch(self, topic: str, hosted: bool) -> None:
        if self.enabled:
            self.all_topics.failed_fetch.mark()
            if hosted:
                self.topic_stats(topic).failed_fetch.mark()

    def bytes_out(self, topic: str, size: int, follower: bool) -> None:
        """Bytes answered to a fetch: a follower's count as replication only."""
        if not self.enabled or size <= 0:
            return
        if follower:
            self.replication_bytes_out.mark(size)
        else:
            self.all_topics.bytes_out.mark(size)
            self.topic_stats(topic).bytes_out.mark(size)

    def replication_bytes_received(self, size: int) -> None:
        """Bytes a follower appended from its leader's fetch answer."""
        if self.enabled and size > 0:
            self.replication_bytes_in.mark(size)
