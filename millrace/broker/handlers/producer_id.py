"""InitProducerId (key 22): producer ids for idempotent producers.

A new idempotent producer gets a fresh id from the ``ProducerIdManager`` with epoch 0; a
client that passes its current id and epoch (v3+, KIP-360) gets the epoch bumped.
Transactional ids need the transaction coordinator (milestone 3) and are refused with a
clear error until it exists.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)

MAX_EPOCH = 32767


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, body: InitProducerIdRequest) -> InitProducerIdResponse:
    cls = InitProducerIdResponse
    if body.transactional_id is not None:
        return cls(throttle_time_ms=0, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                   producer_id=-1, producer_epoch=-1)
    if ctx.version >= 3 and body.producer_id >= 0 and 0 <= body.producer_epoch < MAX_EPOCH:
        return cls(throttle_time_ms=0, error_code=Errors.NONE, producer_id=body.producer_id,
                   producer_epoch=body.producer_epoch + 1)
    return cls(throttle_time_ms=0, error_code=Errors.NONE,
               producer_id=ctx.services.producer_id_manager.generate_producer_id(),
               producer_epoch=0)
