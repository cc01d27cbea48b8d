"""Compatibility levels, and whether one schema can read data written with another.

A subject's compatibility level says which earlier versions a new schema is checked against
and in which direction (Confluent's levels; Avro's own terms: the *reader* and the *writer*):

- BACKWARD: the new schema reads data written with the latest version (consumers upgrade
  first); FORWARD: the latest version reads data written with the new one (producers
  upgrade first); FULL: both;
- the ``_TRANSITIVE`` variants check against every live version, not only the latest;
- NONE: no check.

``incompatibilities(reader, writer)`` is the one question every level asks, answered per
schema type: ``avro`` (the Avro specification's schema resolution), ``json_schema``
(does the reader accept every document the writer accepts) and ``protobuf`` (wire-format
rules).  It answers ``[]`` when compatible, otherwise one message per problem naming the
path in the schema.  Schemas of different types never read each other.

Java's counterparts: ``io.confluent.kafka.schemaregistry.CompatibilityLevel`` and
``CompatibilityChecker``.  No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from millrace.client.schema_registry.schemas import (
    AvroSchema,
    JsonSchema,
    ParsedSchema,
    ProtobufSchema,
)
from millrace.schema_registry.compatibility.avro import avro_incompatibilities
from millrace.schema_registry.compatibility.json_schema import json_incompatibilities
from millrace.schema_registry.compatibility.protobuf import protobuf_incompatibilities

__all__ = ["DEFAULT_LEVEL", "CompatibilityLevel", "check", "incompatibilities"]


class CompatibilityLevel(StrEnum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """The new schema must read the earlier versions' data."""
        return self.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """The earlier versions must read the new schema's data."""
        return self.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = CompatibilityLevel.BACKWARD


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """[] when data written with ``writer`` can be read with ``reader``, else the problems."""
    if isinstance(reader, AvroSchema) and isinstance(writer, AvroSchema):
        return avro_incompatibilities(reader, writer)
    if isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema):
        return json_incompatibilities(reader, writer)
    if isinstance(reader, ProtobufSchema) and isinstance(writer, ProtobufSchema):
        return protobuf_incompatibilities(reader, writer)
    return [f"/: a {reader.schema_type} schema cannot read data written with a "
            f"{writer.schema_type} schema"]


def check(level: CompatibilityLevel | str, new: ParsedSchema, previous: Sequence[ParsedSchema],
          versions: Sequence[int] | None = None) -> list[str]:
    """The problems that make ``new`` incompatible with the subject's ``previous`` live
    schemas (oldest first) at ``level``; [] when it may be registered.

    ``versions``, when given, are the version numbers of ``previous`` and name them in the
    messages; otherwise they are named by position.
    """
    level = CompatibilityLevel(level)
    if level is CompatibilityLevel.NONE or not previous:
        return []
    if versions is not None and len(versions) != len(previous):
        raise ValueError("versions must number every previous schema")
    positions = range(len(previous)) if level.transitive else [len(previous) - 1]
    problems: list[str] = []
    for i in reversed(positions):  # newest first: the likeliest break is reported first
        old = previous[i]
        label = (f"version {versions[i]}" if versions is not None
                 else "the latest version" if i == len(previous) - 1
                 else f"version #{i + 1} of {len(previous)}")
        if old.schema_type != new.schema_type:
            problems.append(f"{label}: it is a {old.schema_type} schema and the new one is "
                            f"{new.schema_type}; a subject's schemas share one type")
            continue
        if level.backward:
            problems += [f"{label} (the new schema reading its data): {p}"
                         for p in incompatibilities(new, old)]
        if level.forward:
            problems += [f"{label} (it reading the new schema's data): {p}"
                         for p in incompatibilities(old, new)]
    return problems
