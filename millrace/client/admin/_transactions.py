"""Transaction admin: ListTransactions, DescribeTransactions, DescribeProducers and the
admin's own WriteTxnMarkers (the bodies of ``KafkaAdminClient``'s transaction methods;
Java's ``ListTransactionsHandler``, ``DescribeTransactionsHandler``,
``DescribeProducersHandler`` and ``AbortTransactionHandler``).

Who answers what:

- ListTransactions is answered per broker: each lists the transactions of the
  ``__transaction_state`` partitions it leads.  The call goes to every broker of the
  metadata and merges the answers; a broker still loading its partitions answers
  COORDINATOR_LOAD_IN_PROGRESS and is asked again after a backoff, any other top-level
  error fails the call.  The duration filter needs v1 and the id pattern v2: a broker
  without them refuses the call (UnsupportedVersionError) rather than answer unfiltered.
- DescribeTransactions goes to each id's coordinator: FindCoordinator with key type 1
  (TRANSACTION), one batched v4 request for all ids where the broker has v4, one request
  per id before that; the ids are then grouped by coordinator, one request per node.
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE (the id moved) and
  COORDINATOR_LOAD_IN_PROGRESS send that id round again, until the deadline; any other
  per-id error (TRANSACTIONAL_ID_NOT_FOUND) is that id's result.
- DescribeProducers goes to each partition's leader (or to one given broker).
- ``abort_transaction`` writes an ABORT marker itself (WriteTxnMarkers v1, key 27) to the
  partition's leader with the producer id/epoch and coordinator epoch of the spec: the
  operator's way out of a *hanging* transaction, one whose coordinator has forgotten it,
  which would otherwise hold the partition's last stable offset forever.  The leader's
  producer state refuses a stale producer epoch (INVALID_PRODUCER_EPOCH) or coordinator
  epoch (TRANSACTION_COORDINATOR_FENCED).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from millrace.client.admin._admin_network import (
    COORDINATOR_ERRORS,
    AdminNetwork,
    RetriableCallError,
)
from millrace.client.admin._topics import by_leader
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.client.admin.types import (
    AbortTransactionSpec,
    PartitionProducerState,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionState,
)
from millrace.client.cluster import Node, TopicPartition
from millrace.common.errors import Errors, KafkaError, for_code
from millrace.protocol import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)

log = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
_BATCHED_FIND_COORDINATOR = 4


# ---------------------------------------------------------------------- list
def list_transactions(net: AdminNetwork, states: Iterable[str] | None,
                      producer_ids: Iterable[int] | None, duration_ms: int | None,
                      pattern: str | None, deadline_ms: int) -> list[TransactionListing]:
    """Every broker's transactions, sorted by transactional id."""
    min_version = 2 if pattern else 1 if duration_ms is not None and duration_ms >= 0 else None
    body = ListTransactionsRequest(
        state_filters=[str(s) for s in states or ()],
        producer_id_filters=list(producer_ids or ()),
        duration_filter=-1 if duration_ms is None else duration_ms,
        transactional_id_pattern=pattern or None)
    listings: list[TransactionListing] = []
    for node in net.cluster(deadline_ms).nodes:
        what = f"listing the transactions of node {node.id}"

        def attempt(node: Node = node, what: str = what) -> Any:
            response, _ = net.send(body, deadline_ms, node, min_version=min_version)
            if response.error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS:
                raise RetriableCallError(for_code(response.error_code)(what))
            if response.error_code:
                raise for_code(response.error_code)(what)
            return response

        response = net.call(deadline_ms, attempt, what)
        if response.unknown_state_filters:
            log.warning("node %d does not know the states %s", node.id,
                        response.unknown_state_filters)
        listings += [TransactionListing(t.transactional_id, t.producer_id,
                                        TransactionState.parse(t.transaction_state), node.id)
                     for t in response.transaction_states]
    return sorted(listings, key=lambda t: (t.transactional_id, t.coordinator_id))


# ---------------------------------------------------------------------- coordinators
def find_transaction_coordinators(net: AdminNetwork, ids: list[str], deadline_ms: int
                                  ) -> dict[str, Node | KafkaError]:
    """Each id's coordinator, or its error (retriable ones included: the caller decides).
    One FindCoordinator v4+ for all ids; one per id from a broker before v4."""
    body = FindCoordinatorRequest(key=ids[0], key_type=TRANSACTION_KEY_TYPE,
                                  coordinator_keys=ids)
    response, version = net.send(body, deadline_ms, min_version=1)
    if version >= _BATCHED_FIND_COORDINATOR:
        entries = {c.key: c for c in response.coordinators}
    else:
        entries = {ids[0]: response}
        for tid in ids[1:]:
            body = FindCoordinatorRequest(key=tid, key_type=TRANSACTION_KEY_TYPE)
            entries[tid], _ = net.send(body, deadline_ms, min_version=1,
                                       max_version=_BATCHED_FIND_COORDINATOR - 1)
    out: dict[str, Node | KafkaError] = {}
    for tid in ids:
        entry = entries.get(tid)
        if entry is None:
            out[tid] = KafkaError(f"transactional id '{tid}': FindCoordinator answered no entry")
        elif entry.error_code:
            out[tid] = kafka_error(entry.error_code, entry.error_message,
                                   "transactional id", tid)
        else:
            out[tid] = Node(entry.node_id, entry.host, entry.port)
    return out


# ---------------------------------------------------------------------- describe
def _description(coordinator: Node, t: Any) -> TransactionDescription:
    return TransactionDescription(
        coordinator.id, TransactionState.parse(t.transaction_state), t.producer_id,
        t.producer_epoch, t.transaction_timeout_ms,
        t.transaction_start_time_ms if t.transaction_start_time_ms >= 0 else None,
        frozenset(TopicPartition(d.topic, p) for d in t.topics for p in d.partitions))


def _describe_round(net: AdminNetwork, pending: list[str], deadline_ms: int
                    ) -> tuple[dict[str, TransactionDescription | BaseException], list[str]]:
    """One lookup and one DescribeTransactions per coordinator: each id's description or
    error, and the ids whose error is retriable (the caller retries them)."""
    outcome: dict[str, TransactionDescription | BaseException] = {}
    by_node: dict[Node, list[str]] = {}
    for tid, found in find_transaction_coordinators(net, pending, deadline_ms).items():
        if isinstance(found, KafkaError):
            outcome[tid] = found
        else:
            by_node.setdefault(found, []).append(tid)
    for node, ids in by_node.items():
        response, _ = net.send(DescribeTransactionsRequest(transactional_ids=ids),
                               deadline_ms, node)
        answered = {t.transactional_id: t for t in response.transaction_states}
        for tid in ids:
            t = answered.get(tid)
            if t is None:
                outcome[tid] = KafkaError(f"transactional id '{tid}': no answer from "
                                          f"its coordinator (node {node.id})")
            elif t.error_code:
                outcome[tid] = kafka_error(t.error_code, None, "transactional id", tid)
            else:
                outcome[tid] = _description(node, t)
    return outcome, [tid for tid in pending if _retry(outcome[tid])]


def _retry(value: TransactionDescription | BaseException) -> bool:
    return isinstance(value, KafkaError) and (value.code in COORDINATOR_ERRORS
                                              or value.retriable)


def describe_transactions(net: AdminNetwork, transactional_ids: Iterable[str],
                          deadline_ms: int) -> AdminResult[str, TransactionDescription]:
    return net.call_keys(dict.fromkeys(transactional_ids), deadline_ms,
                         lambda pending: _describe_round(net, pending, deadline_ms),
                         lambda tid: f"describing transactional id '{tid}'")


# ---------------------------------------------------------------------- producers
def _producer_states(node: Node, args: dict[TopicPartition, Any], net: AdminNetwork,
                     deadline_ms: int) -> dict[TopicPartition, Any]:
    by_topic: dict[str, list[int]] = {}
    for tp in args:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    t_cls = DescribeProducersRequest.TopicRequest
    body = DescribeProducersRequest(topics=[t_cls(name=t, partition_indexes=ps)
                                            for t, ps in by_topic.items()])
    response, _ = net.send(body, deadline_ms, node)
    out: dict[TopicPartition, Any] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                out[tp] = kafka_error(p.error_code, p.error_message, "partition", tp)
                continue
            out[tp] = PartitionProducerState([
                ProducerState(s.producer_id, s.producer_epoch, s.last_sequence,
                              s.last_timestamp,
                              s.coordinator_epoch if s.coordinator_epoch >= 0 else None,
                              s.current_txn_start_offset
                              if s.current_txn_start_offset >= 0 else None)
                for s in p.active_producers])
    for tp in args:
        out.setdefault(tp, KafkaError(f"partition '{tp}': no answer from node {node.id}"))
    return out


def describe_producers(net: AdminNetwork, partitions: Iterable[TopicPartition],
                       broker_id: int | None, deadline_ms: int
                       ) -> AdminResult[TopicPartition, PartitionProducerState]:
    wanted = dict.fromkeys(partitions)
    if broker_id is None:
        return by_leader(net, wanted, deadline_ms,
                         lambda node, args: _producer_states(node, args, net, deadline_ms),
                         "describing producers")
    node = net.cluster(deadline_ms).node_by_id(broker_id)
    if node is None:
        raise for_code(Errors.BROKER_NOT_AVAILABLE)(f"no broker {broker_id} in the metadata")
    result: AdminResult[TopicPartition, PartitionProducerState] = AdminResult()
    result.set_outcomes(wanted, _producer_states(node, wanted, net, deadline_ms))
    return result


# ---------------------------------------------------------------------- abort
def abort_transaction(net: AdminNetwork, spec: AbortTransactionSpec, deadline_ms: int
                      ) -> None:
    tp = spec.topic_partition
    m_cls = WriteTxnMarkersRequest.WritableTxnMarker

    def call(node: Node, args: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
        body = WriteTxnMarkersRequest(markers=[m_cls(
            producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
            transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
            topics=[m_cls.WritableTxnMarkerTopic(name=tp.topic,
                                                 partition_indexes=[tp.partition])])])
        response, _ = net.send(body, deadline_ms, node, max_version=1)
        codes = {TopicPartition(t.name, p.partition_index): p.error_code
                 for m in response.markers if m.producer_id == spec.producer_id
                 for t in m.topics for p in t.partitions}
        if tp not in codes:
            return {tp: KafkaError(f"partition '{tp}': no answer from node {node.id}")}
        code = codes[tp]
        return {tp: kafka_error(code, None, "partition", tp) if code else None}

    by_leader(net, {tp: None}, deadline_ms, call, "aborting a transaction")[tp].result()
