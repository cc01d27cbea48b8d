"""Schemas and the Confluent schema registry, client side: the value types and parsing
(``schemas``), the REST client and the serializers (``client``, ``serdes``)."""

from millrace.client.schema_registry.schemas import (
    AVRO,
    JSON,
    PROTOBUF,
    AvroSchema,
    InvalidSchemaError,
    JsonSchema,
    ParsedSchema,
    ProtobufSchema,
    Schema,
    SchemaReference,
    parse_schema,
)

__all__ = ["AVRO", "JSON", "PROTOBUF", "AvroSchema", "InvalidSchemaError", "JsonSchema",
           "ParsedSchema", "ProtobufSchema", "Schema", "SchemaReference", "parse_schema"]
