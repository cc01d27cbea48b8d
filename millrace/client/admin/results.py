"""Per-item outcomes of an admin operation (Java's ``CreateTopicsResult`` & co.).

An operation on several items (topics, groups, partitions, config resources) may succeed
for some and fail for others, so it answers an ``AdminResult``: a mapping from each item
to a completed ``concurrent.futures.Future``.  ``future.result()`` gives the item's value
or raises its error -- the Kafka exception for the error code the broker answered
(``millrace.common.errors.for_code``), with a message naming the item.  ``all()`` gives
every value at once or raises the first error (in request order)::

    admin.create_topics([NewTopic("a", 3), NewTopic("b", 1)]).all()      # raises or {}
    for name, future in admin.delete_topics(["a", "b"]).items():
        future.result()
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from concurrent.futures import Future
from typing import Generic, TypeVar

from millrace.common.errors import KafkaError, MillraceError, for_code

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class IllegalArgumentError(MillraceError, ValueError):
    """An admin request the client refuses before sending (Java IllegalArgumentException)."""


def completed(value: V) -> Future[V]:
    future: Future[V] = Future()
    future.set_result(value)
    return future


def failed(error: BaseException) -> Future[V]:
    future: Future[V] = Future()
    future.set_exception(error)
    return future


def kafka_error(code: int, message: str | None, kind: str, name: object) -> KafkaError:
    """The exception for a wire error code, its message naming the item ("topic 'a': ...")
    unless the broker's own message already does."""
    text = str(message or "")
    if not re.search(rf"(?<![\w.-]){re.escape(str(name))}(?![\w.-])", text):
        text = f"{kind} '{name}'" + (f": {text}" if text else "")
    return for_code(code)(text)


class AdminResult(dict[K, Future[V]], Generic[K, V]):
    """item -> completed future; insertion order is the request's order."""

    def set_value(self, key: K, value: V) -> None:
        self[key] = completed(value)

    def set_error(self, key: K, error: BaseException) -> None:
        self[key] = failed(error)

    def all(self) -> dict[K, V]:
        """Every item's value; raises the first item's error if any failed."""
        return {key: future.result() for key, future in self.items()}

    def errors(self) -> dict[K, BaseException]:
        out = {}
        for key, future in self.items():
            error = future.exception()
            if error is not None:
                out[key] = error
        return out

    def settle(self, keys: Iterable[K], answered: Mapping[K, BaseException | None],
               value: V, missing: str) -> None:
        """One future per key: ``value`` where ``answered`` has None, the error where it
        has one, and a KafkaError naming the key (``missing`` says who did not answer)
        where the answer left it out."""
        for key in keys:
            if key not in answered:
                self.set_error(key, KafkaError(f"partition '{key}': {missing}"))
            elif (error := answered[key]) is not None:
                self.set_error(key, error)
            else:
                self.set_value(key, value)

    def set_outcomes(self, keys: Iterable[K], outcome: Mapping[K, V | BaseException]
                     ) -> None:
        """One future per key: its error where ``outcome`` holds an exception, else its
        value."""
        for key in keys:
            value = outcome[key]
            if isinstance(value, BaseException):
                self.set_error(key, value)
            else:
                self.set_value(key, value)

    def values_or_none(self) -> dict[K, V | None]:
        return {key: None if future.exception() else future.result()
                for key, future in self.items()}
