"""Followers fetch from leaders: ``ReplicaFetcherThread`` and ``ReplicaFetcherManager``.

Java counterparts: ``AbstractFetcherThread`` / ``ReplicaFetcherThread`` and
``ReplicaFetcherManager``.  A follower keeps one fetcher per (leader broker, fetcher id)
— ``num.replica.fetchers`` of them per leader, a partition going to
``hash(topic, partition) % num.replica.fetchers`` — each an asyncio task on the broker's
loop whose loop body, ``run_once``, tests can step.

One round of a fetcher:

1. **Truncate** every partition that just started following a (new) leader, the
   KIP-101/KIP-279 way: ask the leader (OffsetForLeaderEpoch) where this replica's latest
   epoch ends in *its* log; if the leader knows that epoch, truncate to the smaller of its
   end and ours; if it answers with an older epoch (ours never existed there), truncate to
   where that older epoch ends here and ask again.  Never to the high watermark: that
   lost acknowledged records before KIP-101.
2. **Fetch** from each partition's log end offset (Fetch with this broker's id as
   ``replica_id``, so the leader reads to its log end and learns our position), append
   what comes back as follower (offsets already assigned), and follow the leader's high
   watermark as far as our log reaches.  Out of range: if the leader's log end is below
   ours, truncate to it; if our log end is below the leader's log start, start over at
   the leader's log start.  Partition errors (not leader, fenced epoch, unknown
   partition) pause that partition for ``replica.fetch.backoff.ms`` until the controller's
   next LeaderAndIsr moves it; a failed connection backs the whole fetcher off.

A ``KafkaStorageError`` from our own log (its dir went offline: a full or failing disk)
marks the partition failed (Kafka's ``markPartitionFailed``): it leaves the fetcher for
good, since nothing can be appended to it any more; the broker's reaction to the offline
dir is ``KafkaServer``'s business, not the fetcher's.

Metrics: the bytes a fetcher appends count as ``ReplicationBytesInPerSec``
(``BrokerTopicStats``); after each fetch a partition's lag is the leader's high watermark
minus our next fetch offset (never below 0, Kafka's ``FetcherLagMetrics``), and
``ReplicaFetcherManager.max_lag`` is the largest over every fetcher (the
``ReplicaFetcherManager`` ``MaxLag,clientId=Replica`` gauge).

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from millrace.broker.broker_channel import BrokerChannel
from millrace.broker.config import KafkaConfig
from millrace.broker.metrics.broker_topic_stats import BrokerTopicStats
from millrace.broker.partition import Partition
from millrace.broker.security.inter_broker import inter_broker_security
from millrace.broker.tasks import stop_task
from millrace.common.errors import (
    BrokerNotAvailableError,
    Errors,
    KafkaError,
    KafkaStorageError,
    error_name,
)
from millrace.common.time import Time
from millrace.protocol.types import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 4
MAX_TRUNCATION_ROUNDS = 32


@dataclass(slots=True)
class PartitionFetchState:
    fetch_offset: int
    leader_epoch: int
    truncating: bool = True
    delayed_until_ms: int = 0


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int


class ReplicaFetcherThread:
    def __init__(self, name: str, leader: BrokerEndpoint, broker_id: int,
                 get_partition: Callable[[str, int], Partition | None],
                 on_high_watermark: Callable[[TopicPartition], None],
                 config: KafkaConfig, time: Time,
                 stats: BrokerTopicStats | None = None) -> None:
        self.name = name
        self.leader = leader
        self.broker_id = broker_id
        self._get_partition = get_partition
        self._on_high_watermark = on_high_watermark
        self._config = config
        self._time = time
        self.channel = BrokerChannel(leader.node_id, leader.host, leader.port,
                                     client_id=f"broker-{broker_id}-fetcher-{name}",
                                     request_timeout_ms=config["replica.socket.timeout.ms"],
                                     security=inter_broker_security(config))
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.lags: dict[TopicPartition, int] = {}  # after the last fetch of each partition
        self._stats = stats
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._wakeup = asyncio.Event()

    def __repr__(self) -> str:
        return f"ReplicaFetcherThread({self.name}, leader={self.leader.node_id})"

    # ------------------------------------------------------------------ membership
    def add_partitions(self, states: dict[TopicPartition, PartitionFetchState]) -> None:
        self.partitions.update(states)
        self._wakeup.set()

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)
            self.lags.pop(tp, None)

    @property
    def max_lag(self) -> int:
        """The largest lag over the partitions this fetcher follows."""
        lags = self.lags
        return max((lags.get(tp, 0) for tp in self.partitions), default=0)

    # ------------------------------------------------------------------ task
    def start(self) -> None:
        if self._task is None:
            self._stopped = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def shutdown(self) -> None:
        self._stopped = True
        await stop_task(self._task)
        self._task = None
        self.channel.close()

    async def _run(self) -> None:
        while not self._stopped:
            try:
                progressed = await self.run_once()
            except asyncio.CancelledError:
                raise
            except BrokerNotAvailableError as e:
                log.info("%s: %s; backing off", self.name, e)
                progressed = False
                await asyncio.sleep(self._config["replica.fetch.backoff.ms"] / 1000)
            except Exception:
                log.exception("%s failed a round; backing off", self.name)
                progressed = False
                await asyncio.sleep(self._config["replica.fetch.backoff.ms"] / 1000)
            if not progressed:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(),
                                           self._config["replica.fetch.backoff.ms"] / 1000)

    async def run_once(self) -> bool:
        """One round: truncate what needs it, then fetch once.  False when there was
        nothing to do (every partition paused, or none)."""
        now = self._time.milliseconds()
        truncating = [tp for tp, s in self.partitions.items()
                      if s.truncating and s.delayed_until_ms <= now]
        if truncating:
            await self._truncate(truncating)
        ready = {tp: s for tp, s in self.partitions.items()
                 if not s.truncating and s.delayed_until_ms <= now}
        if not ready:
            return bool(truncating)
        await self._fetch(ready)
        return True

    # ------------------------------------------------------------------ truncation
    async def _truncate(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            state = self.partitions.get(tp)
            partition = self._get_partition(*tp)
            if state is None or partition is None:
                self.partitions.pop(tp, None)
                continue
            try:
                error = await self._truncate_one(tp, state, partition)
            except KafkaStorageError as e:
                self._mark_partition_failed(tp, e)
                continue
            if error:
                self._delay(state, tp, error)
            else:
                state.truncating = False
                state.fetch_offset = partition.log.log_end_offset

    async def _truncate_one(self, tp: TopicPartition, state: PartitionFetchState,
                            partition: Partition) -> int:
        lg = partition.log
        for _ in range(MAX_TRUNCATION_ROUNDS):
            epoch = lg.latest_epoch
            if epoch < 0:  # nothing of ours was written under any epoch: nothing to cut
                return Errors.NONE
            req = OffsetForLeaderEpochRequest(replica_id=self.broker_id, topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=tp[0], partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=tp[1], current_leader_epoch=state.leader_epoch,
                        leader_epoch=epoch)])])
            resp = await self.channel.send(req, OFFSET_FOR_LEADER_EPOCH_VERSION)
            p = resp.topics[0].partitions[0]
            if p.error_code:
                return int(p.error_code)
            if p.end_offset < 0:  # the leader has no epoch at or below ours: keep it all
                return Errors.NONE
            local_epoch, local_end = lg.end_offset_for_epoch(p.leader_epoch)
            target = min(p.end_offset, local_end, lg.log_end_offset)
            if target < lg.log_end_offset:
                log.info("truncating %s-%d from %d to %d (leader %d: epoch %d ends at %d)",
                         tp[0], tp[1], lg.log_end_offset, target, self.leader.node_id,
                         p.leader_epoch, p.end_offset)
                lg.truncate_to(target)
            if local_epoch == p.leader_epoch or local_epoch < 0:
                return Errors.NONE
            # Our log has no epoch p.leader_epoch: we cut to where our older epoch ends;
            # ask again with the epoch our log now ends in (KIP-279).
        return Errors.NONE

    # ------------------------------------------------------------------ fetch
    async def _fetch(self, ready: dict[TopicPartition, PartitionFetchState]) -> None:
        by_topic: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = {}
        max_bytes = self._config["replica.fetch.max.bytes"]
        for (topic, index), s in ready.items():
            by_topic.setdefault(topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=index, current_leader_epoch=s.leader_epoch,
                fetch_offset=s.fetch_offset, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=max_bytes))
        req = FetchRequest(
            replica_id=self.broker_id, max_wait_ms=self._config["replica.fetch.wait.max.ms"],
            min_bytes=self._config["replica.fetch.min.bytes"],
            max_bytes=self._config["replica.fetch.response.max.bytes"], isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        resp: FetchResponse = await self.channel.send(req, FETCH_VERSION)
        if resp.error_code:
            raise KafkaError(f"fetch from broker {self.leader.node_id} failed with "
                             f"{error_name(resp.error_code)}")
        now = self._time.milliseconds()
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                state = self.partitions.get(tp)
                if state is None or tp not in ready:
                    continue  # removed while the fetch was in flight
                await self._process(tp, state, p, now)

    async def _process(self, tp: TopicPartition, state: PartitionFetchState,
                       p: FetchResponse.FetchableTopicResponse.PartitionData, now: int) -> None:
        partition = self._get_partition(*tp)
        if partition is None or partition.is_leader:
            self.partitions.pop(tp, None)
            return
        if p.error_code == Errors.NONE:
            records = p.records
            try:
                if records:
                    partition.append_records_to_follower(records, p.high_watermark, now)
                    if self._stats is not None:
                        self._stats.replication_bytes_received(len(records))
                else:
                    partition.update_follower_high_watermark(p.high_watermark)
            except KafkaStorageError as e:
                self._mark_partition_failed(tp, e)
                return
            except KafkaError as e:  # e.g. a batch below our log end: start over
                log.warning("follower append to %s-%d failed: %s", tp[0], tp[1], e)
                state.truncating = True
                return
            state.fetch_offset = partition.log.log_end_offset
            self.lags[tp] = max(0, p.high_watermark - state.fetch_offset)
            self._on_high_watermark(tp)
        elif p.error_code == Errors.OFFSET_OUT_OF_RANGE:
            try:
                await self._handle_out_of_range(tp, state, partition)
            except KafkaStorageError as e:
                self._mark_partition_failed(tp, e)
        else:
            self._delay(state, tp, p.error_code)

    async def _handle_out_of_range(self, tp: TopicPartition, state: PartitionFetchState,
                                   partition: Partition) -> None:
        latest = await self._leader_offset(tp, state, -1)
        lg = partition.log
        if latest is not None and latest < lg.log_end_offset:
            log.info("truncating %s-%d to the leader's log end %d", tp[0], tp[1], latest)
            lg.truncate_to(latest)
        else:
            earliest = await self._leader_offset(tp, state, -2)
            if earliest is not None and lg.log_end_offset < earliest:
                log.info("%s-%d starts over at the leader's log start %d", tp[0], tp[1],
                         earliest)
                lg.truncate_fully_and_start_at(earliest)
        state.fetch_offset = lg.log_end_offset

    async def _leader_offset(self, tp: TopicPartition, state: PartitionFetchState,
                             timestamp: int) -> int | None:
        """The leader's log end (-1) or log start (-2), as a follower sees them."""
        req = ListOffsetsRequest(replica_id=self.broker_id, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=tp[0], partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=tp[1], current_leader_epoch=state.leader_epoch,
                    timestamp=timestamp)])])
        resp = await self.channel.send(req, LIST_OFFSETS_VERSION)
        p = resp.topics[0].partitions[0]
        return None if p.error_code else int(p.offset)

    def _mark_partition_failed(self, tp: TopicPartition, error: KafkaError) -> None:
        """Our log of ``tp`` cannot be written (its dir is offline): stop fetching it."""
        log.error("%s: stopped fetching %s-%d: %s", self.name, tp[0], tp[1], error)
        self.partitions.pop(tp, None)

    def _delay(self, state: PartitionFetchState, tp: TopicPartition, error: int) -> None:
        log.info("pausing %s-%d on %s: %s", tp[0], tp[1], self.name, error_name(error))
        state.delayed_until_ms = (self._time.milliseconds()
                                  + self._config["replica.fetch.backoff.ms"])


class ReplicaFetcherManager:
    """The follower's fetchers: one per (leader broker, fetcher id)."""

    def __init__(self, broker_id: int, get_partition: Callable[[str, int], Partition | None],
                 on_high_watermark: Callable[[TopicPartition], None], config: KafkaConfig,
                 time: Time, stats: BrokerTopicStats | None = None) -> None:
        self._broker_id = broker_id
        self._stats = stats
        self._get_partition = get_partition
        self._on_high_watermark = on_high_watermark
        self._config = config
        self._time = time
        self.fetchers: dict[tuple[int, int], ReplicaFetcherThread] = {}

    def fetcher_id(self, tp: TopicPartition) -> int:
        key = f"{tp[0]}-{tp[1]}".encode()
        return zlib.crc32(key) % self._config["num.replica.fetchers"]

    def add_fetcher_for_partitions(self, leaders: dict[TopicPartition, tuple[BrokerEndpoint,
                                                                             PartitionFetchState]]
                                   ) -> None:
        self.remove_fetcher_for_partitions(list(leaders))
        for tp, (leader, state) in leaders.items():
            key = (leader.node_id, self.fetcher_id(tp))
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.leader != leader:
                fetcher.channel.update_endpoint(leader.host, leader.port)
                fetcher.leader = leader
            if fetcher is None:
                fetcher = ReplicaFetcherThread(
                    f"ReplicaFetcherThread-{key[1]}-{leader.node_id}", leader, self._broker_id,
                    self._get_partition, self._on_high_watermark, self._config, self._time,
                    self._stats)
                self.fetchers[key] = fetcher
                fetcher.start()
            fetcher.add_partitions({tp: state})

    def remove_fetcher_for_partitions(self, tps: list[TopicPartition]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(tps)

    def max_lag(self) -> int:
        """The largest follower lag over every fetcher (Kafka's ``MaxLag``)."""
        return max((f.max_lag for f in self.fetchers.values()), default=0)

    def partition_lags(self) -> list[tuple[str, TopicPartition, int]]:
        """(fetcher name, partition, lag) of every partition fetched."""
        return [(f.name, tp, f.lags.get(tp, 0)) for f in self.fetchers.values()
                for tp in f.partitions]

    async def shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                await fetcher.shutdown()

    async def shutdown(self) -> None:
        for fetcher in list(self.fetchers.values()):
            await fetcher.shutdown()
        self.fetchers.clear()
