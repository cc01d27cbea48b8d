"""The transactional producer's states and the outcome of one transactional call.

``State`` and ``is_transition_valid`` are Java ``TransactionManager.State`` and its
transition table, which the manager enforces on every change:

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                               IN_TRANSACTION -> ABORTING_TRANSACTION -> READY
    IN_TRANSACTION / COMMITTING / INITIALIZING -> ABORTABLE_ERROR -> ABORTING_TRANSACTION
    ABORTING_TRANSACTION -> INITIALIZING  (the epoch bump after an abortable error, KIP-360)
    COMMITTING_TRANSACTION -> INITIALIZING  (the epoch bump after an EndTxn whose first
                                             attempt got no answer, see transaction_manager)
    anything -> FATAL_ERROR, which never leaves

``TransactionalRequestResult`` is what ``init_transactions``, ``commit_transaction`` and
friends wait on: the sender thread completes it, the application thread awaits it with
a timeout.  A call that timed out leaves its result pending; calling the same method
again waits on the same result (Java's ``PendingStateTransition``).
"""

from __future__ import annotations

import enum
import threading

from millrace.client.errors import KafkaTimeoutError


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_VALID_SOURCES: dict[State, frozenset[State]] = {
    State.UNINITIALIZED: frozenset({State.READY, State.ABORTABLE_ERROR}),
    State.INITIALIZING: frozenset({State.UNINITIALIZED, State.COMMITTING_TRANSACTION,
                                   State.ABORTING_TRANSACTION}),
    State.READY: frozenset({State.INITIALIZING, State.COMMITTING_TRANSACTION,
                            State.ABORTING_TRANSACTION}),
    State.IN_TRANSACTION: frozenset({State.READY}),
    State.COMMITTING_TRANSACTION: frozenset({State.IN_TRANSACTION}),
    State.ABORTING_TRANSACTION: frozenset({State.IN_TRANSACTION, State.ABORTABLE_ERROR}),
    State.ABORTABLE_ERROR: frozenset({State.IN_TRANSACTION, State.COMMITTING_TRANSACTION,
                                      State.ABORTABLE_ERROR, State.INITIALIZING}),
}


def is_transition_valid(source: State, target: State) -> bool:
    if target is State.FATAL_ERROR:
        return True  # always allowed; FATAL_ERROR is never a valid source
    return source in _VALID_SOURCES[target]


class TransactionalRequestResult:
    """Completed once by the sender thread; awaited by the application thread."""

    __slots__ = ("_error", "_event", "is_acked", "operation")

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._event = threading.Event()
        self._error: Exception | None = None
        self.is_acked = False  # the application saw the outcome (await_ returned or raised)

    def done(self) -> None:
        self._event.set()

    def fail(self, error: Exception) -> None:
        if not self._event.is_set():
            self._error = error
            self._event.set()

    @property
    def is_completed(self) -> bool:
        return self._event.is_set()

    @property
    def is_successful(self) -> bool:
        return self._event.is_set() and self._error is None

    @property
    def error(self) -> Exception | None:
        return self._error

    def await_(self, timeout_s: float | None) -> None:
        """Wait for the outcome; raise its error, or ``KafkaTimeoutError`` after ``timeout_s``."""
        if not self._event.wait(timeout_s):
            ms = "?" if timeout_s is None else int(timeout_s * 1000)
            raise KafkaTimeoutError(f"Timeout expired after {ms}ms while awaiting "
                                    f"{self.operation}")
        self.is_acked = True
        if self._error is not None:
            raise self._error
