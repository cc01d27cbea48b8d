"""``TopicDeletionManager``: deleting a topic from every broker, then from ZooKeeper.

Java counterpart: ``kafka.controller.TopicDeletionManager``, simplified to what it
guarantees.  A topic named under ``/admin/delete_topics`` is *queued*; from then on it is
never elected for, and UpdateMetadata shows its partitions with leader -2 (brokers drop
such partitions from their metadata cache).  Deletion *starts* once every broker holding
one of its replicas is registered (a replica on a dead broker could not delete its log)
and none of its partitions is being reassigned:
every replica gets StopReplica(delete=true, leader epoch -2).  Each successful answer
ticks one replica off; an error leaves it pending, and pending replicas are asked again
when their broker (re)starts.  When no replica is pending the topic's znodes are deleted
(``/brokers/topics/<t>``, ``/config/topics/<t>``, ``/admin/delete_topics/<t>``) and the
controller forgets it.

With ``delete.topic.enable=false``, or for a topic that does not exist, the flag znode
is removed and nothing else happens.  Owned by the controller's event thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from millrace.broker.controller.broker_requests import ControllerBrokerRequestBatch
from millrace.broker.controller.controller_context import ControllerContext
from millrace.broker.controller.zk_writes import (
    DeleteTopicDeletionFlag,
    DeleteTopicZnodes,
    ZkWrite,
)
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition

Replica = tuple[TopicPartition, int]


class TopicDeletionManager:
    def __init__(self, context: ControllerContext, batch: ControllerBrokerRequestBatch) -> None:
        self._ctx = context
        self._batch = batch
        self._pending: dict[str, set[Replica]] = {}  # started topics -> replicas not yet deleted

    def reset(self) -> None:
        self._pending.clear()

    def forget(self, topic: str) -> None:
        """The topic vanished from ZooKeeper by other means: stop tracking it."""
        self._pending.pop(topic, None)

    def is_started(self, topic: str) -> bool:
        return topic in self._pending

    def pending_replicas(self, topic: str) -> set[Replica]:
        return set(self._pending.get(topic, ()))

    def queue(self, topics: Iterable[str], enabled: bool, zk: Callable[[ZkWrite], None]) -> None:
        for topic in sorted(set(topics)):
            if not enabled or topic not in self._ctx.assignments:
                zk(DeleteTopicDeletionFlag(topic))
            else:
                self._ctx.topics_to_be_deleted.add(topic)

    def try_deletion(self, zk: Callable[[ZkWrite], None]) -> None:
        ctx = self._ctx
        for topic in sorted(ctx.topics_to_be_deleted):
            if topic not in self._pending:
                replicas = {(tp, b) for tp in ctx.partitions_for_topic(topic)
                            for b in ctx.replica_assignment(tp)}
                if any(b not in ctx.live_brokers for _, b in replicas):
                    continue                    # ineligible while a replica's broker is down
                if ctx.is_topic_being_reassigned(topic):
                    continue                    # ineligible while a reassignment runs
                self._pending[topic] = replicas
                self._batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids,
                                                ctx.partitions_for_topic(topic))
                self._stop(replicas)
            if not self._pending[topic]:
                del self._pending[topic]
                zk(DeleteTopicZnodes(topic))
                ctx.remove_topic(topic)

    def on_broker_startup(self, brokers: Iterable[int]) -> None:
        started = set(brokers)
        for replicas in self._pending.values():
            self._stop({(tp, b) for tp, b in replicas if b in started})

    def on_broker_failure(self, brokers: Iterable[int]) -> None:
        """Replicas on dead brokers stay pending until their broker returns."""

    def on_stop_replica_response(self, broker_id: int,
                                 errors: Mapping[TopicPartition, Errors]) -> None:
        for tp, error in errors.items():
            pending = self._pending.get(tp.topic)
            if pending is not None and error is Errors.NONE:
                pending.discard((tp, broker_id))

    def _stop(self, replicas: Iterable[Replica]) -> None:
        for tp, broker in sorted(replicas):
            self._batch.add_stop_replica([broker], tp, delete_partition=True)
