"""WriteTxnMarkers (key 27, v1; flexible): the transaction coordinator asks this broker,
as partition leader, to end a transaction on some of its partitions.

Each marker names a producer id and epoch, the result (True: COMMIT, False: ABORT), the
coordinator epoch and the topics/partitions.  ``ReplicaManager.append_txn_markers``
appends one control batch per partition (``record/control.py``) with origin COORDINATOR
-- the producer state refuses a stale producer epoch (INVALID_PRODUCER_EPOCH) or
coordinator epoch (TRANSACTION_COORDINATOR_FENCED) -- waits for the ISR as acks=-1 does,
and answers per partition.  Internal topics take markers too (``__consumer_offsets``
holds transactional offset commits).  Producers can never write control batches: a
Produce request carrying one is INVALID_RECORD (``storage/validator.py``).

Only brokers may send it: the caller needs Alter on the cluster (asked without logging a
denial) or else ClusterAction on the cluster, as Kafka 3.9 checks; otherwise every
partition slot answers CLUSTER_AUTHORIZATION_FAILED and nothing is written.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.txn_marker_writer import TxnMarkerEntry
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from millrace.security.acl import AclOperation


@handles(ApiKey.WRITE_TXN_MARKERS)
async def handle_write_txn_markers(ctx: RequestContext, body: WriteTxnMarkersRequest
                                   ) -> WriteTxnMarkersResponse:
    cls = WriteTxnMarkersResponse
    result_cls = cls.WritableTxnMarkerResult
    topic_cls = result_cls.WritableTxnMarkerTopicResult
    part_cls = topic_cls.WritableTxnMarkerPartitionResult
    if not (ctx.authorize_cluster(AclOperation.ALTER, log_if_denied=False)
            or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)):
        return cls(markers=[result_cls(producer_id=m.producer_id, topics=[
            topic_cls(name=t.name, partitions=[
                part_cls(partition_index=i, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED)
                for i in t.partition_indexes]) for t in m.topics]) for m in body.markers])
    entries = [TxnMarkerEntry(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                              m.transaction_result,
                              tuple(dict.fromkeys((t.name, i) for t in m.topics
                                                  for i in t.partition_indexes)))
               for m in body.markers]
    results = await ctx.services.replica_manager.append_txn_markers(entries)
    markers = []
    for m, errors in zip(body.markers, results):
        topics = [topic_cls(name=t.name, partitions=[
                      part_cls(partition_index=i, error_code=errors[(t.name, i)])
                      for i in t.partition_indexes])
                  for t in m.topics]
        markers.append(result_cls(producer_id=m.producer_id, topics=topics))
    return cls(markers=markers)
