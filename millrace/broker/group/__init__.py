"""The classic consumer-group coordinator (Kafka's ``GroupCoordinator``).

``coordinator.GroupCoordinator`` is the pure, steppable state machine over the groups of
the hosted ``__consumer_offsets`` partitions; ``service.GroupCoordinatorService`` is the
asyncio adapter the broker owns (futures for parked requests, the timer task, and the
appends to ``__consumer_offsets``).  ``records`` holds the partition's key/value layouts.
"""

from millrace.broker.group.coordinator import GroupCoordinator
from millrace.broker.group.group_metadata_manager import (
    CoordinatorResult,
    GroupConfig,
    OffsetsRecord,
    partition_for,
)

__all__ = ["CoordinatorResult", "GroupConfig", "GroupCoordinator", "OffsetsRecord",
           "partition_for"]
