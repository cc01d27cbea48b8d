"""Transaction APIs sent to the transaction coordinator: AddPartitionsToTxn (24, v0-3),
AddOffsetsToTxn (25), EndTxn (26, v0-4) from producers; DescribeTransactions (65) and
ListTransactions (66, v0-2) from admin clients.

Thin adapters over ``ctx.services.transaction_coordinator``.  What only the broker knows
is added here: AddPartitionsToTxn refuses partitions of unknown topics (those get
UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, nothing is added, as in
Kafka), and AddOffsetsToTxn turns the group id into its ``__consumer_offsets`` partition.
Before v2 of each API, PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.

Served versions (``api_version_manager``): AddPartitionsToTxn up to 5 -- v4+ is the
batched broker-to-broker form of KIP-890 (verification, and implicit adds for
transaction.version 2 clients), which clients do not send -- and EndTxn up to 4, or 5
with ``transaction.version=2`` (the epoch bump per transaction, KIP-890 part 2).

Authorization (Kafka 3.9's ``KafkaApis``), before the coordinator or the metadata is
asked: AddPartitionsToTxn v0-3 needs Write on the transactional id (else 53 for every
partition), then Write on each topic -- any partition refused (29) or unknown fails the
whole request and the others answer OPERATION_NOT_ATTEMPTED; the internal topics are
never authorized there (offsets join a transaction through AddOffsetsToTxn).  Its v4+
broker-to-broker form needs ClusterAction on the cluster (31, top-level error).
AddOffsetsToTxn needs Write on the transactional id (53), then Read on the group (30);
EndTxn Write on the transactional id (53).  DescribeTransactions answers 53 for an id the
caller may not Describe and shows only the topics it may Describe; ListTransactions
lists only the ids it may Describe.
"""

from __future__ import annotations

import re
from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.metadata import INTERNAL_TOPICS
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from millrace.security.acl import AclOperation, ResourceType

OFFSETS_TOPIC = "__consumer_offsets"


def _fenced(error: int, version: int) -> int:
    return Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED and version < 2 \
        else error


def _writable(ctx: RequestContext, transactional_id: str) -> bool:
    return ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _refused_topics(ctx: RequestContext, partitions: list[tuple[str, int]]) -> set[str]:
    """The topics of a client's AddPartitionsToTxn it may not Write.  With an authorizer
    the internal topics are never authorized here, as in Kafka's ``KafkaApis`` (which
    leaves them out of the names it asks about)."""
    names = {topic for topic, _ in partitions}
    if ctx.services.acls is None:
        return set()
    return names - ctx.authorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                        names - INTERNAL_TOPICS)


async def _add_partitions(ctx: RequestContext, transactional_id: str, producer_id: int,
                          producer_epoch: int, partitions: list[tuple[str, int]],
                          verify_only: bool, client_transaction_version: int,
                          refused: set[str] | frozenset[str] = frozenset()
                          ) -> dict[tuple[str, int], int]:
    """``refused``: topics the caller may not Write (their partitions answer 29)."""
    topics = ctx.services.metadata.topics
    failed: dict[tuple[str, int], int] = {}
    for topic, index in partitions:
        if topic in refused:
            failed[(topic, index)] = Errors.TOPIC_AUTHORIZATION_FAILED
        elif topic not in topics or not 0 <= index < topics[topic].partitions:
            failed[(topic, index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        return {tp: failed.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    coordinator = ctx.services.transaction_coordinator
    if verify_only:
        return coordinator.coordinator.verify_partitions_in_txn(
            transactional_id, producer_id, producer_epoch, partitions)
    error = await coordinator.add_partitions_to_txn(
        transactional_id, producer_id, producer_epoch, partitions, client_transaction_version)
    return dict.fromkeys(partitions, _fenced(error, ctx.version))


def _topic_results(topic_cls: Any, errors: dict[tuple[str, int], int]) -> list[Any]:
    """``topic_cls``: the v0-3 or the v4+ (per transaction) topic result class."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append((partition, error))
    return [topic_cls(name=topic, results_by_partition=[
        topic_cls.AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=e) for p, e in results])
        for topic, results in by_topic.items()]


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
async def handle_add_partitions_to_txn(ctx: RequestContext, body: AddPartitionsToTxnRequest
                                       ) -> AddPartitionsToTxnResponse:
    """v0-3: one transaction, from its producer.  v4+: the batched form partition
    leaders send (KIP-890): per transaction ``verify_only`` asks whether the partitions
    are in the ongoing transaction (NONE / TRANSACTION_ABORTABLE per partition, nothing
    written), otherwise adds them for a transaction.version 2 client."""
    cls = AddPartitionsToTxnResponse
    if ctx.version <= 3:
        partitions = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        errors: dict[tuple[str, int], int]
        if not _writable(ctx, body.v3_and_below_transactional_id):
            errors = dict.fromkeys(partitions, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            errors = await _add_partitions(
                ctx, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                body.v3_and_below_producer_epoch, partitions, verify_only=False,
                client_transaction_version=0, refused=_refused_topics(ctx, partitions))
        return cls(throttle_time_ms=0,
                   results_by_topic_v3_and_below=_topic_results(
                       cls.AddPartitionsToTxnTopicResult, errors))
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):   # from brokers only
        return cls(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                   results_by_transaction=[])
    results = []
    for txn in body.transactions:
        errors = await _add_partitions(
            ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
            [(t.name, p) for t in txn.topics for p in t.partitions],
            verify_only=txn.verify_only, client_transaction_version=2)
        results.append(cls.AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id, topic_results=_topic_results(
                cls.AddPartitionsToTxnResult.AddPartitionsToTxnTopicResult, errors)))
    return cls(throttle_time_ms=0, error_code=Errors.NONE, results_by_transaction=results)


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(ctx: RequestContext, body: AddOffsetsToTxnRequest
                                    ) -> AddOffsetsToTxnResponse:
    if not _writable(ctx, body.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    partition = ctx.services.group_coordinator.partition_for(body.group_id)
    error = await ctx.services.transaction_coordinator.add_partitions_to_txn(
        body.transactional_id, body.producer_id, body.producer_epoch,
        [(OFFSETS_TOPIC, partition)])
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced(error, ctx.version))


@handles(ApiKey.END_TXN)
async def handle_end_txn(ctx: RequestContext, body: EndTxnRequest) -> EndTxnResponse:
    """v5 is transaction.version 2: the epoch is bumped and the answer carries the
    producer id and epoch for the next transaction."""
    if not _writable(ctx, body.transactional_id):
        return EndTxnResponse(throttle_time_ms=0,
                              error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = await ctx.services.transaction_coordinator.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
        2 if ctx.version >= 5 else 0)
    return EndTxnResponse(throttle_time_ms=0, error_code=_fenced(result.error, ctx.version),
                          producer_id=result.producer_id,
                          producer_epoch=result.producer_epoch)


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
async def handle_describe_transactions(ctx: RequestContext, body: DescribeTransactionsRequest
                                       ) -> DescribeTransactionsResponse:
    """Each id as its coordinator holds it: NOT_COORDINATOR for ids whose
    ``__transaction_state`` partition this broker does not lead (the admin client asks
    each id's coordinator), TRANSACTIONAL_ID_NOT_FOUND for ids it has never seen; an id
    the caller may not Describe is TRANSACTIONAL_ID_AUTHORIZATION_FAILED whether it
    exists or not, and of the others only the topics it may Describe are shown."""
    cls = DescribeTransactionsResponse
    coordinator = ctx.services.transaction_coordinator.coordinator
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                   body.transactional_ids)
    described = {tid: coordinator.describe_transaction(tid)
                 for tid in body.transactional_ids if tid in allowed}
    visible = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (
        topic for d in described.values() for topic, _ in d.partitions))
    states = []
    for tid in body.transactional_ids:
        if tid not in described:
            states.append(cls.TransactionState(
                transactional_id=tid, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        d = described[tid]
        by_topic: dict[str, list[int]] = {}
        for topic, partition in d.partitions:
            if topic in visible:
                by_topic.setdefault(topic, []).append(partition)
        states.append(cls.TransactionState(
            error_code=d.error, transactional_id=tid, transaction_state=d.state,
            transaction_timeout_ms=d.transaction_timeout_ms,
            transaction_start_time_ms=d.transaction_start_time_ms,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[cls.TransactionState.TopicData(topic=t, partitions=ps)
                    for t, ps in sorted(by_topic.items())]))
    return cls(throttle_time_ms=0, transaction_states=states)


@handles(ApiKey.LIST_TRANSACTIONS)
async def handle_list_transactions(ctx: RequestContext, body: ListTransactionsRequest
                                   ) -> ListTransactionsResponse:
    """The transactions this broker coordinates (the admin client asks every broker),
    filtered by state names, producer ids, how long they have run (v1+) and a regular
    expression the whole transactional id must match (v2+); only the ids the caller may
    Describe are listed."""
    cls = ListTransactionsResponse
    pattern: re.Pattern[str] | None = None
    if ctx.version >= 2 and body.transactional_id_pattern:
        try:
            pattern = re.compile(body.transactional_id_pattern)
        except re.error:
            return cls(throttle_time_ms=0, error_code=Errors.INVALID_REGULAR_EXPRESSION,
                       unknown_state_filters=[], transaction_states=[])
    error, unknown, listings = ctx.services.transaction_coordinator.coordinator \
        .list_transactions(body.state_filters, body.producer_id_filters,
                           body.duration_filter if ctx.version >= 1 else -1,
                           ctx.services.time.milliseconds())
    listings = [t for t in listings
                if pattern is None or pattern.fullmatch(t.transactional_id)]
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                   (t.transactional_id for t in listings))
    return cls(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
               transaction_states=[
                   cls.TransactionState(transactional_id=t.transactional_id,
                                        producer_id=t.producer_id, transaction_state=t.state)
                   for t in listings if t.transactional_id in allowed])
