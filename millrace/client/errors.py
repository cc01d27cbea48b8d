"""Client-side errors that never travel on the wire.

Kafka's error table (``millrace.common.errors``) covers what a broker answers; a client
also fails on its own: a wait that ran out (``KafkaTimeoutError``, Java's
``TimeoutException``), a full ``buffer.memory`` (``BufferExhaustedError``), a closed
producer, a value its serializer rejects.  ``retriable`` mirrors the wire errors so a
caller can treat both kinds alike.
"""

from __future__ import annotations

import builtins
from typing import ClassVar

from millrace.common.errors import MillraceError


class KafkaTimeoutError(MillraceError, builtins.TimeoutError):
    """A client-side wait expired: metadata, buffer memory, delivery timeout, a request.

    Java's ``org.apache.kafka.common.errors.TimeoutException``, a retriable error.
    """

    retriable: ClassVar[bool] = True


class NoBrokerAvailableError(KafkaTimeoutError):
    """No broker ever answered: every connection attempt failed.  The message names each
    address tried and its socket error ("no broker reachable at 127.0.0.1:9999 (connection
    refused)"), so a wrong address or a stopped broker is not mistaken for a missing topic.

    A ``KafkaTimeoutError`` (what Java's clients would raise after the same wait), so code
    catching timeouts keeps working.
    """


class SslAuthenticationError(MillraceError, ConnectionError):
    """The TLS handshake with a broker failed: its certificate did not verify (unknown
    CA, a host name it does not name), or it rejected ours.  Java's
    ``SslAuthenticationException``: not retriable -- raised at once from the waiting call
    (producer send, consumer poll, admin call), as a wrong SASL password is.  TLS failures
    have no Kafka error code; the message carries OpenSSL's reason and the address."""

    retriable: ClassVar[bool] = False


class BufferExhaustedError(KafkaTimeoutError):
    """``send()`` waited ``max.block.ms`` for ``buffer.memory`` and none came free."""


class IllegalStateError(MillraceError, RuntimeError):
    """An operation the object's state does not allow (e.g. ``send`` after ``close``)."""

    retriable: ClassVar[bool] = False


class SerializationError(MillraceError, ValueError):
    """A serializer could not turn a key or value into bytes; nothing was buffered."""

    retriable: ClassVar[bool] = False


