"""SchemaRegistry's rules over a SchemaStore, with an in-process writer that applies each
record to the store as the topic's reader would (the real topic: tests/integration)."""

from __future__ import annotations

import json
import threading

import pytest

from millrace.client.schema_registry.schemas import JSON, Schema, SchemaReference
from millrace.schema_registry import errors
from millrace.schema_registry import store as records
from millrace.schema_registry.registry import SchemaRegistry, parse_version
from millrace.schema_registry.store import SchemaStore


class AppliedWriter:
    """Each write applied to the store at the next offsets, like a topic read back."""

    def __init__(self, store: SchemaStore) -> None:
        self.store = store
        self.lock = threading.RLock()
        self.log: list[tuple[bytes, bytes | None]] = []

    def write(self, batch: list[tuple[bytes, bytes | None]]) -> int:
        for key, value in batch:
            self.store.apply(len(self.log), key, value)
            self.log.append((key, value))
        return len(self.log) - 1


def avro(*fields: str, name: str = "Order") -> Schema:
    body = [json.loads(f) for f in fields]
    return Schema(json.dumps({"type": "record", "name": name, "fields": body}))


ID = '{"name": "id", "type": "long"}'
COUPON = '{"name": "coupon", "type": ["null", "string"], "default": null}'
AMOUNT = '{"name": "amount", "type": "double"}'


@pytest.fixture
def registry() -> SchemaRegistry:
    store = SchemaStore()
    return SchemaRegistry(store, AppliedWriter(store))  # type: ignore[arg-type]


def replay(registry: SchemaRegistry) -> SchemaStore:
    """A second instance's store, read from the same records."""
    other = SchemaStore()
    for offset, (key, value) in enumerate(registry.writer.log):  # type: ignore[union-attr]
        other.apply(offset, key, value)
    return other


def test_register_is_idempotent_and_ids_are_shared_across_subjects(registry: SchemaRegistry
                                                                   ) -> None:
    v1 = registry.register("orders-value", avro(ID))
    assert (v1.version, v1.id) == (1, 1)
    again = registry.register("orders-value", Schema('{"fields":[{"type":"long","name":"id"}],'
                                                     ' "name":"Order","type":"record"}'))
    assert (again.version, again.id) == (1, 1)  # key order and spaces: the same schema
    other = registry.register("copies-value", avro(ID))
    assert (other.subject, other.version, other.id) == ("copies-value", 1, 1)
    v2 = registry.register("orders-value", avro(ID, COUPON))
    assert (v2.version, v2.id) == (2, 2)
    assert registry.versions("orders-value") == [1, 2]
    assert registry.get_version("orders-value", "latest").id == 2
    assert registry.lookup("orders-value", avro(ID)).version == 1
    assert [(u.subject, u.version) for u in registry.usages(1)] == [
        ("copies-value", 1), ("orders-value", 1)]


def test_an_incompatible_schema_is_refused_with_the_reason(registry: SchemaRegistry) -> None:
    registry.register("orders-value", avro(ID))
    with pytest.raises(errors.IncompatibleSchema) as e:
        registry.register("orders-value", avro(ID, AMOUNT))  # a field without a default
    assert e.value.http_status == 409 and "amount" in e.value.message
    assert registry.versions("orders-value") == [1]
    registry.set_level("orders-value", "NONE")
    assert registry.register("orders-value", avro(ID, AMOUNT)).version == 2
    assert registry.level("orders-value") == "NONE" and registry.level(None) == "BACKWARD"


def test_transitive_levels_compare_with_every_live_version(registry: SchemaRegistry) -> None:
    registry.set_level(None, "BACKWARD_TRANSITIVE")
    registry.register("s", avro(ID))
    registry.register("s", avro(ID, COUPON))
    # version 3 drops id's type to int: version 2 and 1 both write long -> refused
    with pytest.raises(errors.IncompatibleSchema) as e:
        registry.register("s", avro('{"name": "id", "type": "int"}', COUPON))
    assert "version 1" in e.value.message


def test_soft_then_permanent_delete_and_the_errors_on_the_way(registry: SchemaRegistry) -> None:
    registry.register("s", avro(ID))
    registry.register("s", avro(ID, COUPON))
    with pytest.raises(errors.VersionNotSoftDeleted):
        registry.delete_version("s", 1, permanent=True)
    assert registry.delete_version("s", 1, permanent=False) == 1
    with pytest.raises(errors.VersionSoftDeleted):
        registry.delete_version("s", 1, permanent=False)
    assert registry.versions("s") == [2]
    assert registry.versions("s", deleted=True) == [1, 2]
    assert registry.schema_by_id(1).schema_str  # a soft-deleted version's id still reads
    with pytest.raises(errors.SubjectNotSoftDeleted):
        registry.delete_subject("s", permanent=True)
    assert registry.delete_subject("s", permanent=False) == [2]
    with pytest.raises(errors.SubjectNotFound):
        registry.versions("s")
    with pytest.raises(errors.SubjectSoftDeleted):
        registry.delete_subject("s", permanent=False)
    assert registry.delete_subject("s", permanent=True) == [1, 2]
    with pytest.raises(errors.SchemaNotFound):
        registry.schema_by_id(1)
    assert registry.subjects(deleted=True) == []
    # a version number is never reused, nor an id for another schema
    v = registry.register("s", avro(ID, AMOUNT))
    assert v.version == 1 and v.id == 3


def test_ids_never_repeat_after_the_highest_id_is_purged_and_compacted(
        registry: SchemaRegistry) -> None:
    registry.register("s", avro(ID))
    registry.register("t", avro(ID, AMOUNT))  # id 2, the highest
    registry.delete_subject("t", permanent=False)
    registry.delete_subject("t", permanent=True)
    # compaction keeps the last value per key and drops tombstones: replay only that
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, (key, value) in enumerate(registry.writer.log):  # type: ignore[union-attr]
        last[key] = (offset, value)
    compacted = SchemaStore()
    for key, (offset, value) in sorted(last.items(), key=lambda kv: kv[1][0]):
        if value is not None:
            compacted.apply(offset, key, value)
    assert compacted.max_id == 2
    fresh = SchemaRegistry(compacted, AppliedWriter(compacted))  # type: ignore[arg-type]
    assert fresh.register("u", avro(ID, COUPON)).id == 3


def test_a_replayed_store_answers_the_same(registry: SchemaRegistry) -> None:
    registry.register("s", avro(ID))
    registry.register("s", avro(ID, COUPON))
    registry.delete_version("s", 1, permanent=False)
    registry.set_level("s", "FULL")
    registry.set_mode("s", "READONLY")
    other = SchemaRegistry(replay(registry), None)
    assert other.versions("s") == [2] and other.versions("s", deleted=True) == [1, 2]
    assert other.level("s") == "FULL" and other.mode("s") == "READONLY"
    assert other.schema_by_id(2) == registry.schema_by_id(2)
    with pytest.raises(errors.UnknownLeader):
        other.register("s", avro(ID))  # not the writer


def test_read_only_mode_refuses_registrations(registry: SchemaRegistry) -> None:
    registry.set_mode(None, "READONLY")
    with pytest.raises(errors.OperationNotPermitted):
        registry.register("s", avro(ID))
    registry.set_mode(None, "READWRITE")
    assert registry.register("s", avro(ID)).id == 1


def test_import_mode_takes_the_given_ids_and_versions(registry: SchemaRegistry) -> None:
    with pytest.raises(errors.OperationNotPermitted):
        registry.register("s", avro(ID), schema_id=40)  # not in IMPORT mode
    registry.set_mode(None, "IMPORT")
    v = registry.register("s", avro(ID), schema_id=40, version=7)
    assert (v.id, v.version) == (40, 7)
    with pytest.raises(errors.OperationNotPermitted):
        registry.register("t", avro(ID, COUPON), schema_id=40)  # 40 holds another schema
    registry.set_mode(None, "READWRITE")
    assert registry.register("t", avro(ID, COUPON)).id == 41


def test_references_resolve_and_protect_what_they_reference(registry: SchemaRegistry) -> None:
    registry.register("address", Schema('{"type": "object", "properties": '
                                        '{"city": {"type": "string"}}}', JSON))
    person = Schema('{"title": "Person", "type": "object", "properties": '
                    '{"home": {"$ref": "address.json"}}}', JSON,
                    (SchemaReference("address.json", "address", 1),))
    registry.register("person", person)
    assert registry.referenced_by("address", 1) == [2]
    with pytest.raises(errors.ReferenceExists):
        registry.delete_version("address", 1, permanent=False)
    dangling = Schema(person.schema_str, JSON, (SchemaReference("address.json", "nope", 1),))
    with pytest.raises(errors.InvalidSchema, match="nope"):
        registry.register("person2", dangling)


@pytest.mark.parametrize("text, error", [
    ('{"type": "record", "name": "X"}', "fields"),
    ("not json", "not valid JSON"),
    ('{"type": "nosuchtype"}', "nosuchtype"),
])
def test_invalid_schemas_are_422_naming_the_problem(registry: SchemaRegistry, text: str,
                                                     error: str) -> None:
    with pytest.raises(errors.InvalidSchema) as e:
        registry.register("s", Schema(text))
    assert e.value.error_code == 42201 and error in e.value.message


def test_versions_and_levels_are_validated(registry: SchemaRegistry) -> None:
    assert parse_version("latest") == -1 and parse_version("-1") == -1
    assert parse_version("3") == 3
    for bad in ("0", "x", str(2**31), "-2"):
        with pytest.raises(errors.InvalidVersion):
            parse_version(bad)
    with pytest.raises(errors.InvalidCompatibilityLevel):
        registry.set_level(None, "SIDEWAYS")
    with pytest.raises(errors.InvalidMode):
        registry.set_mode(None, "SIDEWAYS")
    with pytest.raises(errors.SubjectLevelConfigNotFound):
        registry.level("s", default_to_global=False)


def test_records_that_do_not_parse_are_skipped_and_counted() -> None:
    store = SchemaStore()
    store.apply(0, b"not json", b"{}")
    store.apply(1, records.schema_key("s", 1), b'{"subject": "s"}')  # no id, no schema
    store.apply(2, None, b"x")
    store.apply(3, b'{"keytype": "SOMETHING_NEW", "magic": 0}', b"{}")  # a newer registry's
    assert store.skipped == 3 and store.position == 4 and store.subject_names() == []


def test_record_keys_are_confluents() -> None:
    assert records.schema_key("s", 1) == \
        b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert records.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert records.mode_key("s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert records.delete_subject_key("s") == \
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
