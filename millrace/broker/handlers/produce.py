"""Produce (key 0): append each partition's record batch to its log.

The broker works per batch, never per record: it checks the batch header (magic 2,
CRC, count, size, codec allowed for the request version), lets the log assign offsets
by rewriting the header in place, and answers with the base offset.  acks=0 gets no
response at all; acks=1 and acks=-1 are answered after the append (on one node the ISR
is this broker alone, so both are satisfied at once).
"""

from __future__ import annotations

from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import KafkaError
from millrace.protocol import ApiKey

INVALID_REQUIRED_ACKS = 21
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
INVALID_TOPIC = 17


@handles(ApiKey.PRODUCE)
async def handle_produce(ctx: RequestContext, body: Any) -> Any:
    server = ctx.server
    rm = server.replica_manager
    cls = ctx.api.response.cls
    topic_cls = cls.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    acks = body.acks
    now = server.time.milliseconds()
    responses = []
    for topic in body.topic_data:
        name = topic.name
        if ctx.version >= 13:
            info = server.metadata.topic_by_id(topic.topic_id)
            name = info.name if info is not None else ""
        parts = []
        for pd in topic.partition_data:
            resp = part_cls(index=pd.index, error_code=0, base_offset=-1,
                            log_append_time_ms=-1, log_start_offset=-1)
            if acks not in (-1, 0, 1):
                resp.error_code = INVALID_REQUIRED_ACKS
            elif name == "" and ctx.version >= 13:
                resp.error_code = UNKNOWN_TOPIC_ID
            elif name in ("__consumer_offsets", "__transaction_state"):
                resp.error_code = INVALID_TOPIC
                resp.error_message = f"Cannot append records to internal topic {name}"
            else:
                partition = rm.get_partition(name, pd.index)
                if partition is None:
                    resp.error_code = UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        result = partition.append_records_to_leader(
                            pd.records, ctx.version, now, body.transactional_id)
                        resp.base_offset = result.first_offset
                        resp.log_append_time_ms = result.log_append_time
                        resp.log_start_offset = result.log_start_offset
                        rm.notify_append(name, pd.index)
                    except KafkaError as e:
                        resp.error_code = e.code
                        resp.error_message = e.message
            parts.append(resp)
        responses.append(topic_cls(name=topic.name, topic_id=topic.topic_id,
                                   partition_responses=parts))
    if acks == 0:
        return None
    return cls(responses=responses, throttle_time_ms=0)
