"""Transaction APIs sent by producers to their transaction coordinator: AddPartitionsToTxn
(24, v0-3), AddOffsetsToTxn (25), EndTxn (26, v0-4).

Thin adapters over ``ctx.services.transaction_coordinator``.  What only the broker knows
is added here: AddPartitionsToTxn refuses partitions of unknown topics (those get
UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, nothing is added, as in
Kafka), and AddOffsetsToTxn turns the group id into its ``__consumer_offsets`` partition.
Before v2 of each API, PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.

Served versions (``api_version_manager``): AddPartitionsToTxn up to 3 -- v4+ is the
broker-to-broker verify-only form of KIP-890, which no client sends -- and EndTxn up to 4
(v5 belongs to transaction.version 2, which this broker does not advertise).
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
)

OFFSETS_TOPIC = "__consumer_offsets"


def _fenced(error: int, version: int) -> int:
    return Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED and version < 2 \
        else error


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
async def handle_add_partitions_to_txn(ctx: RequestContext, body: AddPartitionsToTxnRequest
                                       ) -> AddPartitionsToTxnResponse:
    cls = AddPartitionsToTxnResponse
    partitions = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    topics = ctx.services.metadata.topics
    unknown = {tp for tp in partitions
               if tp[0] not in topics or not 0 <= tp[1] < topics[tp[0]].partitions}
    errors: dict[tuple[str, int], int]
    if unknown:
        errors = {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                  else Errors.OPERATION_NOT_ATTEMPTED for tp in partitions}
    else:
        error = await ctx.services.transaction_coordinator.add_partitions_to_txn(
            body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch, partitions)
        error = _fenced(error, ctx.version)
        errors = dict.fromkeys(partitions, error)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append((partition, error))
    return cls(throttle_time_ms=0, results_by_topic_v3_and_below=[
        cls.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=[
            cls.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                partition_index=p, partition_error_code=e) for p, e in results])
        for topic, results in by_topic.items()])


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(ctx: RequestContext, body: AddOffsetsToTxnRequest
                                    ) -> AddOffsetsToTxnResponse:
    partition = ctx.services.group_coordinator.partition_for(body.group_id)
    error = await ctx.services.transaction_coordinator.add_partitions_to_txn(
        body.transactional_id, body.producer_id, body.producer_epoch,
        [(OFFSETS_TOPIC, partition)])
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced(error, ctx.version))


@handles(ApiKey.END_TXN)
async def handle_end_txn(ctx: RequestContext, body: EndTxnRequest) -> EndTxnResponse:
    error = await ctx.services.transaction_coordinator.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
    return EndTxnResponse(throttle_time_ms=0, error_code=_fenced(error, ctx.version))
