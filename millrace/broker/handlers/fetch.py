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


@handles(ApiKey.FETCH)
async def handle_fetch(ctx: RequestContext, body: FetchRequest) -> FetchResponse:
    services = ctx.services
    cls = FetchResponse
    v = ctx.version
    if v >= 7 and body.session_id != 0:
        return cls(throttle_time_ms=0, error_code=Errors.FETCH_SESSION_ID_NOT_FOUND,
                   session_id=0, responses=[])
    isolation = body.isolation_level if v >= 4 else 0
    names: list[str | None] = []
    infos: list[tuple[tuple[str, int], PartitionFetchInfo]] = []
    for t in body.topics:
        name = t.topic if v < 13 else services.metadata.topic_name(t.topic_id)
        names.append(name)
        if name is not None:
            infos.extend(((name, p.partition), PartitionFetchInfo(
                p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch if v >= 9 else -1)) for p in t.partitions)
    unknown_ids = any(name is None for name in names)
    params = FetchParams(max_wait_ms=0 if unknown_ids else max(body.max_wait_ms, 0),
                         min_bytes=body.min_bytes,
                         max_bytes=body.max_bytes if v >= 3 else 0x7FFFFFFF,
                         isolation_level=isolation,
                         replica_id=body.replica_id if v <= 14 else body.replica_state.replica_id)
    results = iter(await services.replica_manager.fetch_messages(params, infos))
    topic_cls = cls.FetchableTopicResponse
    part_cls = topic_cls.PartitionData
    unknown = FetchPartitionData(Errors.UNKNOWN_TOPIC_ID)
    aborted_cls = part_cls.AbortedTransaction
    responses = []
    for t, name in zip(body.topics, names):
        parts = []
        for p in t.partitions:
            r = unknown if name is None else next(results)
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
