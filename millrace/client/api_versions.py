"""``ApiVersions``: what the brokers said about themselves in their ApiVersions answers
that a client needs beyond one connection (Java ``org.apache.kafka.clients.ApiVersions``).

Per-node API version ranges stay with the connection state (``NetworkClient``); this
object keeps the *finalized features* (KIP-584): the feature levels the cluster has
enabled, such as ``transaction.version`` (KIP-890 part 2).  Every broker answers them with
the epoch of the cluster's feature record; the answer with the highest epoch wins, since
a broker that has not caught up answers an older epoch.  An answer without features
(epoch -1: a broker that finalizes none, or ApiVersions below v3) leaves what we know.

Thread-safety: written by the network thread, read by the application thread (the
transactional producer reads ``transaction.version`` in ``begin_transaction``); guarded
by ``_lock``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

TRANSACTION_VERSION_FEATURE = "transaction.version"


@dataclass(frozen=True)
class FinalizedFeaturesInfo:
    finalized_features_epoch: int = -1
    finalized_features: Mapping[str, int] = field(default_factory=dict)  # name -> max level


class ApiVersions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._info = FinalizedFeaturesInfo()  # guarded by _lock

    def update_finalized_features(self, epoch: int, features: Mapping[str, int]) -> None:
        """One broker's answer: kept if its epoch is at least the highest seen."""
        if epoch < 0:
            return
        with self._lock:
            if epoch >= self._info.finalized_features_epoch:
                self._info = FinalizedFeaturesInfo(epoch, dict(features))

    def finalized_features_info(self) -> FinalizedFeaturesInfo:
        with self._lock:
            return self._info

    def max_finalized_features_epoch(self) -> int:
        with self._lock:
            return self._info.finalized_features_epoch


__all__ = ["TRANSACTION_VERSION_FEATURE", "ApiVersions", "FinalizedFeaturesInfo"]
