"""The ``_schemas`` topic as storage, on a real broker: the topic is created compacted with
one partition, a new writer fences the old one (so a deposed leader cannot append an id
after its successor started), and a second store reads the same state back."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from millrace.client.admin import KafkaAdminClient
from millrace.client.admin.types import ConfigResource, ConfigResourceType, NewTopic
from millrace.client.schema_registry.schemas import Schema
from millrace.schema_registry import errors
from millrace.schema_registry.kafka_store import KafkaStore, KafkaStoreWriter
from millrace.schema_registry.registry import SchemaRegistry
from millrace.schema_registry.store import SchemaStore
from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("store-broker")) as b:
        yield b


def started(broker: BrokerProcess, topic: str) -> KafkaStore:
    store = KafkaStore(SchemaStore(), {"bootstrap.servers": broker.bootstrap}, topic=topic,
                       timeout_s=30)
    store.start()
    return store


def record(i: int) -> Schema:
    return Schema(json.dumps({"type": "record", "name": f"R{i}", "fields": []}))


def test_the_topic_is_compacted_with_one_partition(broker: BrokerProcess) -> None:
    store = started(broker, "_schemas_shape")
    store.close()
    with KafkaAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        described = admin.describe_topics(["_schemas_shape"])["_schemas_shape"].result()
        resource = ConfigResource(ConfigResourceType.TOPIC, "_schemas_shape")
        configs = admin.describe_configs([resource])[resource].result()
        assert len(described.partitions) == 1
        assert configs.get("cleanup.policy").value == "compact"
        admin.create_topics([NewTopic("_schemas_wide", 3, 1)])["_schemas_wide"].result()
    with pytest.raises(errors.StoreError, match="3 partitions"):
        started(broker, "_schemas_wide")


def test_a_new_writer_fences_the_old_one(broker: BrokerProcess) -> None:
    old_store, new_store = started(broker, "_schemas_fence"), started(broker, "_schemas_fence")
    old = KafkaStoreWriter(old_store, "fence-writer")
    new = KafkaStoreWriter(new_store, "fence-writer")
    old_registry = SchemaRegistry(old_store.store, old, catch_up=old_store.wait_until_caught_up)
    new_registry = SchemaRegistry(new_store.store, new, catch_up=new_store.wait_until_caught_up)
    try:
        old.open()
        assert old_registry.register("s", record(1)).id == 1
        new.open()  # the successor: init_transactions fences the old producer
        with pytest.raises(errors.StoreError, match="cannot write"):
            old_registry.register("s2", record(2))  # it would have taken id 2
        assert not old.is_open  # a fenced writer gives its producer up
        assert new_registry.register("t", record(3)).id == 2
        # what the deposed one tried is in nobody's state
        for store in (old_store, new_store):
            store.wait_until_caught_up()
            assert store.store.subject_names() == ["s", "t"]
    finally:
        for w in (old, new):
            w.close()
        for s in (old_store, new_store):
            s.close()


def test_without_the_shared_transactional_id_the_old_writer_still_appends(
        broker: BrokerProcess) -> None:
    """The negative control: writers with different transactional ids do not fence each
    other -- a deposed leader's append lands after its successor opened, which is how two
    leaders would hand out one id twice."""
    a_store, b_store = started(broker, "_schemas_nofence"), started(broker, "_schemas_nofence")
    a, b = KafkaStoreWriter(a_store, "writer-a"), KafkaStoreWriter(b_store, "writer-b")
    try:
        a.open()
        b.open()
        SchemaRegistry(a_store.store, a).register("late", record(1))  # not refused
        b_store.wait_until_caught_up()
        assert b_store.store.subject_names() == ["late"]
    finally:
        for w in (a, b):
            w.close()
        for s in (a_store, b_store):
            s.close()
