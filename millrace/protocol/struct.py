"""Value classes built from declarations.

Each declared struct (the message body and every nested ``Name`` / ``[]Name`` type)
becomes a small ``__slots__`` class holding the union of the fields of all versions.
Construct with keywords; unset fields take their declared default (Kafka's rules:
numbers 0, bools false, strings "", arrays empty, nullable-with-default-null None).
Nested struct classes hang off their parent: ``ProduceRequest.TopicProduceData``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from millrace.protocol.schema import NO_DEFAULT, Field, Message

ZERO_UUID = uuid.UUID(int=0)

_SCALAR_DEFAULTS: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0,
    "float64": 0.0, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID,
}


class _StructType(type):
    """Metaclass: nested struct classes are created at import time, so to the type
    checker they are dynamic attributes (``ProduceRequest.TopicProduceData``)."""

    def __getattr__(cls, name: str) -> Any:
        raise AttributeError(f"{cls.__name__} has no nested struct {name!r}")


class Struct(metaclass=_StructType):
    """Base of every generated message/struct class."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _factories: ClassVar[tuple[Callable[[], Any], ...]] = ()

    def __init__(self, **values: Any) -> None:
        for name, factory in zip(self._fields, self._factories):
            setattr(self, name, values.pop(name) if name in values else factory())
        if values:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(values)}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({body})"

    if not TYPE_CHECKING:  # a clearer message; hidden so that typos in typed code fail mypy
        def __getattr__(self, name: str) -> Any:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v
        return {n: conv(getattr(self, n)) for n in self._fields}


def default_factory(f: Field, struct_cls: type[Struct] | None) -> Callable[[], Any]:
    """The zero-argument callable that produces ``f``'s default value."""
    if f.is_array:
        if f.default is None:
            return lambda: None
        return list
    if f.is_struct:
        assert struct_cls is not None
        if f.default is None:
            return lambda: None
        return struct_cls
    value = f.default if f.default is not NO_DEFAULT else _SCALAR_DEFAULTS[f.type]
    return lambda: value


def build_class(name: str, fields: tuple[Field, ...], doc: str = "") -> type[Struct]:
    """Create the class for one struct, recursing into nested struct fields."""
    nested: dict[str, type[Struct]] = {}
    factories = []
    for f in fields:
        sub = None
        if f.is_struct:
            sub = nested.get(f.element_type) or build_class(f.element_type, f.fields)
            nested[f.element_type] = sub
        factories.append(default_factory(f, sub))
    ns: dict[str, Any] = {
        "__slots__": tuple(f.name for f in fields),
        "_fields": tuple(f.name for f in fields),
        "_factories": tuple(factories),
        "__doc__": doc or f"Struct {name}.",
        "__module__": "millrace.protocol.messages",
    }
    ns.update(nested)
    return type(name, (Struct,), ns)


def build_message_class(msg: Message) -> type[Struct]:
    return build_class(msg.name, msg.fields,
                       f"{msg.name} (api key {msg.api_key}, versions {msg.versions}, "
                       f"flexible {msg.flexible}).")
