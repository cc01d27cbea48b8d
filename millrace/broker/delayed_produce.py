"""``DelayedProduce``: an ``acks=all`` produce waiting for the ISR (Kafka's ``DelayedProduce``).

After the leader appended, each partition's batch is committed once the high watermark
reaches the end of the batch (``Partition.check_enough_replicas_reach_offset``).  Until
then the request waits in the produce purgatory, keyed by its partitions; a
high-watermark move (a follower's fetch, or the leader's own append on one node) lets it
try again.  Partitions still waiting at ``timeout_ms`` answer REQUEST_TIMED_OUT, as in
Kafka (their records may still become committed later: the outcome is unknown to the
producer).  On one node the high watermark has already reached the batch end when the
append returns, so the operation completes at once without ever parking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from millrace.broker.partition import Partition
from millrace.broker.purgatory import DelayedOperation
from millrace.common.errors import Errors

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionResponse:
    """One partition's produce outcome (Kafka's ``ProduceResponse.PartitionResponse``)."""

    error: int = Errors.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int  # the batch's last offset + 1: committed once HW reaches it
    response: PartitionResponse
    acks_pending: bool = True


class DelayedProduce(DelayedOperation):
    def __init__(self, delay_ms: int, statuses: dict[TopicPartition, ProducePartitionStatus],
                 get_partition: Callable[[str, int], Partition | None]) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._get_partition = get_partition

    def try_complete(self) -> bool:
        for (topic, index), status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._get_partition(topic, index)
            if partition is None:
                done, error = True, Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                done, error = partition.check_enough_replicas_reach_offset(
                    status.required_offset)
            if done:
                status.acks_pending = False
                status.response.error = error
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        """The statuses are the answer; nothing more to build."""

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending = False
                status.response.error = Errors.REQUEST_TIMED_OUT
