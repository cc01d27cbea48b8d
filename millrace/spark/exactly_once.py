"""The topic sink's exactly-once mode: one Kafka transaction per micro-batch and writer task.

``writeStream.format("millrace").option("deliveryGuarantee", "exactly-once")``.  Spark's
own Kafka sink writes at least once: a task that is retried, a speculative copy, or a
micro-batch replayed after a driver restart writes its rows again.  Here each writer task
of micro-batch ``b`` and Spark partition ``p``:

1. opens a transactional producer with ``transactional.id = <prefix>-<p>`` (the prefix is
   ``transactionalIdPrefix``, by default ``millrace-spark-<query id>``; the query id stays
   the same across restarts from one checkpoint) and calls ``init_transactions``: the
   coordinator bumps the epoch, which **fences** every earlier producer with that id -- a
   zombie attempt of the same task, a task of an older run -- and aborts whatever
   transaction it left open (or finishes one it had already committed);
2. reads the **progress marker** of its id: the offset the group ``<prefix>-<p>`` holds
   (``batch id + 1`` of the last micro-batch this task committed).  Read after step 1, so a
   commit still completing is counted.  If it already covers ``b``, the task's rows of this
   micro-batch are in the topic: it writes nothing (a retried task whose first attempt
   committed, a micro-batch Spark replays because its commit log entry was not written);
3. otherwise writes its rows in a transaction that also commits the marker
   (``send_offsets_to_transaction``), so the rows and "batch ``b`` done" become visible
   together or not at all.

What it relies on: a replayed micro-batch gives each Spark partition the same rows (the
millrace source reads exact offset ranges, invariant 15; the plan between source and sink
must be deterministic, as for any exactly-once sink).  What it does not give: the tasks of
one micro-batch commit separately, so a ``read_committed`` reader can see one partition's
rows of a micro-batch before another's (each row still exactly once).  Readers must use
``isolation.level=read_committed`` (the millrace source: ``kafka.isolation.level``).
A task that runs longer than ``kafka.transaction.timeout.ms`` (60 s) is aborted by the
coordinator and fails; Spark retries it.

The marker is committed for partition 0 of the first topic the task wrote (Kafka stores
offsets only for existing topics); the marker's metadata names the micro-batch.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millrace.client.cluster import TopicPartition
from millrace.common.errors import ConfigError
from millrace.spark.options import SinkOptions, admin_config
from millrace.spark.writer import MillraceCommitMessage, SinkColumns, send_rows

if TYPE_CHECKING:
    import pyarrow as pa

    from millrace.client.producer import KafkaProducer

BATCH_ID_PROPERTY = "streaming.sql.batchId"   # set by Spark's MicroBatchExecution
QUERY_ID_PROPERTY = "sql.streaming.queryId"   # set by Spark's StreamExecution
MARKER_METADATA = "millrace spark sink: micro-batch {batch}"


@dataclass(frozen=True)
class TaskTransaction:
    """Who this writer task is: its transactional id (= its marker group) and batch."""

    transactional_id: str
    batch_id: int

    @classmethod
    def current(cls, options: SinkOptions) -> TaskTransaction:
        """From Spark's task context (runs in the Python worker)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise ConfigError("deliveryGuarantee=exactly-once runs only inside a Spark task")
        batch = context.getLocalProperty(BATCH_ID_PROPERTY)
        query = context.getLocalProperty(QUERY_ID_PROPERTY)
        if batch is None or query is None:
            raise ConfigError("deliveryGuarantee=exactly-once needs a streaming query "
                              "(writeStream): a batch write has no micro-batch id")
        prefix = options.transactional_id_prefix or f"millrace-spark-{query}"
        return cls(f"{prefix}-{context.partitionId()}", int(batch))


def committed_batch(transactional_id: str, producer_config: dict[str, Any]) -> int:
    """The last micro-batch this task id committed (-1: none), from its marker group."""
    from millrace.client.admin import KafkaAdminClient

    # the producer's cluster and credentials (kafka.security.protocol, kafka.sasl.*,
    # kafka.ssl.*), without its batching settings
    admin = KafkaAdminClient(admin_config(producer_config))
    try:
        offsets = admin.list_group_offsets(transactional_id, include_lag=False,
                                           require_stable=True)
    finally:
        admin.close()
    return max((o.offset for o in offsets.values() if o.offset is not None), default=0) - 1


def write_batches_exactly_once(batches: Iterator[pa.RecordBatch], options: SinkOptions,
                               columns: SinkColumns, task: TaskTransaction
                               ) -> MillraceCommitMessage:
    """Steps 1-3 of the module docstring for one task; returns what was written."""
    from millrace.client.producer import KafkaProducer

    config = options.producer_config(f"millrace-spark-eos-{os.getpid()}-{task.batch_id}")
    config["transactional.id"] = task.transactional_id
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(config)
    ok = False
    try:
        producer.init_transactions()
        if committed_batch(task.transactional_id, config) >= task.batch_id:
            for _ in batches:  # Spark hands the rows anyway; they are already in the topic
                pass
            ok = True
            return MillraceCommitMessage(0, skipped=True)
        producer.begin_transaction()
        written, first_topic = send_rows(producer, batches, options, columns)
        if written:
            marker = TopicPartition(options.topic or first_topic or "", 0)
            producer.send_offsets_to_transaction(
                {marker: _marker(task.batch_id)}, task.transactional_id)
            producer.commit_transaction()
        else:
            producer.abort_transaction()  # nothing to make visible; no marker needed
        ok = True
        return MillraceCommitMessage(written)
    except BaseException:
        _abort_quietly(producer)
        raise
    finally:
        producer.close(None if ok else 0)


def _marker(batch_id: int) -> Any:
    from millrace.client.consumer import OffsetAndMetadata

    return OffsetAndMetadata(batch_id + 1, MARKER_METADATA.format(batch=batch_id))


def _abort_quietly(producer: KafkaProducer[bytes, bytes]) -> None:
    """Abort an open transaction if the producer still can (a fenced or fatally failed one
    cannot; its transaction is aborted by the next task with its id or by the timeout)."""
    with contextlib.suppress(Exception):  # the task reports the original error
        producer.abort_transaction(5.0)
