"""A transaction coordinator (and group coordinator) for ``FakeCluster``: enough of
Kafka's classic transaction protocol to drive the producer's TransactionManager with
real request and response bytes.

``TxnFakeCluster`` answers FindCoordinator (both key types), InitProducerId with a
transactional id (a new epoch per call: earlier producers are fenced), AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn; it checks the producer epoch on each and
records what a transaction contained.  ``fail[api]`` queues error codes answered
instead, one per request of that API (for AddPartitionsToTxn and TxnOffsetCommit on
every partition).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.protocol import API, ApiKey
from millrace.record import RecordBatch
from tests.unit.client.fakes import FakeCluster

PRODUCER_FENCED = 90


@dataclass
class TxnState:
    producer_id: int
    epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    ended: list[bool] = field(default_factory=list)  # committed? per EndTxn


class TxnFakeCluster(FakeCluster):
    def __init__(self, *args: Any, coordinator: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.coordinator = coordinator
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
        cls = API[ApiKey.END_TXN].response.cls
        error = self._error("EndTxn") or self._epoch_error(
            body.transactional_id, body.producer_id, body.producer_epoch)
        if not error:
            state = self.txns[body.transactional_id]
            state.ended.append(body.committed)
            state.partitions, state.groups = set(), set()
            if body.committed:
                self.offsets.update(self.pending_offsets)
            self.pending_offsets.clear()
        return cls(error_code=error)

    # ------------------------------------------------------------------ inspection
    def api_calls(self) -> list[str]:
        return [api for _, api, _, _ in self.requests if api not in ("ApiVersions", "Metadata")]

    def produced_headers(self) -> list[Any]:
        return [RecordBatch(pd.records).header for _, _, body in self.produce_requests()
                for t in body.topic_data for pd in t.partition_data]
