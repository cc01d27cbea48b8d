"""Produce (key 0): decode, hand the partitions' records to the replica manager, encode.

The broker works per batch, never per record (``ReplicaManager.append_records`` checks
the batch header, CRC and codec, and the log assigns offsets by rewriting the header in
place).  acks=0 gets no response at all; acks=1 is answered after the leader's append;
acks=-1 once the ISR has the records (on one node, at once).  Topic ids (v13+) are
resolved here; an unknown id answers UNKNOWN_TOPIC_ID.  A transactional request is
verified with the transaction coordinator first (KIP-890, ``ReplicaManager.
verify_transactions``); v12 with transaction.version 2 adds the partition instead.

Authorization (Kafka 3.9's ``handleProduceRequest``): a request is transactional when the
first batch of *any* partition carries the transactional flag (CVE-2018-17196: never
judged from one partition or from the transactional id alone); it then needs Write on
the TransactionalId it names, else every partition slot answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is appended.  Each topic needs Write,
asked before its existence: a denied partition answers TOPIC_AUTHORIZATION_FAILED and
is not appended, the others are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from millrace.broker.add_partitions_to_txn_manager import TransactionSupportedOperation
from millrace.broker.context import RequestContext
from millrace.broker.delayed_produce import PartitionResponse, TopicPartition
from millrace.broker.handlers import handles
from millrace.broker.metrics import request_metrics
from millrace.broker.replica_manager import VALID_ACKS
from millrace.common.errors import CorruptBatchError, Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    ProduceRequest,
    ProduceResponse,
)
from millrace.record import iter_batches
from millrace.security.acl import AclOperation, ResourceType

# Kafka's Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED message, sent with the code.
TRANSACTIONAL_ID_DENIED = "Transactional Id authorization failed."


def transaction_supported_operation(version: int, transaction_version: int
                                    ) -> TransactionSupportedOperation:
    """What a transactional Produce at ``version`` understands: v12 clients (Kafka 4)
    use it only when transaction.version 2 is advertised and expect the partition to be
    added for them; v11 knows TRANSACTION_ABORTABLE."""
    if version >= 12 and transaction_version >= 2:
        return TransactionSupportedOperation.ADD_PARTITION
    if version >= 11:
        return TransactionSupportedOperation.GENERIC_ERROR
    return TransactionSupportedOperation.DEFAULT_ERROR


def has_transactional_records(partition_records: Iterable[bytes | None]) -> bool:
    """Whether the first batch of any partition's records is transactional (Kafka's
    ``RequestUtils.hasTransactionalRecords``).  Records that do not parse count as not
    transactional here: the append refuses them with the same reader."""
    for data in partition_records:
        if not data:
            continue
        try:
            first = next(iter_batches(data), None)
        except CorruptBatchError:
            continue
        if first is not None and first[1].is_transactional:
            return True
    return False


def _error_response(body: ProduceRequest, error: Errors, message: str) -> ProduceResponse:
    """The request refused whole: ``error`` in every partition slot (Kafka's
    ``ProduceRequest.getErrorResponse``)."""
    topic_cls = ProduceResponse.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    return ProduceResponse(throttle_time_ms=0, responses=[
        topic_cls(name=t.name, topic_id=t.topic_id, partition_responses=[
            part_cls(index=pd.index, error_code=error, base_offset=-1, log_append_time_ms=-1,
                     log_start_offset=-1, error_message=message)
            for pd in t.partition_data])
        for t in body.topic_data])


_PART_CLS = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_PART_FIELDS = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset",
                "record_errors", "error_message", "current_leader")
# One shared, never mutated "no leader" for every slot's (tagged, v10+) current_leader: a
# Produce answer never names a new leader here, and its encoder only reads it.
_NO_LEADER = _PART_CLS().current_leader


# the fields filled in below: if the schema grows, every slot is built the usual way
_FILL_DIRECTLY = _PART_CLS._fields == _PART_FIELDS and _PART_CLS.__new__ is object.__new__
_new_struct = object.__new__  # looked up once: ``cls.__new__`` goes through the metaclass


def _part_response(index: int, r: PartitionResponse) -> Any:
    """One partition's slot of the response: the generated struct filled in directly (a
    thousand-partition request builds a thousand of these; ``Struct(**kw)`` costs a
    keyword dict and a default object per slot)."""
    if not _FILL_DIRECTLY:
        return _PART_CLS(index=index, error_code=r.error, base_offset=r.base_offset,
                         log_append_time_ms=r.log_append_time,
                         log_start_offset=r.log_start_offset, error_message=r.error_message)
    part = _new_struct(_PART_CLS)
    part.index = index
    part.error_code = r.error
    part.base_offset = r.base_offset
    part.log_append_time_ms = r.log_append_time
    part.log_start_offset = r.log_start_offset
    part.record_errors = []
    part.error_message = r.error_message
    part.current_leader = _NO_LEADER
    return part


def _transactional_id_authorized(ctx: RequestContext, tid: str | None) -> bool:
    """Write on the TransactionalId the request names; a request naming none cannot
    have it.  Without an authorizer such a request is appended as it always was here
    (Kafka 3.9 refuses a null id with TRANSACTIONAL_ID_AUTHORIZATION_FAILED even then)."""
    if ctx.services.acls is None:
        return True
    return tid is not None and ctx.authorize(AclOperation.WRITE,
                                             ResourceType.TRANSACTIONAL_ID, tid)


@handles(ApiKey.PRODUCE)
async def handle_produce(ctx: RequestContext, body: ProduceRequest) -> ProduceResponse | None:
    services = ctx.services
    version = ctx.version
    tid = body.transactional_id
    # without an authorizer nothing depends on it: the batches are not looked at here
    transactional = services.acls is not None and has_transactional_records(
        pd.records for t in body.topic_data for pd in t.partition_data)
    if transactional and not _transactional_id_authorized(ctx, tid):
        if body.acks == 0:
            return None
        return _error_response(body, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                               TRANSACTIONAL_ID_DENIED)
    names: list[str | None] = [
        topic.name if version < 13 else services.metadata.topic_name(topic.topic_id)
        for topic in body.topic_data]
    writable = ctx.authorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                    (n for n in names if n is not None))
    entries: dict[TopicPartition, bytes | None] = {}
    for topic, name in zip(body.topic_data, names):
        if name in writable:
            for pd in topic.partition_data:
                entries[(name, pd.index)] = pd.records
    results: dict[TopicPartition, PartitionResponse] = {}
    replica_manager = services.replica_manager
    tracer = replica_manager.tracer
    # some topic armed for record tracing: who asks and when it arrived (record_tracer.py)
    trace = tracer.produce_request(ctx, body.acks, request_metrics.CURRENT_REQUEST.get(),
                                   request_metrics.clock) if tracer.armed else None
    if entries and tid:
        results = await replica_manager.append_records(
            body.timeout_ms, body.acks, entries, produce_version=version,
            transactional_id=tid, txn_operation=transaction_supported_operation(
                version, services.config["transaction.version"]), trace=trace)
    elif entries:
        results = await replica_manager.append_records(
            body.timeout_ms, body.acks, entries, produce_version=version, trace=trace)
    if body.acks == 0:
        return None
    topic_cls = ProduceResponse.TopicProduceResponse
    unknown_id = PartitionResponse(error=Errors.UNKNOWN_TOPIC_ID if body.acks in VALID_ACKS
                                   else Errors.INVALID_REQUIRED_ACKS)
    denied = PartitionResponse(error=Errors.TOPIC_AUTHORIZATION_FAILED)
    responses = []
    for topic, name in zip(body.topic_data, names):
        if name is None or name not in writable:
            same = unknown_id if name is None else denied
            parts = [_part_response(pd.index, same) for pd in topic.partition_data]
        else:
            parts = [_part_response(pd.index, results[(name, pd.index)])
                     for pd in topic.partition_data]
        responses.append(topic_cls(name=topic.name, topic_id=topic.topic_id,
                                   partition_responses=parts))
    return ProduceResponse(responses=responses, throttle_time_ms=0)
