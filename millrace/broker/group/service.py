"""``GroupCoordinatorService``: the asyncio adapter around the pure ``GroupCoordinator``.

Java counterpart: ``GroupCoordinatorService`` + the coordinator runtime (which runs shard
operations, writes their records and completes the futures of delayed responses).

For each request the service takes one coordinator step at ``time.milliseconds()``,
appends the step's records to ``__consumer_offsets`` (one batch per partition, through the
injected ``OffsetsLog``) *before* any answer is released, replays them into the
coordinator, and then resolves the futures of every parked request the step (or the
replay) completed.  A timer task calls ``run_once`` every ``tick_interval_ms`` to fire
session, rebalance and sync deadlines and to expire offsets; the timer and the writes
that outlive a cancelled request are ``CoordinatorRuntime``'s.

TxnOffsetCommit differs in one way: its records are replayed (as *pending* offsets of the
producer) as soon as they are appended, before the ISR has them -- OffsetFetch does not
show pending offsets, ``require_stable`` must see them at once, and the transaction's
marker may only follow the answer anyway.  If the ISR never gets them the pending
offsets are dropped and the error is the answer.  ``on_txn_marker`` is the replica
manager's marker listener: a COMMIT/ABORT written and replicated on a hosted
``__consumer_offsets`` partition completes the producer's pending offsets there.

``offset_commit_listeners`` (the consumer-lag monitor's) hear of each OffsetCommit and
TxnOffsetCommit request once it is applied (durable and answered without error), once
per request: (group id, {(topic, partition): offset} of the partitions it accepted,
now_ms, transactional).  A request whose handler is cancelled on the way (its client
disconnected) is not heard of.

Threading: everything runs on the broker's event-loop thread; appends are synchronous
file writes, so a step and its persistence are atomic with respect to other requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from millrace.broker.config import KafkaConfig
from millrace.broker.coordinator_runtime import CoordinatorRuntime
from millrace.broker.group.coordinator import GroupCoordinator
from millrace.broker.group.group_metadata_manager import (
    CoordinatorResult,
    GroupConfig,
    OffsetsRecord,
)
from millrace.broker.group.records import LoggedBatch
from millrace.common.errors import Errors, KafkaError
from millrace.common.time import Time

if TYPE_CHECKING:
    from millrace.broker.record_tracer import RecordTracer

log = logging.getLogger("millrace.broker.group")


OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsLog(Protocol):
    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> int: ...  # appends one batch (transactional of producer (id, epoch) if given) to __consumer_offsets-<partition>; returns its end offset
    async def wait_replicated(self, partition: int, end_offset: int) -> int: ...  # until the ISR has it: Kafka error code (0 = NONE)
    def replay_batches(self, partition: int) -> Iterator[LoggedBatch]: ...   # every batch and marker of that partition, in offset order
    def num_partitions(self) -> int: ...


_Batch = list[tuple[bytes, bytes | None]]
# (group id, {(topic, partition): committed offset}, now_ms, transactional)
OffsetCommitListener = Callable[[str, Mapping[tuple[str, int], int], int, bool], None]

# Storage errors as the group APIs report them (Kafka's mapping for failed group writes).
_STORAGE_ERRORS: dict[int, Errors] = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
}


# A transactional append refused for the producer's own sake reaches the client as is.
_TXN_ERRORS = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED,
                         Errors.INVALID_TXN_STATE, Errors.INVALID_PRODUCER_ID_MAPPING})


def storage_error(exc: BaseException) -> int:
    if isinstance(exc, KafkaError):
        return _STORAGE_ERRORS.get(exc.code, Errors.COORDINATOR_NOT_AVAILABLE)
    return Errors.COORDINATOR_NOT_AVAILABLE


def txn_storage_error(exc: BaseException) -> int:
    if isinstance(exc, KafkaError) and exc.code in _TXN_ERRORS:
        return int(exc.code)
    return storage_error(exc)


class GroupCoordinatorService:
    """Owned by the event-loop thread; handlers call the ``async`` request methods."""

    def __init__(self, config: KafkaConfig, time: Time, log: OffsetsLog, *,
                 tick_interval_ms: int = 100, tracer: RecordTracer | None = None) -> None:
        self._time = time
        self.tracer = tracer  # told of commits while traced records are active here
        self._log = log
        self._runtime = CoordinatorRuntime(tick_interval_ms)
        self.coordinator = GroupCoordinator(GroupConfig.from_kafka_config(config),
                                            log.num_partitions())
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        # key -> end offset of the write last applied to the cache (durable-order guard)
        self._replayed_end: dict[bytes, int] = {}
        self.offset_commit_listeners: list[OffsetCommitListener] = []

    # ------------------------------------------------------------------ lifecycle
    async def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load ``partitions`` of ``__consumer_offsets`` (default: every one, the single
        node leads them all), then start the timer task.  In a cluster the broker loads
        only the partitions it leads, as leadership arrives (``on_leadership_change``)."""
        coord = self.coordinator
        await self.load_partitions(range(coord.num_partitions) if partitions is None
                                   else partitions)
        self._runtime.start(self.run_once)

    async def load_partitions(self, partitions: Iterable[int]) -> None:
        """Become coordinator for ``partitions``: replay each from its log.  Requests for
        them answer COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        coord = self.coordinator
        partitions = [p for p in partitions if p not in coord.hosted]
        if not partitions:
            return
        coord.begin_loading(partitions)
        self._replayed_end.clear()
        total = 0
        for partition in partitions:
            if partition not in coord.loading:  # unloaded again while we were loading
                continue
            total += coord.load_batches(partition, self._log.replay_batches(partition),
                                        self._time.milliseconds())
            await asyncio.sleep(0)
        log.info("group coordinator loaded %d partition(s), %d group(s) from %d record(s)",
                 len(partitions), len(coord.groups), total)

    def unload_partitions(self, partitions: Iterable[int]) -> None:
        """Stop coordinating ``partitions`` (leadership moved away): their groups leave
        memory and parked requests answer NOT_COORDINATOR, so clients look up the new
        coordinator."""
        coord = self.coordinator
        gone = [p for p in partitions if p in coord.hosted or p in coord.loading]
        for partition in gone:
            coord.unload(partition)
        self._replayed_end.clear()
        if gone:
            log.info("group coordinator unloaded partition(s) %s", sorted(gone))
            self._dispatch()

    async def stop(self) -> None:
        """Stop the timers; parked requests are answered NOT_COORDINATOR."""
        await self._runtime.stop()
        for partition in list(self.coordinator.hosted | self.coordinator.loading):
            self.coordinator.unload(partition)
        self._dispatch()
        for future in self._waiters.values():
            future.cancel()
        self._waiters.clear()

    def run_once(self) -> None:
        """Fire due deadlines (one ``poll``), persist what they wrote, release answers."""
        try:
            result = self.coordinator.poll(self._time.milliseconds())
            self._persist_or_fail(result)  # timer-driven: no caller waits on it
        except Exception:
            log.exception("group coordinator tick failed")
        self._dispatch()

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    # ------------------------------------------------------------------ requests
    async def join_group(self, body: Any, version: int, client_id: str,
                         client_host: str) -> Any:
        return await self._call(lambda now: self.coordinator.join_group(
            body, version, client_id, client_host, now))

    async def sync_group(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.sync_group(body, version, now))

    async def heartbeat(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.heartbeat(body, version, now))

    async def leave_group(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.leave_group(body, version, now))

    async def commit_offsets(self, body: Any, version: int,
                             unknown: frozenset[tuple[str, int]] = frozenset()) -> Any:
        response = await self._call(lambda now: self.coordinator.commit_offsets(
            body, version, now, unknown))
        self._committed(body, response, transactional=False)
        return response

    async def txn_commit_offsets(self, body: Any, version: int,
                                 unknown: frozenset[tuple[str, int]] = frozenset()) -> Any:
        """TxnOffsetCommit: append the producer's transactional batch, hold its offsets
        pending, answer once the ISR has it."""
        coord = self.coordinator
        result = coord.txn_commit_offsets(body, version, self._time.milliseconds(), unknown)
        if not result.records or result.producer is None or result.on_failure is None:
            return result.response
        partition = result.records[0].partition
        batch: _Batch = [(rec.key, rec.value) for rec in result.records]
        try:
            end = self._log.append(partition, batch, producer=result.producer)
        except Exception as exc:
            log.info("transactional offset commit of group %s not written: %s",
                     body.group_id, exc)
            return result.on_failure(txn_storage_error(exc))
        producer_id = result.producer[0]
        if partition in coord.hosted:
            for key, value in batch:
                coord.replay(key, value, end, producer_id)
        error = await self._log.wait_replicated(partition, end)
        if error:
            coord.fail_txn_offsets(producer_id, body.group_id, end)
            return result.on_failure(_STORAGE_ERRORS.get(error,
                                                         Errors.COORDINATOR_NOT_AVAILABLE))
        self._committed(body, result.response, transactional=True)
        return result.response

    def on_txn_marker(self, topic: str, partition: int, producer_id: int,
                      committed: bool) -> None:
        """``ReplicaManager.txn_marker_listeners``: a marker on ``topic``-``partition`` is
        appended and replicated.  Completes the producer's pending offsets when it is
        one of our hosted ``__consumer_offsets`` partitions."""
        if topic != OFFSETS_TOPIC or partition not in self.coordinator.hosted:
            return
        done = self.coordinator.replay_end_txn_marker(partition, producer_id, committed)
        if done:
            log.debug("%s marker of producer %d completed %d group(s) on partition %d",
                      "COMMIT" if committed else "ABORT", producer_id, done, partition)

    async def fetch_offsets(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.fetch_offsets(body, version, now))

    async def describe_groups(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.describe_groups(
            body, version, now))

    async def list_groups(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.list_groups(body, version, now))

    async def delete_groups(self, body: Any, version: int) -> Any:
        return await self._call(lambda now: self.coordinator.delete_groups(
            body, version, now))

    def _committed(self, body: Any, response: Any, *, transactional: bool) -> None:
        """Tell ``offset_commit_listeners`` (and the record tracer, while traced
        records are active) what a commit request applied."""
        tracer = self.tracer
        if tracer is not None and tracer.active:
            tracer.commit_applied(body, response)
        if not self.offset_commit_listeners:
            return
        accepted = {(t.name, p.partition_index) for t in response.topics
                    for p in t.partitions if p.error_code == Errors.NONE}
        offsets = {(t.name, p.partition_index): int(p.committed_offset) for t in body.topics
                   for p in t.partitions if (t.name, p.partition_index) in accepted}
        if not offsets:
            return
        now = self._time.milliseconds()
        for listener in self.offset_commit_listeners:
            try:
                listener(body.group_id, offsets, now, transactional)
            except Exception:
                log.exception("offset commit listener failed")

    # ------------------------------------------------------------------ machinery
    async def _call(self, step: Callable[[int], CoordinatorResult]) -> Any:
        result = step(self._time.milliseconds())
        future: asyncio.Future[Any] | None = None
        if result.waiter is not None:
            future = asyncio.get_running_loop().create_future()
            self._waiters[result.waiter] = future
        # An answer that goes straight back (offset commits...) is visible in the cache
        # only once the ISR has its records, like Kafka's pending offset commits: an
        # OffsetFetch never returns a commit that a failover could still take back.
        response, appended = self._persist_or_fail(result, replay=future is not None)
        self._dispatch()
        if future is None:
            if not appended:
                return response
            # The rest runs in a task of its own, shielded from the caller: a handler is
            # cancelled when its client disconnects, and a write cut off between its
            # append and its replay would never reach the cache (or, failed, never be
            # undone: a transactional commit left pending).
            return await self._runtime.shielded(
                self._await_durable(result, response, appended))
        try:
            return await future
        finally:
            self._waiters.pop(result.waiter or 0, None)

    async def _await_durable(self, result: CoordinatorResult, response: Any,
                             appended: dict[int, tuple[int, _Batch]]) -> Any:
        """Like Kafka's offsets.commit.required.acks=-1: the caller hears of a write only
        once the ISR has it (a failover cannot take an acknowledged commit), and only
        then does it enter the cache."""
        for partition, (end, batch) in appended.items():
            error = await self._log.wait_replicated(partition, end)
            if error:
                if result.on_failure is not None:
                    return result.on_failure(_STORAGE_ERRORS.get(
                        error, Errors.COORDINATOR_NOT_AVAILABLE))
                continue
            self._replay_durable(partition, end, batch)
        return response

    def _persist_or_fail(self, result: CoordinatorResult, *, replay: bool = True
                         ) -> tuple[Any, dict[int, tuple[int, _Batch]]]:
        """Write the step's records (into the cache too unless ``replay`` is False); on
        failure let the step undo itself.  Returns the response to send (None when it
        goes to the step's waiter) and, per partition written, the end offset the ISR
        must reach and the records."""
        appended: dict[int, tuple[int, _Batch]] = {}
        try:
            self._persist(result.records, appended, replay)
        except Exception as exc:
            log.error("writing to __consumer_offsets failed: %s", exc)
            if result.on_failure is not None:
                return result.on_failure(storage_error(exc)), {}
        return result.response, appended

    def _persist(self, records: list[OffsetsRecord],
                 appended: dict[int, tuple[int, _Batch]],
                 replay: bool = True) -> None:
        batches: dict[int, _Batch] = {}
        for rec in records:
            batches.setdefault(rec.partition, []).append((rec.key, rec.value))
        failure: Exception | None = None
        for partition, batch in batches.items():
            try:
                end = self._log.append(partition, batch)
            except Exception as exc:
                failure = failure or exc
                continue
            appended[partition] = (end, batch)
            if replay:
                self._replay_durable(partition, end, batch)
        if failure is not None:
            raise failure

    def _replay_durable(self, partition: int, end: int, batch: _Batch) -> None:
        """Apply records to the cache; a key already holding a later write (a commit that
        became durable first) keeps it, and a partition no longer hosted here is left
        alone (its next coordinator loads it from the log)."""
        if partition not in self.coordinator.hosted:
            return
        for key, value in batch:
            if self._replayed_end.get(key, -1) > end:
                continue
            self._replayed_end[key] = end
            self.coordinator.replay(key, value, end)

    def _dispatch(self) -> None:
        for token, response in self.coordinator.take_completions():
            future = self._waiters.pop(token, None)
            if future is not None and not future.done():
                future.set_result(response)
