"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

Without a transactional id: a new idempotent producer gets a fresh id from the
``ProducerIdManager`` with epoch 0; a client that passes its current id and epoch (v3+,
KIP-360) gets the epoch bumped.  With a transactional id the request belongs to that id's
transaction coordinator (``ctx.services.transaction_coordinator``): NOT_COORDINATOR when
this broker does not lead its ``__transaction_state`` partition.  Clients before v4 do
not know PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead, as from Kafka.

Authorization (Kafka 3.9's ``handleInitProducerIdRequest``), before anything else: a
transactional producer needs Write on its TransactionalId, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an idempotent one needs IdempotentWrite on the
Cluster or Write on some topic (KIP-679, ``authorize_by_resource_type``), else
CLUSTER_AUTHORIZATION_FAILED.  Either refusal carries no producer id (-1, -1).
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.transaction import InitProducerIdResult
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from millrace.security.acl import AclOperation, ResourceType

MAX_EPOCH = 32767


def _authorization_error(ctx: RequestContext, transactional_id: str | None) -> Errors | None:
    if transactional_id is not None:
        if ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Write on any topic is enough (KIP-679): the IdempotentWrite question is not
    # logged when denied.
    if ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False) or \
            ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return Errors.CLUSTER_AUTHORIZATION_FAILED


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, body: InitProducerIdRequest) -> InitProducerIdResponse:
    cls = InitProducerIdResponse
    denied = _authorization_error(ctx, body.transactional_id)
    if denied is not None:
        return cls(throttle_time_ms=0, error_code=denied, producer_id=-1, producer_epoch=-1)
    if body.transactional_id is not None:
        expected = None
        if ctx.version >= 3 and body.producer_id >= 0:
            expected = (body.producer_id, body.producer_epoch)
        result: InitProducerIdResult = await ctx.services.transaction_coordinator.init_producer_id(
            body.transactional_id, body.transaction_timeout_ms, expected)
        error = result.error
        if error == Errors.PRODUCER_FENCED and ctx.version < 4:
            error = Errors.INVALID_PRODUCER_EPOCH
        return cls(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                   producer_epoch=result.producer_epoch)
    if ctx.version >= 3 and body.producer_id >= 0 and 0 <= body.producer_epoch < MAX_EPOCH:
        return cls(throttle_time_ms=0, error_code=Errors.NONE, producer_id=body.producer_id,
                   producer_epoch=body.producer_epoch + 1)
    return cls(throttle_time_ms=0, error_code=Errors.NONE,
               producer_id=ctx.services.producer_id_manager.generate_producer_id(),
               producer_epoch=0)
