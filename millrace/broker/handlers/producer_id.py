"""InitProducerId (key 22): producer ids for idempotent producers.

Ids come from blocks of 1000 reserved durably in the metadata store, so a restarted
broker never hands out an id twice.  A new idempotent producer gets epoch 0; a client
that passes its current id and epoch (v3+, KIP-360) gets the epoch bumped.  Transactional
ids need the transaction coordinator (milestone 3) and are refused with a clear error
until it exists.
"""

from __future__ import annotations

from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.protocol import ApiKey

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_TRANSACTION_TIMEOUT = 50
BLOCK = 1000
MAX_EPOCH = 32767


class ProducerIdManager:
    def __init__(self, reserve: Any) -> None:
        self._reserve = reserve
        self._next = 0
        self._end = 0

    def generate(self) -> int:
        if self._next >= self._end:
            self._next, self._end = self._reserve(BLOCK)
        pid = self._next
        self._next += 1
        return pid


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, body: Any) -> Any:
    server = ctx.server
    cls = ctx.api.response.cls
    if body.transactional_id is not None:
        return cls(throttle_time_ms=0, error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                   producer_id=-1, producer_epoch=-1)
    manager = getattr(server, "producer_id_manager", None)
    if manager is None:
        manager = server.producer_id_manager = ProducerIdManager(
            server.metadata.reserve_producer_ids)
    if ctx.version >= 3 and body.producer_id >= 0 and 0 <= body.producer_epoch < MAX_EPOCH:
        return cls(throttle_time_ms=0, error_code=0, producer_id=body.producer_id,
                   producer_epoch=body.producer_epoch + 1)
    return cls(throttle_time_ms=0, error_code=0, producer_id=manager.generate(),
               producer_epoch=0)
