"""Produce (key 0): decode, hand the partitions' records to the replica manager, encode.

The broker works per batch, never per record (``ReplicaManager.append_records`` checks
the batch header, CRC and codec, and the log assigns offsets by rewriting the header in
place).  acks=0 gets no response at all; acks=1 is answered after the leader's append;
acks=-1 once the ISR has the records (on one node, at once).  Topic ids (v13+) are
resolved here; an unknown id answers UNKNOWN_TOPIC_ID.  A transactional request is
verified with the transaction coordinator first (KIP-890, ``ReplicaManager.
verify_transactions``); v12 with transaction.version 2 adds the partition instead.
"""

from __future__ import annotations

from millrace.broker.add_partitions_to_txn_manager import TransactionSupportedOperation
from millrace.broker.context import RequestContext
from millrace.broker.delayed_produce import PartitionResponse, TopicPartition
from millrace.broker.handlers import handles
from millrace.broker.replica_manager import VALID_ACKS
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    ProduceRequest,
    ProduceResponse,
)


def transaction_supported_operation(version: int, transaction_version: int
                                    ) -> TransactionSupportedOperation:
    """What a transactional Produce at ``version`` understands: v12 clients (Kafka 4)
    use it only when transaction.version 2 is advertised and expect the partition to be
    added for them; v11 knows TRANSACTION_ABORTABLE."""
    if version >= 12 and transaction_version >= 2:
        return TransactionSupportedOperation.ADD_PARTITION
    if version >= 11:
        return TransactionSupportedOperation.GENERIC_ERROR
    return TransactionSupportedOperation.DEFAULT_ERROR


@handles(ApiKey.PRODUCE)
async def handle_produce(ctx: RequestContext, body: ProduceRequest) -> ProduceResponse | None:
    services = ctx.services
    version = ctx.version
    names: list[str | None] = []
    entries: dict[TopicPartition, bytes | None] = {}
    for topic in body.topic_data:
        name = topic.name if version < 13 else services.metadata.topic_name(topic.topic_id)
        names.append(name)
        if name is not None:
            for pd in topic.partition_data:
                entries[(name, pd.index)] = pd.records
    tid = body.transactional_id
    if tid:
        results = await services.replica_manager.append_records(
            body.timeout_ms, body.acks, entries, produce_version=version,
            transactional_id=tid, txn_operation=transaction_supported_operation(
                version, services.config["transaction.version"]))
    else:
        results = await services.replica_manager.append_records(
            body.timeout_ms, body.acks, entries, produce_version=version)
    if body.acks == 0:
        return None
    cls = ProduceResponse
    topic_cls = cls.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    unknown_id = PartitionResponse(error=Errors.UNKNOWN_TOPIC_ID if body.acks in VALID_ACKS
                                   else Errors.INVALID_REQUIRED_ACKS)
    responses = []
    for topic, name in zip(body.topic_data, names):
        parts = []
        for pd in topic.partition_data:
            r = unknown_id if name is None else results[(name, pd.index)]
            parts.append(part_cls(index=pd.index, error_code=r.error, base_offset=r.base_offset,
                                  log_append_time_ms=r.log_append_time,
                                  log_start_offset=r.log_start_offset,
                                  error_message=r.error_message))
        responses.append(topic_cls(name=topic.name, topic_id=topic.topic_id,
                                   partition_responses=parts))
    return cls(responses=responses, throttle_time_ms=0)
