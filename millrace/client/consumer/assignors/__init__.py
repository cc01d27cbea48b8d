"""Partition assignors run by the group leader: ``range``, ``roundrobin``, ``sticky`` and
``cooperative-sticky`` (Java's ``org.apache.kafka.clients.consumer.*Assignor``).

``load_assignors`` turns ``partition.assignment.strategy`` into instances: a protocol name,
a Java class name, a dotted Python path, a class or an instance, in preference order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from millrace.client.consumer.assignors.abstract import (
    AbstractPartitionAssignor,
    ConsumerGroupMetadata,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
)
from millrace.client.consumer.assignors.cooperative_sticky import CooperativeStickyAssignor
from millrace.client.consumer.assignors.range import RangeAssignor
from millrace.client.consumer.assignors.round_robin import RoundRobinAssignor
from millrace.client.consumer.assignors.sticky import AbstractStickyAssignor, StickyAssignor
from millrace.client.serialization import load_class
from millrace.common.errors import ConfigError
from millrace.protocol.consumer_protocol import Assignment, Subscription

__all__ = [
    "AbstractPartitionAssignor", "AbstractStickyAssignor", "Assignment",
    "ConsumerGroupMetadata", "ConsumerPartitionAssignor", "CooperativeStickyAssignor",
    "RangeAssignor", "RebalanceProtocol", "RoundRobinAssignor", "StickyAssignor",
    "Subscription", "load_assignors",
]

BUILT_IN: dict[str, type[ConsumerPartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor,
                              CooperativeStickyAssignor)
}
_JAVA_PACKAGE = "org.apache.kafka.clients.consumer."
for _cls in list(BUILT_IN.values()):
    BUILT_IN[_JAVA_PACKAGE + _cls.__name__] = _cls

_KEY = "partition.assignment.strategy"


def _load(value: Any) -> ConsumerPartitionAssignor:
    if isinstance(value, str):
        name = value.strip()
        value = BUILT_IN.get(name) or BUILT_IN.get(name.lower()) or load_class(name, _KEY)
    if isinstance(value, type) and issubclass(value, ConsumerPartitionAssignor):
        value = value()
    if not isinstance(value, ConsumerPartitionAssignor):
        raise ConfigError(f"Invalid value {value!r} for configuration {_KEY}: not a "
                          "ConsumerPartitionAssignor")
    if not value.name:
        raise ConfigError(f"Invalid value {value!r} for configuration {_KEY}: the assignor "
                          "has no name")
    return value


def load_assignors(values: Iterable[Any]) -> list[ConsumerPartitionAssignor]:
    out: list[ConsumerPartitionAssignor] = []
    for value in values:
        assignor = _load(value)
        if any(a.name == assignor.name for a in out):
            raise ConfigError(f"Invalid value for configuration {_KEY}: the assignor name "
                              f"{assignor.name!r} is used more than once")
        out.append(assignor)
    return out
