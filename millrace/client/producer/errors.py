"""Errors of the transactional producer (Java ``org.apache.kafka.common.errors``).

The broker's answers map to ``millrace.common.errors`` classes; the producer adds the
ones that never travel on the wire.  Two families matter to an application:

* **fatal** -- ``ProducerFencedError`` (another producer with the same
  ``transactional.id`` took over; the coordinator's INVALID_PRODUCER_EPOCH is reported
  as this too), ``TransactionalIdAuthorizationError``, ``UnsupportedVersionError``,
  ``ClusterAuthorizationFailedError``, and ``IllegalStateError`` after an invalid
  transition on the producer's thread: the producer can only be closed, every later
  transactional call raises;
* **abortable** -- anything else that fails a transaction (a batch that could not be
  written, a topic the producer may not write, a group metadata mismatch): the
  application calls ``abort_transaction()`` and can then begin a new transaction.
  Records still queued when a transaction aborts fail with ``TransactionAbortedError``.

``is_fatal(error)`` tells the two apart the way the producer does.
"""

from __future__ import annotations

from typing import ClassVar

from millrace.client.errors import IllegalStateError
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationError,
    UnsupportedVersionError,
)

__all__ = [
    "InvalidProducerEpochError", "ProducerFencedError", "TransactionAbortedError",
    "TransactionalIdAuthorizationError", "is_fatal",
]


class TransactionAbortedError(KafkaError):
    """A record was not sent because its transaction is being aborted (Java
    ``TransactionAbortedException``): the application aborted it, or an earlier error
    made the transaction abortable.  Not retriable within this transaction."""

    name: ClassVar[str] = "TRANSACTION_ABORTED"

    def __init__(self, message: str = "") -> None:
        super().__init__(message or "Failing batch since transaction was aborted")


_FATAL = (ProducerFencedError, TransactionalIdAuthorizationError, UnsupportedVersionError,
          ClusterAuthorizationFailedError, IllegalStateError)


def is_fatal(error: BaseException) -> bool:
    """True for the errors after which a transactional producer can only be closed."""
    return isinstance(error, _FATAL)
