"""Message declarations: the one place each request/response layout is stated.

Counterpart of Kafka's ``clients/src/main/resources/common/message/*.json`` plus the
generator that turns them into Java classes.  A ``Message`` lists its ``Field``s; each
field states its type, the versions it exists in, the versions in which it may be
null, its default and (for tagged fields) its tag.  Nested structs are declared inline
as a field whose type is ``"Name"`` or ``"[]Name"`` with its own ``fields``.

Type names: ``bool int8 int16 int32 int64 uint16 float64 string bytes records uuid``,
``[]<primitive>`` for arrays of primitives, ``Name`` / ``[]Name`` for structs.

Nothing here touches bytes: ``millrace.protocol.codec`` compiles declarations into
encoders and decoders, and ``millrace.protocol.struct`` builds the value classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

MAX_VERSION = 0x7FFF

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "float64", "string", "bytes",
     "records", "uuid"}
)


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``Versions.parse("3+")``, ``("0-5")``, ``("none")``."""

    low: int
    high: int

    @staticmethod
    def parse(text: str | None) -> Versions:
        if text is None or text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return Versions(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-")
            return Versions(int(lo), int(hi))
        return Versions(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.low, other.low), min(self.high, other.high)
        return Versions(lo, hi) if lo <= hi else NO_VERSIONS

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.low != self.high else str(self.low)


NO_VERSIONS = Versions(1, 0)


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct: ``F("acks", "int16", "0+")``."""

    name: str
    type: str
    versions: Versions
    nullable: Versions = NO_VERSIONS
    default: Any = NO_DEFAULT
    tag: int | None = None
    tagged: Versions = NO_VERSIONS
    fields: tuple[Field, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged


def F(
    name: str,
    type: str,
    versions: str,
    *fields: Field,
    nullable: str | None = None,
    default: Any = NO_DEFAULT,
    tag: int | None = None,
    tagged: str | None = None,
) -> Field:
    """Declare a field; nested struct fields follow positionally."""
    return Field(name, type, Versions.parse(versions), Versions.parse(nullable), default, tag,
                 Versions.parse(tagged), tuple(fields))


@dataclass(frozen=True, slots=True)
class Message:
    """A request or response body, or a ``data`` struct carried inside one (api key -1):
    valid and flexible versions, fields."""

    name: str
    api_key: int
    kind: Literal["request", "response", "data"]
    versions: Versions
    flexible: Versions
    fields: tuple[Field, ...] = field(default=())

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def request(name: str, api_key: int, versions: str, flexible: str, *fields: Field) -> Message:
    return Message(name, api_key, "request", Versions.parse(versions), Versions.parse(flexible),
                   tuple(fields))


def response(name: str, api_key: int, versions: str, flexible: str, *fields: Field) -> Message:
    return Message(name, api_key, "response", Versions.parse(versions),
                   Versions.parse(flexible), tuple(fields))


def data(name: str, versions: str, flexible: str, *fields: Field) -> Message:
    """A struct that travels as bytes inside a message (Kafka's ``"type": "data"``), e.g.
    the consumer protocol's subscription inside JoinGroup's protocol metadata."""
    return Message(name, -1, "data", Versions.parse(versions), Versions.parse(flexible),
                   tuple(fields))
