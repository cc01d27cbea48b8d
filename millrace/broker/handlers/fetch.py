"""Fetch (key 1): decode, let the replica manager read (and long-poll), encode.

``ReplicaManager.fetch_messages`` reads each partition from its fetch offset up to the
high watermark (read_committed, v4+: the last stable offset, answering the aborted
transactions the returned records overlap) within ``partition_max_bytes`` and
``max_bytes``, and parks the request
as a ``DelayedFetch`` while it has fewer than ``min_bytes`` and ``max_wait_ms`` allows.
Topic ids (v13+) are resolved here; an unknown id answers UNKNOWN_TOPIC_ID at once (an
error ends the wait, as any partition error does).  Incremental fetch sessions (KIP-227)
are not kept: the answer always carries session id 0, which tells clients to send full
fetch requests.

Authorization (Kafka 3.9's ``handleFetchRequest``): a follower fetch (a replica id >= 0;
from v15 in ``replica_state``) needs ClusterAction on the Cluster, else every partition
answers TOPIC_AUTHORIZATION_FAILED and the replica manager is not called at all -- no
follower state, high watermark or ISR moves (CVE-2018-1288).  A consumer fetch needs
Read on each topic, asked before existence (an unknown id is still UNKNOWN_TOPIC_ID:
ids are not names); denied partitions are left out of the read and answer
TOPIC_AUTHORIZATION_FAILED in their place.  As in Kafka they do not end the wait.
With no session kept, a denied partition has no other way to data.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.delayed_fetch import FetchPartitionData
from millrace.broker.handlers import handles
from millrace.broker.replica_manager import FetchParams, PartitionFetchInfo
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    FetchRequest,
    FetchResponse,
)
from millrace.security.acl import AclOperation, ResourceType


@handles(ApiKey.FETCH)
async def handle_fetch(ctx: RequestContext, body: FetchRequest) -> FetchResponse:
    services = ctx.services
    cls = FetchResponse
    v = ctx.version
    if v >= 7 and body.session_id != 0:
        return cls(throttle_time_ms=0, error_code=Errors.FETCH_SESSION_ID_NOT_FOUND,
                   session_id=0, responses=[])
    isolation = body.isolation_level if v >= 4 else 0
    replica_id = body.replica_id if v <= 14 else body.replica_state.replica_id
    names: list[str | None] = [
        t.topic if v < 13 else services.metadata.topic_name(t.topic_id) for t in body.topics]
    # The names whose partitions may be read; None (an unknown id) when its
    # UNKNOWN_TOPIC_ID may be told -- to a consumer, or to an authorized follower.
    readable: set[str | None]
    if replica_id >= 0:
        readable = set(names) if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else set()
    else:
        readable = {None, *ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC,
                                                (n for n in names if n is not None))}
    infos: list[tuple[tuple[str, int], PartitionFetchInfo]] = []
    for t, name in zip(body.topics, names):
        if name is not None and name in readable:
            infos.extend(((name, p.partition), PartitionFetchInfo(
                p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch if v >= 9 else -1)) for p in t.partitions)
    unknown_ids = any(name is None for name in names)
    params = FetchParams(max_wait_ms=0 if unknown_ids else max(body.max_wait_ms, 0),
                         min_bytes=body.min_bytes,
                         max_bytes=body.max_bytes if v >= 3 else 0x7FFFFFFF,
                         isolation_level=isolation,
                         replica_id=replica_id, request=ctx)
    results = iter(await services.replica_manager.fetch_messages(params, infos)
                   if infos else ())
    topic_cls = cls.FetchableTopicResponse
    part_cls = topic_cls.PartitionData
    denied = FetchPartitionData(Errors.TOPIC_AUTHORIZATION_FAILED)
    unknown = FetchPartitionData(Errors.UNKNOWN_TOPIC_ID)
    aborted_cls = part_cls.AbortedTransaction
    responses = []
    for t, name in zip(body.topics, names):
        parts = []
        for p in t.partitions:
            r = (denied if name not in readable else
                 unknown if name is None else next(results))
            aborted = None
            if isolation == 1:
                aborted = [aborted_cls(producer_id=pid, first_offset=first)
                           for pid, first in r.aborted_transactions or ()]
            parts.append(part_cls(partition_index=p.partition, error_code=r.error,
                                  high_watermark=r.high_watermark,
                                  last_stable_offset=r.last_stable_offset,
                                  log_start_offset=r.log_start_offset,
                                  aborted_transactions=aborted,
                                  preferred_read_replica=-1,
                                  records=r.records))
        responses.append(topic_cls(topic=t.topic, topic_id=t.topic_id, partitions=parts))
    return cls(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)
