"""``__transaction_state``: its name and the configs it is created with.

Kafka's ``TransactionStateManager.transactionTopicConfigs``: compacted, uncompressed,
``transaction.state.log.segment.bytes`` segments, ``min.insync.replicas`` from
``transaction.state.log.min.isr``, no unclean election.  The minimum ISR is capped at
the replication factor it is created with, so a single broker (replication factor 1)
can write it; Kafka instead refuses until the two settings are lowered by hand.
"""

from __future__ import annotations

from typing import Any

TRANSACTION_STATE_TOPIC = "__transaction_state"


def transaction_topic_configs(config: Any, replication_factor: int) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        "min.insync.replicas": str(min(config["transaction.state.log.min.isr"],
                                       max(1, replication_factor))),
        "unclean.leader.election.enable": "false",
    }
