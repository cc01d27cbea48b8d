"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``).

``records`` (``__transaction_state`` layouts), ``transaction_metadata`` (the per-id state
machine), ``coordinator`` (the pure shard), ``transaction_marker_channel_manager``
(WriteTxnMarkers to partition leaders) and ``service`` (the asyncio adapter).
"""

from millrace.broker.transaction.coordinator import (
    InitProducerIdResult,
    TransactionConfig,
    TransactionCoordinator,
    TxnMarkerEntry,
    TxnResult,
)
from millrace.broker.transaction.topic import TRANSACTION_STATE_TOPIC
from millrace.broker.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
)

__all__ = [
    "TRANSACTION_STATE_TOPIC", "InitProducerIdResult", "TransactionConfig",
    "TransactionCoordinator", "TransactionMetadata", "TransactionState", "TxnMarkerEntry",
    "TxnResult",
]
