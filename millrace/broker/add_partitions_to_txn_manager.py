"""``AddPartitionsToTxnManager``: a partition leader asks the transaction coordinator
whether a transactional Produce (or TxnOffsetCommit) belongs to an open transaction
(KIP-890 part 1), or -- for transaction.version 2 clients -- adds the partition to it
(KIP-890 part 2, the implicit AddPartitionsToTxn).

Java counterpart: ``kafka.server.AddPartitionsToTxnManager`` (an inter-broker send thread)
together with the error translation of ``ReplicaManager.handleProduceAppend``.

Theory.  A transactional batch from a producer with no open transaction on the partition
is the first of its transaction here; the classic protocol trusts that the producer sent
AddPartitionsToTxn before it, but a Produce that was delayed past its transaction's
EndTxn would then open a transaction no coordinator knows of (a "hanging" transaction:
no marker ever closes it, the last stable offset stops there).  So the leader takes a
``VerificationGuard`` from the log, sends AddPartitionsToTxn v5 (the batched,
broker-to-broker form; ``verify_only`` true for classic clients, false to add the
partition for transaction.version 2 clients) to the leader of the transactional id's
``__transaction_state`` partition -- over the wire also when that is this broker, as the
marker channel does -- and appends only if the answer is NONE and the guard is still
current.  Answers per partition are translated as Kafka does: PRODUCER_FENCED ->
INVALID_PRODUCER_EPOCH (what producers expect from Produce); TRANSACTION_ABORTABLE ->
INVALID_TXN_STATE for requests older than the first version that knows the new error;
then, on the produce side, coordinator errors a producer would not retry (CONCURRENT_
TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NETWORK_EXCEPTION) -> NOT_ENOUGH_REPLICAS (retriable, no metadata refresh).

Differences from Kafka: one request per verification (Kafka batches the transactions bound
for one coordinator into one request, and answers an older in-flight request of the same
transactional id with NETWORK_EXCEPTION); requests to one node go one at a time over its
``BrokerChannel``.

Owned by the event-loop thread.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import Enum

from millrace.broker.broker_channel import BrokerChannels
from millrace.broker.delayed_produce import PartitionResponse
from millrace.broker.group.group_metadata_manager import partition_for
from millrace.broker.metadata import ClusterMetadata
from millrace.broker.partition import Partition
from millrace.broker.security.inter_broker import PLAINTEXT_CHANNEL, ChannelSecurity
from millrace.broker.transaction.topic import TRANSACTION_STATE_TOPIC
from millrace.common.errors import BrokerNotAvailableError, CorruptBatchError, Errors
from millrace.protocol.types import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from millrace.record.batch import iter_batches
from millrace.record.batch_header import BatchHeader
from millrace.storage.producer_state_manager import VerificationGuard

log = logging.getLogger("millrace.broker.transaction")

ADD_PARTITIONS_TO_TXN_VERSION = 5

TopicPartition = tuple[str, int]
SendAddPartitions = Callable[[int, AddPartitionsToTxnRequest],
                             Awaitable[AddPartitionsToTxnResponse]]


class TransactionSupportedOperation(Enum):
    """What the requesting client understands (Kafka's ``TransactionSupportedOperation``)."""

    DEFAULT_ERROR = "defaultError"     # Produce < v11, TxnOffsetCommit < v4
    GENERIC_ERROR = "genericError"     # knows TRANSACTION_ABORTABLE
    ADD_PARTITION = "addPartition"     # transaction.version 2: add, do not only verify


# Verification errors a producer would not retry on Produce: answered as a retriable one.
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    Errors.CONCURRENT_TRANSACTIONS, Errors.NETWORK_EXCEPTION,
    Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR})


def produce_error(error: int) -> int:
    """A verification error as the Produce response carries it."""
    return Errors.NOT_ENOUGH_REPLICAS if error in _RETRY_AS_NOT_ENOUGH_REPLICAS else error


def verification_request(transactional_id: str, producer_id: int, producer_epoch: int,
                         partitions: Iterable[TopicPartition], verify_only: bool
                         ) -> AddPartitionsToTxnRequest:
    cls = AddPartitionsToTxnRequest
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return cls(transactions=[cls.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id,
        producer_epoch=producer_epoch, verify_only=verify_only,
        topics=[cls.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
            name=t, partitions=ps) for t, ps in by_topic.items()])])


def translate_response(response: AddPartitionsToTxnResponse,
                       partitions: Iterable[TopicPartition],
                       operation: TransactionSupportedOperation) -> dict[TopicPartition, int]:
    """The partitions that were not verified, with the error to hand the client."""
    parts = list(partitions)
    if response.error_code:
        # A top-level error (Kafka hides CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE).
        error = Errors.INVALID_TXN_STATE if \
            response.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED else response.error_code
        return dict.fromkeys(parts, int(error))
    unverified: dict[TopicPartition, int] = {}
    for txn in response.results_by_transaction:
        for topic in txn.topic_results:
            for p in topic.results_by_partition:
                code = p.partition_error_code
                if code == Errors.NONE:
                    continue
                if code == Errors.PRODUCER_FENCED:
                    code = Errors.INVALID_PRODUCER_EPOCH
                elif code == Errors.TRANSACTION_ABORTABLE and \
                        operation is TransactionSupportedOperation.DEFAULT_ERROR:
                    code = Errors.INVALID_TXN_STATE
                unverified[(topic.name, p.partition_index)] = int(code)
    return unverified


class AddPartitionsToTxnManager:
    def __init__(self, metadata: ClusterMetadata, node_id: int, num_txn_partitions: int, *,
                 request_timeout_ms: int = 30_000,
                 send: SendAddPartitions | None = None,
                 security: ChannelSecurity = PLAINTEXT_CHANNEL) -> None:
        self._metadata = metadata
        self._num_txn_partitions = num_txn_partitions
        self._channels = BrokerChannels(
            lambda node: metadata.broker_endpoint(node),
            client_id=f"broker-{node_id}-add-partitions-to-txn",
            request_timeout_ms=request_timeout_ms, security=security)
        self._send = send or self._send_over_channel

    def coordinator_node(self, transactional_id: str) -> int | None:
        state = self._metadata.partition_state(
            TRANSACTION_STATE_TOPIC, partition_for(transactional_id, self._num_txn_partitions))
        if state is None or state.leader < 0:
            return None
        return int(state.leader)

    async def verify_transaction(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int, partitions: Iterable[TopicPartition],
                                 operation: TransactionSupportedOperation
                                 ) -> dict[TopicPartition, int]:
        """Ask (or, for ADD_PARTITION, tell) the coordinator; the partitions that may not
        be written, with their errors (empty: all verified)."""
        parts = list(partitions)
        node = self.coordinator_node(transactional_id)
        if node is None:
            return dict.fromkeys(parts, int(Errors.COORDINATOR_NOT_AVAILABLE))
        request = verification_request(
            transactional_id, producer_id, producer_epoch, parts,
            verify_only=operation is not TransactionSupportedOperation.ADD_PARTITION)
        try:
            response = await self._send(node, request)
        except BrokerNotAvailableError as e:
            log.warning("AddPartitionsToTxn to broker %d failed: %s", node, e)
            return dict.fromkeys(parts, int(Errors.NETWORK_EXCEPTION))
        return translate_response(response, parts, operation)

    async def _send_over_channel(self, node: int, request: AddPartitionsToTxnRequest
                                 ) -> AddPartitionsToTxnResponse:
        response: AddPartitionsToTxnResponse = await self._channels.send(
            node, request, ADD_PARTITIONS_TO_TXN_VERSION)
        return response

    def close(self) -> None:
        self._channels.close()


def first_batch_header(records: bytes | bytearray | None) -> BatchHeader | None:
    """The header of a Produce partition's (first) batch; None if there is none or it
    is damaged (the append refuses it then)."""
    if not records:
        return None
    try:
        for _, header in iter_batches(records):
            return header
    except CorruptBatchError:
        return None
    return None


async def verify_transactions(manager: AddPartitionsToTxnManager,
                              get_partition: Callable[[TopicPartition], Partition | None],
                              transactional_id: str,
                              entries: Mapping[TopicPartition, bytes | None],
                              operation: TransactionSupportedOperation
                              ) -> tuple[dict[TopicPartition, VerificationGuard],
                                         dict[TopicPartition, PartitionResponse]]:
    """KIP-890 on the leader (``ReplicaManager.maybeStartTransactionVerificationFor-
    Partitions``): (guards of the partitions to append with, refused partitions).
    Partitions whose producer already has an open transaction there need nothing; the
    others take a guard from their log and are checked with the coordinator in one
    request."""
    producer: tuple[int, int] | None = None
    guards: dict[TopicPartition, VerificationGuard] = {}
    for tp, records in entries.items():
        header = first_batch_header(records)
        if header is None or not header.is_transactional or header.producer_id < 0:
            continue
        if producer is not None and producer[0] != header.producer_id:
            return {}, {t: PartitionResponse(
                error=Errors.INVALID_PRODUCER_ID_MAPPING,
                error_message="Transactional records contained more than one producer ID")
                for t in entries}
        producer = (header.producer_id, header.producer_epoch)
        partition = get_partition(tp)
        if partition is None or not partition.is_leader:
            continue  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC...
        guard = partition.log.maybe_start_transaction_verification(header.producer_id)
        if guard is not None:
            guards[tp] = guard
    if producer is None or not guards:
        return guards, {}
    errors = await manager.verify_transaction(
        transactional_id, producer[0], producer[1], list(guards), operation)
    refused = {tp: PartitionResponse(
        error=produce_error(error),
        error_message="Partition was not added to the transaction"
        if error == Errors.INVALID_TXN_STATE else None)
        for tp, error in errors.items()}
    return guards, refused
