"""Fetch (key 1): return log data from each requested partition's fetch offset.

Long polling (Kafka's DelayedFetch): when the first read gathers fewer than
``min_bytes`` and no partition has an error, the request parks in the fetch purgatory
until an append to one of its partitions wakes it or ``max_wait_ms`` passes, then reads
again.  Limits: ``partition_max_bytes`` per partition and ``max_bytes`` per response,
except that the first batch of the first non-empty partition is returned whole even if
larger (so a consumer always makes progress).  Incremental fetch sessions (KIP-227) are
not kept: the answer always carries session id 0, which tells clients to send full
fetch requests.
"""

from __future__ import annotations

import time
from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.protocol import ApiKey

FETCH_SESSION_ID_NOT_FOUND = 70
UNKNOWN_TOPIC_ID = 100


@handles(ApiKey.FETCH)
async def handle_fetch(ctx: RequestContext, body: Any) -> Any:
    server = ctx.server
    rm = server.replica_manager
    cls = ctx.api.response.cls
    v = ctx.version
    if v >= 7 and body.session_id != 0:
        return cls(throttle_time_ms=0, error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                   responses=[])
    isolation = body.isolation_level if v >= 4 else 0
    max_bytes = body.max_bytes if v >= 3 else 0x7FFFFFFF
    wanted = []  # (topic name, topic request)
    for t in body.topics:
        name = t.topic
        if v >= 13:
            info = server.metadata.topic_by_id(t.topic_id)
            name = info.name if info is not None else None
        wanted.append((name, t))
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    keys = [(name, p.partition) for name, t in wanted if name for p in t.partitions]
    while True:
        responses, total, errors = _read_all(ctx, cls, wanted, max_bytes, isolation)
        remaining = deadline - time.monotonic()
        if total >= body.min_bytes or errors or remaining <= 0 or not keys:
            break
        if not await rm.fetch_purgatory.wait(keys, remaining):
            responses, total, errors = _read_all(ctx, cls, wanted, max_bytes, isolation)
            break
    return cls(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)


def _read_all(ctx: RequestContext, cls: Any, wanted: list[tuple[str | None, Any]],
              max_bytes: int, isolation: int) -> tuple[list[Any], int, bool]:
    rm = ctx.server.replica_manager
    topic_cls = cls.FetchableTopicResponse
    part_cls = topic_cls.PartitionData
    responses = []
    total = 0
    errors = False
    for name, t in wanted:
        parts = []
        for p in t.partitions:
            resp = part_cls(partition_index=p.partition, error_code=0, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1,
                            aborted_transactions=[] if isolation == 1 else None,
                            preferred_read_replica=-1, records=b"")
            if name is None:
                resp.error_code = UNKNOWN_TOPIC_ID
                errors = True
            else:
                budget = max(0, min(p.partition_max_bytes, max_bytes - total))
                read = rm.read(name, p.partition, p.fetch_offset, budget,
                               min_one_message=(total == 0), isolation=isolation)
                resp.error_code = read.error_code
                resp.high_watermark = read.high_watermark
                resp.last_stable_offset = read.last_stable_offset
                resp.log_start_offset = read.log_start_offset
                if read.error_code:
                    errors = True
                else:
                    resp.records = read.records
                    total += len(read.records)
            parts.append(resp)
        responses.append(topic_cls(topic=t.topic, topic_id=t.topic_id, partitions=parts))
    return responses, total, errors
