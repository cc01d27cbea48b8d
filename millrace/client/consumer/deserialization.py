"""Deserializers for the consumer: the mirror of ``millrace.client.serialization``.

The built-in deserializers (``StringDeserializer``, ``IntegerDeserializer``, ...) live next
to the serializers they mirror and are re-exported here.  This module adds what the
consumer's configuration needs on top: ``FunctionDeserializer`` (a plain callable such as
``json.loads`` or ``bytes.decode``) and ``resolve``, which accepts everything
``key.deserializer``/``value.deserializer`` may hold -- an instance, a class, a callable, a
short name (``"str"``, ``"int"``, ``"json"``...), a Java class name or a dotted path.
A deserializer that fails makes ``poll`` raise ``RecordDeserializationError`` naming the
partition and offset (the fetcher wraps the exception).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from millrace.client.serialization import (
    ByteArrayDeserializer,
    Deserializer,
    DoubleDeserializer,
    FloatDeserializer,
    IntegerDeserializer,
    JsonDeserializer,
    LongDeserializer,
    ShortDeserializer,
    StringDeserializer,
    resolve_deserializer,
)

__all__ = [
    "ByteArrayDeserializer", "Deserializer", "DoubleDeserializer", "FloatDeserializer",
    "FunctionDeserializer", "IntegerDeserializer", "JsonDeserializer", "LongDeserializer",
    "ShortDeserializer", "StringDeserializer", "resolve",
]


class FunctionDeserializer(Deserializer[Any]):
    """Wraps ``fn(data) -> value``; a null key or value stays ``None``."""

    def __init__(self, fn: Callable[[bytes], Any]) -> None:
        self._fn = fn

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any:
        return None if data is None else self._fn(data)

    def __repr__(self) -> str:
        return f"FunctionDeserializer({self._fn!r})"


def resolve(value: Any, config_name: str, configs: Mapping[str, Any],
            is_key: bool) -> Deserializer[Any]:
    """The configured deserializer (``None`` means bytes as they are)."""
    if callable(value) and not isinstance(value, type | Deserializer):
        return FunctionDeserializer(value)
    return resolve_deserializer(value, config_name, configs, is_key)
