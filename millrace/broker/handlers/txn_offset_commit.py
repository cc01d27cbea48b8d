"""TxnOffsetCommit (28), versions 0-4: a transactional producer commits a consumer group's
offsets inside its transaction (KIP-98; v3+ carries the group metadata of KIP-447).

Thin adapter, like ``group.py``: partitions of topics this cluster does not know are
refused here with UNKNOWN_TOPIC_OR_PARTITION (as Kafka's ``KafkaApis`` does); the rest
goes to the group coordinator, which writes them as a transactional batch of the producer
and holds them pending until the transaction's marker.  Clients before v2 (Kafka < 2.0)
may crash on COORDINATOR_LOAD_IN_PROGRESS, so they get COORDINATOR_NOT_AVAILABLE instead.

v5 is not served: a v5 client expects the broker to add ``__consumer_offsets`` to its
transaction itself (KIP-890 part 2, ``transaction.version`` 2), which we do not offer.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import TxnOffsetCommitRequest, TxnOffsetCommitResponse


def _unknown_partitions(ctx: RequestContext,
                        body: TxnOffsetCommitRequest) -> frozenset[tuple[str, int]]:
    topics = ctx.services.metadata.topics
    unknown = set()
    for t in body.topics:
        info = topics.get(t.name)
        for p in t.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                unknown.add((t.name, p.partition_index))
    return frozenset(unknown)


@handles(ApiKey.TXN_OFFSET_COMMIT)
async def handle_txn_offset_commit(ctx: RequestContext,
                                   body: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    response: TxnOffsetCommitResponse = await ctx.services.group_coordinator.txn_commit_offsets(
        body, ctx.version, _unknown_partitions(ctx, body))
    if ctx.version < 2:
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS:
                    part.error_code = Errors.COORDINATOR_NOT_AVAILABLE
    return response
