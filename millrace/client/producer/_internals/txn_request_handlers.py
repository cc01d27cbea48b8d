"""The transactional producer's requests, one handler class per API (Java
``TransactionManager``'s inner ``TxnRequestHandler`` classes).

A handler builds its request body, names the coordinator it must go to (the
transaction coordinator of ``transactional.id``, the group coordinator of a group, or
none: any broker) and interprets the answer, Kafka's error rules included:

* NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: look the coordinator up again, retry;
* other retriable codes (COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, ...):
  retry after ``retry.backoff.ms`` (AddPartitionsToTxn: 20 ms while the transaction is
  still empty, as Java does, so a quick commit-then-send does not wait long);
* PRODUCER_FENCED and, from the coordinator, INVALID_PRODUCER_EPOCH: fatal
  ``ProducerFencedError``; TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE:
  fatal;
* UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING: abortable with an epoch bump
  (fatal if the coordinator cannot bump epochs); TRANSACTION_ABORTABLE, topic or group
  authorization, a group metadata mismatch: abortable;
* anything else: fatal.

The manager owns the queue (``TransactionManager.next_request``) and calls
``handle_response`` under its lock on the sender thread.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer.assignors.abstract import ConsumerGroupMetadata
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.errors import CommitFailedError
from millrace.client.producer._internals.txn_state import State, TransactionalRequestResult
from millrace.common.errors import (
    Errors,
    GroupAuthorizationFailedError,
    KafkaError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    for_code,
)
from millrace.protocol import API, ApiKey

if TYPE_CHECKING:
    from millrace.client.producer._internals.transaction_manager import TransactionManager

ADD_PARTITIONS_RETRY_BACKOFF_MS = 20
INT32_MAX = 0x7FFFFFFF


class CoordinatorType(enum.IntEnum):
    GROUP = 0
    TRANSACTION = 1


class Priority(enum.IntEnum):
    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


_COORDINATOR_MOVED = (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE)
_FENCED = (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED)
_ID_MAPPING = (Errors.UNKNOWN_PRODUCER_ID, Errors.INVALID_PRODUCER_ID_MAPPING)


def _fenced() -> KafkaError:
    return ProducerFencedError("There is a newer producer with the same transactionalId "
                               "which fences the current one.")


class TxnRequestHandler:
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS
    min_version: int | None = None
    max_version: int | None = None
    is_end_txn = False

    def __init__(self, tm: TransactionManager, operation: str,
                 result: TransactionalRequestResult | None = None) -> None:
        self.tm = tm
        self.result = result or TransactionalRequestResult(operation)
        self.operation = operation
        self.is_retry = False
        self.not_before_ms = 0

    # what and where
    @property
    def coordinator_type(self) -> CoordinatorType | None:
        return CoordinatorType.TRANSACTION

    @property
    def coordinator_key(self) -> str:
        assert self.tm.transactional_id is not None
        return self.tm.transactional_id

    def retry_backoff_ms(self) -> int:
        return self.tm.retry_backoff_ms

    def request_body(self) -> Any:
        raise NotImplementedError

    def handle_response(self, body: Any, version: int) -> None:
        raise NotImplementedError

    # outcomes
    def fatal_error(self, error: Exception) -> None:
        self.result.fail(error)
        self.tm.transition_to_fatal_error(error)

    def abortable_error(self, error: Exception) -> None:
        self.result.fail(error)
        self.tm.transition_to_abortable_error(error)

    def abortable_error_if_possible(self, error: Exception) -> None:
        if self.tm.can_bump_epoch():
            self.tm.require_epoch_bump()
            self.abortable_error(error)
        else:
            self.fatal_error(error)

    def fail(self, error: Exception) -> None:
        self.result.fail(error)

    def reenqueue(self) -> None:
        self.tm.retry(self)

    def lookup_coordinator(self) -> None:
        coordinator_type = self.coordinator_type
        if coordinator_type is not None:
            self.tm.lookup_coordinator(coordinator_type, self.coordinator_key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.operation})"


class FindCoordinatorHandler(TxnRequestHandler):
    priority = Priority.FIND_COORDINATOR

    def __init__(self, tm: TransactionManager, key_type: CoordinatorType, key: str) -> None:
        super().__init__(tm, "FindCoordinator")
        self.key_type = key_type
        self.key = key

    @property
    def coordinator_type(self) -> CoordinatorType | None:
        return None

    def request_body(self) -> Any:
        return API[ApiKey.FIND_COORDINATOR].request.cls(
            key=self.key, key_type=int(self.key_type), coordinator_keys=[self.key])

    def handle_response(self, body: Any, version: int) -> None:
        if version >= 4:
            if len(body.coordinators) != 1:
                self.fatal_error(KafkaError("Coordinator lookup failed: the response does "
                                            "not hold exactly one coordinator"))
                return
            entry = body.coordinators[0]
            code, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
            message = entry.error_message
        else:
            code, node_id, host, port = body.error_code, body.node_id, body.host, body.port
            message = getattr(body, "error_message", None)
        cls = for_code(code)
        if code == Errors.NONE:
            # a connection of its own, apart from the produce traffic to the same broker
            self.tm.set_coordinator(self.key_type, Node(INT32_MAX - node_id, host, port))
            self.result.done()
        elif cls.retriable:
            self.reenqueue()
        elif code == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            self.fatal_error(cls(f"Transactional Id authorization failed: {self.key}"))
        elif code == Errors.GROUP_AUTHORIZATION_FAILED:
            self.abortable_error(GroupAuthorizationFailedError(
                f"Not authorized to access group: {self.key}"))
        elif code == Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(cls())
        else:
            self.fatal_error(KafkaError(
                f"Could not find a coordinator with type {self.key_type.name} with key "
                f"{self.key} due to unexpected error: {message or cls.name}"))


class InitProducerIdHandler(TxnRequestHandler):
    max_version = 5

    def __init__(self, tm: TransactionManager, producer_id: int, producer_epoch: int,
                 result: TransactionalRequestResult | None = None) -> None:
        super().__init__(tm, "InitProducerId", result)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.is_epoch_bump = producer_id >= 0
        self.priority = Priority.EPOCH_BUMP if self.is_epoch_bump else Priority.INIT_PRODUCER_ID

    def request_body(self) -> Any:
        return API[ApiKey.INIT_PRODUCER_ID].request.cls(
            transactional_id=self.tm.transactional_id,
            transaction_timeout_ms=self.tm.transaction_timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch)

    def handle_response(self, body: Any, version: int) -> None:
        code = body.error_code
        cls = for_code(code)
        if code == Errors.NONE:
            self.tm.coordinator_supports_bumping_epoch = version >= 3
            self.tm.complete_init_producer_id(body.producer_id, body.producer_epoch,
                                              self.is_epoch_bump)
            self.result.done()
        elif code in _COORDINATOR_MOVED:
            self.lookup_coordinator()
            self.reenqueue()
        elif cls.retriable:  # COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
            self.reenqueue()
        elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                      Errors.CLUSTER_AUTHORIZATION_FAILED):
            self.fatal_error(cls())
        elif code in _FENCED:
            self.fatal_error(_fenced())
        elif code == Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(cls())
        else:
            self.fatal_error(KafkaError(f"Unexpected error in InitProducerIdResponse; "
                                        f"{cls.name}"))


class AddPartitionsToTxnHandler(TxnRequestHandler):
    max_version = 3  # v4+ is the brokers' batched form (KIP-890)

    def __init__(self, tm: TransactionManager, partitions: list[TopicPartition]) -> None:
        super().__init__(tm, "AddPartitionsToTxn")
        self.partitions = partitions
        self._backoff_ms = tm.retry_backoff_ms

    def retry_backoff_ms(self) -> int:
        return min(self.tm.retry_backoff_ms, self._backoff_ms)

    def request_body(self) -> Any:
        cls = API[ApiKey.ADD_PARTITIONS_TO_TXN].request.cls
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return cls(v3_and_below_transactional_id=self.tm.transactional_id,
                   v3_and_below_producer_id=self.tm.producer_id,
                   v3_and_below_producer_epoch=self.tm.producer_epoch,
                   v3_and_below_topics=[cls.AddPartitionsToTxnTopic(name=t, partitions=sorted(p))
                                        for t, p in by_topic.items()])

    def handle_response(self, body: Any, version: int) -> None:
        errors: dict[TopicPartition, int] = {}
        for topic in body.results_by_topic_v3_and_below:
            for p in topic.results_by_partition:
                errors[TopicPartition(topic.name, p.partition_index)] = p.partition_error_code
        self._backoff_ms = self.tm.retry_backoff_ms
        has_partition_errors = False
        unauthorized: set[str] = set()
        for tp, code in errors.items():
            cls = for_code(code)
            if code == Errors.NONE:
                continue
            if code in _COORDINATOR_MOVED:
                self.lookup_coordinator()
                self.reenqueue()
                return
            if code == Errors.CONCURRENT_TRANSACTIONS:
                if not self.tm.partitions_in_transaction():
                    self._backoff_ms = ADD_PARTITIONS_RETRY_BACKOFF_MS
                self.reenqueue()
                return
            if cls.retriable:
                self.reenqueue()
                return
            if code in _FENCED:
                self.fatal_error(_fenced())
                return
            if code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE):
                self.fatal_error(cls())
                return
            if code == Errors.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(tp.topic)
            elif code in _ID_MAPPING:
                self.abortable_error_if_possible(cls())
                return
            elif code == Errors.TRANSACTION_ABORTABLE:
                self.abortable_error(cls())
                return
            else:  # OPERATION_NOT_ATTEMPTED and anything unexpected
                has_partition_errors = True
        self.tm.partitions_added(list(errors), ok=not (unauthorized or has_partition_errors))
        if unauthorized:
            self.abortable_error(TopicAuthorizationFailedError(
                f"Not authorized to access topics: {sorted(unauthorized)}"))
        elif has_partition_errors:
            named = {str(tp): for_code(c).name for tp, c in errors.items()}
            self.abortable_error(KafkaError(
                f"Could not add partitions to transaction due to errors: {named}"))
        else:
            self.result.done()


class AddOffsetsToTxnHandler(TxnRequestHandler):
    max_version = 3

    def __init__(self, tm: TransactionManager, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                 group_metadata: ConsumerGroupMetadata) -> None:
        super().__init__(tm, "AddOffsetsToTxn")
        self.offsets = dict(offsets)
        self.group_metadata = group_metadata

    def request_body(self) -> Any:
        return API[ApiKey.ADD_OFFSETS_TO_TXN].request.cls(
            transactional_id=self.tm.transactional_id, producer_id=self.tm.producer_id,
            producer_epoch=self.tm.producer_epoch, group_id=self.group_metadata.group_id)

    def handle_response(self, body: Any, version: int) -> None:
        code = body.error_code
        cls = for_code(code)
        if code == Errors.NONE:
            self.tm.offsets_added(TxnOffsetCommitHandler(self.tm, self.result, self.offsets,
                                                         self.group_metadata))
        elif code in _COORDINATOR_MOVED:
            self.lookup_coordinator()
            self.reenqueue()
        elif cls.retriable:
            self.reenqueue()
        elif code in _ID_MAPPING:
            self.abortable_error_if_possible(cls())
        elif code in _FENCED:
            self.fatal_error(_fenced())
        elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE):
            self.fatal_error(cls())
        elif code == Errors.GROUP_AUTHORIZATION_FAILED:
            self.abortable_error(GroupAuthorizationFailedError(
                f"Not authorized to access group: {self.group_metadata.group_id}"))
        elif code == Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(cls())
        else:
            self.fatal_error(KafkaError(f"Unexpected error in AddOffsetsToTxnResponse: "
                                        f"{cls.name}"))


class TxnOffsetCommitHandler(TxnRequestHandler):
    """Sent to the *group* coordinator; shares the AddOffsetsToTxn call's result.  With
    transaction.version 2 it is sent alone, at v5, which adds the group to the
    transaction."""

    def __init__(self, tm: TransactionManager, result: TransactionalRequestResult,
                 offsets: Mapping[TopicPartition, OffsetAndMetadata],
                 group_metadata: ConsumerGroupMetadata) -> None:
        super().__init__(tm, "TxnOffsetCommit", result)
        v2 = tm.is_transaction_v2_enabled
        self.min_version = 5 if v2 else None
        self.max_version = 5 if v2 else 4
        self.pending = dict(offsets)
        self.group_metadata = group_metadata

    @property
    def coordinator_type(self) -> CoordinatorType | None:
        return CoordinatorType.GROUP

    @property
    def coordinator_key(self) -> str:
        return self.group_metadata.group_id

    def request_body(self) -> Any:
        cls = API[ApiKey.TXN_OFFSET_COMMIT].request.cls
        topic_cls = cls.TxnOffsetCommitRequestTopic
        part_cls = topic_cls.TxnOffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for tp, om in self.pending.items():
            by_topic.setdefault(tp.topic, []).append(part_cls(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata))
        gm = self.group_metadata
        return cls(transactional_id=self.tm.transactional_id, group_id=gm.group_id,
                   producer_id=self.tm.producer_id, producer_epoch=self.tm.producer_epoch,
                   generation_id=gm.generation_id, member_id=gm.member_id,
                   group_instance_id=gm.group_instance_id,
                   topics=[topic_cls(name=t, partitions=p) for t, p in by_topic.items()])

    def handle_response(self, body: Any, version: int) -> None:
        group = self.group_metadata.group_id
        reloaded = False
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                code = p.error_code
                cls = for_code(code)
                if code == Errors.NONE:
                    self.pending.pop(tp, None)
                elif code in (*_COORDINATOR_MOVED, Errors.REQUEST_TIMED_OUT):
                    if not reloaded:
                        reloaded = True
                        self.lookup_coordinator()
                elif cls.retriable:
                    continue
                elif code == Errors.GROUP_AUTHORIZATION_FAILED:
                    self.abortable_error(GroupAuthorizationFailedError(
                        f"Not authorized to access group: {group}"))
                    break
                elif code in (Errors.FENCED_INSTANCE_ID, Errors.TRANSACTION_ABORTABLE):
                    self.abortable_error(cls())
                    break
                elif code in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
                    self.abortable_error(CommitFailedError(
                        "Transaction offset Commit failed due to consumer group metadata "
                        f"mismatch: {cls.name}"))
                    break
                elif code in _FENCED:
                    self.fatal_error(_fenced())
                    break
                elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT):
                    self.fatal_error(cls())
                    break
                else:
                    self.fatal_error(KafkaError(f"Unexpected error in TxnOffsetCommitResponse: "
                                                f"{cls.name}"))
                    break
            else:
                continue
            break
        if self.result.is_completed:
            self.pending.clear()
        elif not self.pending:
            self.result.done()
        else:
            self.reenqueue()


class EndTxnHandler(TxnRequestHandler):
    """Built once with the epoch of the transaction it ends, so that every retry carries
    that epoch (with transaction.version 2 the coordinator knows a retry by it).
    ``outcome_unknown``: an attempt got no answer and may still arrive."""

    priority = Priority.END_TXN
    is_end_txn = True

    def __init__(self, tm: TransactionManager, committed: bool) -> None:
        super().__init__(tm, f"EndTxn({str(committed).lower()})")
        self.committed = committed
        self.producer_id = tm.producer_id
        self.producer_epoch = tm.producer_epoch
        v2 = tm.is_transaction_v2_enabled
        self.min_version = 5 if v2 else None  # v5 answers the next id and epoch
        self.max_version = 5 if v2 else 4
        self.outcome_unknown = False

    def request_body(self) -> Any:
        return API[ApiKey.END_TXN].request.cls(
            transactional_id=self.tm.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, committed=self.committed)

    def handle_response(self, body: Any, version: int) -> None:
        code = body.error_code
        cls = for_code(code)
        if code == Errors.NONE:
            if version >= 5:
                self.tm.complete_transaction_with_new_epoch(body.producer_id,
                                                            body.producer_epoch)
            elif self.outcome_unknown and self.tm.can_bump_epoch():
                self.tm.complete_transaction_with_epoch_bump(self.result)
                return  # the result completes with the epoch bump
            else:
                self.tm.complete_transaction()
            self.result.done()
        elif code in _COORDINATOR_MOVED:
            self.lookup_coordinator()
            self.reenqueue()
        elif cls.retriable:
            self.reenqueue()
        elif code in _FENCED:
            self.fatal_error(_fenced())
        elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE):
            self.fatal_error(cls())
        elif code in _ID_MAPPING:
            self.abortable_error_if_possible(cls())
        elif code == Errors.TRANSACTION_ABORTABLE:
            self.abortable_error(cls())
        else:
            self.fatal_error(KafkaError(f"Unhandled error in EndTxnResponse: {cls.name}"))


__all__ = [
    "AddOffsetsToTxnHandler", "AddPartitionsToTxnHandler", "CoordinatorType", "EndTxnHandler",
    "FindCoordinatorHandler", "InitProducerIdHandler", "Priority", "State",
    "TxnOffsetCommitHandler", "TxnRequestHandler",
]
