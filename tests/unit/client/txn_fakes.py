"""A transaction coordinator (and group coordinator) for ``FakeCluster``: enough of
Kafka's classic transaction protocol to drive the producer's TransactionManager with
real request and response bytes.

``TxnFakeCluster`` answers FindCoordinator (both key types), InitProducerId with a
transactional id (a new epoch per call: earlier producers are fenced), AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn; it checks the producer epoch on each and
records what a transaction contained.  ``fail[api]`` queues error codes answered
instead, one per request of that API (for AddPartitionsToTxn and TxnOffsetCommit on
every partition).

``transaction_version=2`` makes it a KIP-890 part 2 coordinator: ApiVersions v3+
finalizes ``transaction.version`` 2, Produce v12 and TxnOffsetCommit v5 add partitions
and groups themselves, EndTxn v5 bumps the epoch (a new producer id once it is
exhausted), answers the next id and epoch, and knows its own retry by the previous
epoch.  A retried EndTxn of a transaction already ended the same way answers NONE at
either version, as Kafka's does.  ``swallow_end_txn`` keeps that many EndTxn requests
without answering (``delayed_end_txns``), ``lose_end_txn_responses`` answers and loses
that many; ``deliver_delayed_end_txns`` lets them reach
the coordinator later -- the Bufstream case -- and returns what it answered.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.protocol import API, ApiKey
from millrace.record import RecordBatch
from tests.unit.client.fakes import _LOST, FakeCluster

PRODUCER_FENCED = 90
INVALID_TXN_STATE = 48
MAX_EPOCH = 32767


@dataclass
class TxnState:
    producer_id: int
    epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    ended: list[bool] = field(default_factory=list)  # committed? per EndTxn
    previous: tuple[int, int] | None = None  # (id, epoch) the last EndTxn v5 ended

    @property
    def is_open(self) -> bool:
        return bool(self.partitions or self.groups)


class TxnFakeCluster(FakeCluster):
    def __init__(self, *args: Any, coordinator: int = 0, transaction_version: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.coordinator = coordinator
        self.transaction_version = transaction_version
        self.swallow_end_txn = 0
        self.lose_end_txn_responses = 0  # answered by the coordinator, then lost
        self.delayed_end_txns: list[tuple[int, Any]] = []  # (version, body)
        self.txns: dict[str, TxnState] = {}
        self.fail: dict[str, deque[int]] = defaultdict(deque)
        self.offsets: dict[tuple[str, TopicPartition], tuple[int, int, str]] = {}
        self.pending_offsets: dict[tuple[str, TopicPartition], tuple[int, int, str]] = {}

    def _error(self, api: str) -> int:
        return self.fail[api].popleft() if self.fail[api] else 0

    def _epoch_error(self, txn_id: str, producer_id: int, epoch: int) -> int:
        state = self.txns.get(txn_id)
        if state is None or state.producer_id != producer_id or state.epoch != epoch:
            return PRODUCER_FENCED
        return 0

    def _handle_ApiVersions(self, node_id: int, version: int, body: Any) -> Any:
        response = super()._handle_ApiVersions(node_id, version, body)
        if version >= 3 and self.transaction_version >= 2:
            cls = API[ApiKey.API_VERSIONS].response.cls
            response.finalized_features_epoch = 7
            response.finalized_features = [cls.FinalizedFeatureKey(
                name="transaction.version", max_version_level=2, min_version_level=2)]
        return response

    def _handle_Produce(self, node_id: int, version: int, body: Any) -> Any:
        if version >= 12 and self.transaction_version >= 2 and body.transactional_id:
            for topic in body.topic_data:  # the implicit AddPartitionsToTxn
                for pd in topic.partition_data:
                    h = RecordBatch(pd.records).header
                    if not self._epoch_error(body.transactional_id, h.producer_id,
                                             h.producer_epoch):
                        self.txns[body.transactional_id].partitions.add(
                            TopicPartition(topic.name, pd.index))
        return super()._handle_Produce(node_id, version, body)

    def _handle_FindCoordinator(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.FIND_COORDINATOR].response.cls
        host, port = self.nodes[self.coordinator]
        error = self._error("FindCoordinator")
        if version >= 4:
            return cls(coordinators=[cls.Coordinator(
                key=k, node_id=self.coordinator, host=host, port=port, error_code=error)
                for k in body.coordinator_keys])
        return cls(error_code=error, node_id=self.coordinator, host=host, port=port)

    def _handle_InitProducerId(self, node_id: int, version: int, body: Any) -> Any:
        if body.transactional_id is None:
            return super()._handle_InitProducerId(node_id, version, body)
        cls = API[ApiKey.INIT_PRODUCER_ID].response.cls
        error = self._error("InitProducerId")
        if error:
            return cls(error_code=error, producer_id=-1, producer_epoch=-1)
        state = self.txns.get(body.transactional_id)
        if state is None:
            state = self.txns[body.transactional_id] = TxnState(self.next_producer_id, 0)
            self.next_producer_id += 1
        else:
            if body.producer_id >= 0 and (body.producer_id, body.producer_epoch) != (
                    state.producer_id, state.epoch):
                return cls(error_code=PRODUCER_FENCED, producer_id=-1, producer_epoch=-1)
            if state.partitions or state.groups:  # an open transaction: abort it
                state.ended.append(False)
            state.partitions, state.groups = set(), set()
            state.epoch += 1
        return cls(error_code=0, producer_id=state.producer_id, producer_epoch=state.epoch)

    def _handle_AddPartitionsToTxn(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.ADD_PARTITIONS_TO_TXN].response.cls
        txn_id = body.v3_and_below_transactional_id
        error = self._error("AddPartitionsToTxn") or self._epoch_error(
            txn_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch)
        results = []
        for topic in body.v3_and_below_topics:
            results.append(cls.AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=[
                cls.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=error) for p in topic.partitions]))
            if not error:
                self.txns[txn_id].partitions.update(TopicPartition(topic.name, p)
                                                    for p in topic.partitions)
        return cls(results_by_topic_v3_and_below=results)

    def _handle_AddOffsetsToTxn(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.ADD_OFFSETS_TO_TXN].response.cls
        error = self._error("AddOffsetsToTxn") or self._epoch_error(
            body.transactional_id, body.producer_id, body.producer_epoch)
        if not error:
            self.txns[body.transactional_id].groups.add(body.group_id)
        return cls(error_code=error)

    def _handle_TxnOffsetCommit(self, node_id: int, version: int, body: Any) -> Any:
        cls = API[ApiKey.TXN_OFFSET_COMMIT].response.cls
        error = self._error("TxnOffsetCommit")
        if version >= 5 and self.transaction_version >= 2 and not error:
            error = self._epoch_error(body.transactional_id, body.producer_id,
                                      body.producer_epoch)
            if not error:
                self.txns[body.transactional_id].groups.add(body.group_id)
        topics = []
        for topic in body.topics:
            parts = []
            for p in topic.partitions:
                if not error:
                    self.pending_offsets[(body.group_id, TopicPartition(topic.name,
                                                                        p.partition_index))] = (
                        p.committed_offset, body.generation_id, body.member_id)
                parts.append(cls.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=error))
            topics.append(cls.TxnOffsetCommitResponseTopic(name=topic.name, partitions=parts))
        return cls(topics=topics)

    def _handle_EndTxn(self, node_id: int, version: int, body: Any) -> Any:
        if self.swallow_end_txn:
            self.swallow_end_txn -= 1
            self.delayed_end_txns.append((version, body))
            return _LOST
        response = self._end_txn(version, body)
        if self.lose_end_txn_responses:
            self.lose_end_txn_responses -= 1
            return _LOST
        return response

    def deliver_delayed_end_txns(self) -> list[Any]:
        delayed, self.delayed_end_txns = self.delayed_end_txns, []
        return [self._end_txn(version, body) for version, body in delayed]

    def _end_txn(self, version: int, body: Any) -> Any:
        cls = API[ApiKey.END_TXN].response.cls
        state = self.txns.get(body.transactional_id)
        error = self._error("EndTxn")
        if error or state is None:
            return cls(error_code=error or PRODUCER_FENCED)
        request = (body.producer_id, body.producer_epoch)
        v2 = version >= 5 and self.transaction_version >= 2
        retry = not state.is_open and bool(state.ended) and state.ended[-1] == body.committed
        if v2 and retry and request == state.previous:
            return cls(error_code=0, producer_id=state.producer_id,
                       producer_epoch=state.epoch)
        error = self._epoch_error(body.transactional_id, *request)
        if error:
            return cls(error_code=error)
        if not v2 and retry:
            return cls(error_code=0)
        state.ended.append(body.committed)
        state.partitions, state.groups = set(), set()
        if body.committed:
            self.offsets.update(self.pending_offsets)
        self.pending_offsets.clear()
        if not v2:
            return cls(error_code=0)
        state.previous = request
        if state.epoch >= MAX_EPOCH - 1:  # exhausted: a new producer id
            state.producer_id, state.epoch = self.next_producer_id, 0
            self.next_producer_id += 1
        else:
            state.epoch += 1
        return cls(error_code=0, producer_id=state.producer_id, producer_epoch=state.epoch)

    # ------------------------------------------------------------------ inspection
    def api_calls(self) -> list[str]:
        return [api for _, api, _, _ in self.requests if api not in ("ApiVersions", "Metadata")]

    def produced_headers(self) -> list[Any]:
        return [RecordBatch(pd.records).header for _, _, body in self.produce_requests()
                for t in body.topic_data for pd in t.partition_data]
