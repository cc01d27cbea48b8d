"""TxnOffsetCommit (28), versions 0-5: a transactional producer commits a consumer group's
offsets inside its transaction (KIP-98; v3+ carries the group metadata of KIP-447).

Thin adapter, like ``group.py``: partitions of topics this cluster does not know are
refused here with UNKNOWN_TOPIC_OR_PARTITION (as Kafka's ``KafkaApis`` does); the rest
goes to the group coordinator, which writes them as a transactional batch of the producer
and holds them pending until the transaction's marker.  Clients before v2 (Kafka < 2.0)
may crash on COORDINATOR_LOAD_IN_PROGRESS, so they get COORDINATOR_NOT_AVAILABLE instead.

v5 (served with ``transaction.version=2``): the client sent no AddOffsetsToTxn, so the
group's ``__consumer_offsets`` partition is added to its transaction here first, the way
a partition leader does for Produce v12 (AddPartitionsToTxn v5 to the transaction
coordinator, not verify-only); if that fails every partition gets its error and nothing
is written.  Verification of v0-4 requests (Kafka 3.6+ verifies them too) is not done.

Authorization (Kafka 3.9's ``KafkaApis``), before anything is looked up or added: Write
on the transactional id (else 53 in every partition), Read on the group (else 30 in
every partition), then Read on each topic (29 for the partitions of a refused topic; the
others go on).  When no topic is left nothing is added to the transaction.
"""

from __future__ import annotations

from millrace.broker.add_partitions_to_txn_manager import TransactionSupportedOperation
from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.handlers.group import (
    commit_readable_topics,
    error_topics,
    unknown_partitions,
)
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from millrace.security.acl import AclOperation, ResourceType

OFFSETS_TOPIC = "__consumer_offsets"


async def _add_offsets_partition(ctx: RequestContext, body: TxnOffsetCommitRequest) -> int:
    manager = ctx.services.replica_manager.add_partitions_to_txn_manager
    if manager is None:
        return int(Errors.COORDINATOR_NOT_AVAILABLE)
    tp = (OFFSETS_TOPIC, ctx.services.group_coordinator.partition_for(body.group_id))
    errors = await manager.verify_transaction(
        body.transactional_id, body.producer_id, body.producer_epoch, [tp],
        TransactionSupportedOperation.ADD_PARTITION)
    return errors.get(tp, Errors.NONE)


@handles(ApiKey.TXN_OFFSET_COMMIT)
async def handle_txn_offset_commit(ctx: RequestContext,
                                   body: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    cls = TxnOffsetCommitResponse
    t_cls = cls.TxnOffsetCommitResponseTopic
    p_cls = t_cls.TxnOffsetCommitResponsePartition
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         body.transactional_id):
        return cls(throttle_time_ms=0, topics=error_topics(
            t_cls, p_cls, body.topics, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return cls(throttle_time_ms=0, topics=error_topics(
            t_cls, p_cls, body.topics, Errors.GROUP_AUTHORIZATION_FAILED))
    return await commit_readable_topics(ctx, body, cls, t_cls, p_cls,
                                        lambda part: _commit(ctx, part))


async def _commit(ctx: RequestContext, body: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    if ctx.version >= 5:
        error = await _add_offsets_partition(ctx, body)
        if error:
            cls = TxnOffsetCommitResponse
            t_cls = cls.TxnOffsetCommitResponseTopic
            return cls(throttle_time_ms=0, topics=error_topics(
                t_cls, t_cls.TxnOffsetCommitResponsePartition, body.topics, error))
    response: TxnOffsetCommitResponse = await ctx.services.group_coordinator.txn_commit_offsets(
        body, ctx.version, unknown_partitions(ctx, body))
    if ctx.version < 2:
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS:
                    part.error_code = Errors.COORDINATOR_NOT_AVAILABLE
    return response
