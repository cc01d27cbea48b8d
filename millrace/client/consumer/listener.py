"""Callbacks around a group rebalance (Java ``ConsumerRebalanceListener``).

All three run on the application thread, inside ``poll`` (or ``close``/``unsubscribe``):

* ``on_partitions_revoked(partitions)`` -- the partitions are being taken away in an orderly
  rebalance; commit what was processed.  Eager protocols revoke everything before each
  rejoin; the cooperative protocol (KIP-429) revokes only what moves to another member, so
  this may be called with an empty set (it is then skipped).
* ``on_partitions_assigned(partitions)`` -- the newly added partitions, after the rebalance
  (always called, possibly with an empty set).
* ``on_partitions_lost(partitions)`` -- the member lost its partitions without an orderly
  revocation (its generation was fenced: session or poll timeout); others may already own
  them, so do not commit.  Defaults to ``on_partitions_revoked``, as in Java.

An exception raised by a callback is re-raised from ``poll`` after the rebalance step is
complete.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from millrace.client.cluster import TopicPartition


class ConsumerRebalanceListener:
    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)


PartitionsCallback = Callable[[Collection[TopicPartition]], None]


class FunctionRebalanceListener(ConsumerRebalanceListener):
    """A listener from plain functions: ``subscribe(["t"], listener=FunctionRebalanceListener(
    on_assign=..., on_revoke=...))``."""

    def __init__(self, on_assign: PartitionsCallback | None = None,
                 on_revoke: PartitionsCallback | None = None,
                 on_lost: PartitionsCallback | None = None) -> None:
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_lost = on_lost

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        if self._on_revoke is not None:
            self._on_revoke(partitions)

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        if self._on_assign is not None:
            self._on_assign(partitions)

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        if self._on_lost is not None:
            self._on_lost(partitions)
        else:
            self.on_partitions_revoked(partitions)
