"""The quota store's pure parts: entity paths (Kafka's config change notification paths,
names sanitized, ``<default>`` as is) both ways, the stored value strings, what counts as
a quota among a user's configs, and publication (each actual change once, removals as
empty values, a full re-read reporting what went away)."""

from __future__ import annotations

import pytest

from millrace.broker.quota.entity import DEFAULT, QuotaEntity, QuotaValues
from millrace.broker.quota.quota_store import (
    QuotaStore,
    apply_ops,
    entity_of_path,
    entity_path,
    format_value,
    quota_values,
)


@pytest.mark.parametrize(("entity", "path"), [
    (QuotaEntity("alice", None), "users/alice"),
    (QuotaEntity(DEFAULT, None), "users/<default>"),
    (QuotaEntity("CN=a b,O=x", "app/1"), "users/CN%3Da%20b%2CO%3Dx/clients/app%2F1"),
    (QuotaEntity("u", DEFAULT), "users/u/clients/<default>"),
    (QuotaEntity(DEFAULT, DEFAULT), "users/<default>/clients/<default>"),
    (QuotaEntity(None, "c*"), "clients/c%2A"),
    (QuotaEntity(None, DEFAULT), "clients/<default>"),
])
def test_entity_paths_both_ways(entity: QuotaEntity, path: str) -> None:
    assert entity_path(entity) == path
    assert entity_of_path(path) == entity


def test_other_paths_are_not_quota_entities() -> None:
    for path in ("topics/t", "brokers/1", "brokers/<default>"):
        assert entity_of_path(path) is None
    for bad in ("users/a/clients", "users/a/x/b", "clients/", "users/%zz"):
        with pytest.raises(ValueError):
            entity_of_path(bad)
    with pytest.raises(ValueError):
        entity_path(QuotaEntity(None, None))


def test_values_as_kafka_writes_and_reads_them() -> None:
    assert format_value("producer_byte_rate", 1048576.0) == "1048576"
    assert format_value("consumer_byte_rate", 2.9999999) == "3"
    assert format_value("request_percentage", 200.0) == "200.0"
    assert format_value("controller_mutation_rate", 0.5) == "0.5"
    configs = {"SCRAM-SHA-256": "cred", "producer_byte_rate": "1024",
               "request_percentage": "1.0E2", "consumer_byte_rate": "lots"}
    assert quota_values(configs) == {"producer_byte_rate": 1024.0, "request_percentage": 100.0}
    assert apply_ops(configs, {"producer_byte_rate": None, "request_percentage": 5.0}) == {
        "SCRAM-SHA-256": "cred", "request_percentage": "5.0", "consumer_byte_rate": "lots"}


class _Memory(QuotaStore):
    def __init__(self, quotas: dict[QuotaEntity, QuotaValues]) -> None:
        super().__init__()
        self.quotas = quotas

    def read_all(self) -> dict[QuotaEntity, QuotaValues]:
        return dict(self.quotas)


def test_publication_reports_each_change_once() -> None:
    a, b = QuotaEntity("a", None), QuotaEntity(None, "b")
    store = _Memory({a: {"producer_byte_rate": 1.0}})
    assert store.load() == {a: {"producer_byte_rate": 1.0}}
    heard: list[tuple[QuotaEntity, QuotaValues]] = []
    stop = store.watch(lambda e, v: heard.append((e, v)))
    store.publish(a, {"producer_byte_rate": 1.0})  # what load() said: nothing new
    store.publish(b, {"consumer_byte_rate": 2.0})
    store.publish(b, {"consumer_byte_rate": 2.0})
    store.publish_all({b: {"consumer_byte_rate": 3.0}})  # a went away, b changed
    assert heard == [(b, {"consumer_byte_rate": 2.0}), (a, {}),
                     (b, {"consumer_byte_rate": 3.0})]
    stop()
    store.publish(b, {})
    assert len(heard) == 3


def test_a_failing_callback_does_not_stop_the_others() -> None:
    store = _Memory({})
    store.load()
    heard: list[QuotaEntity] = []

    def boom(_e: QuotaEntity, _v: QuotaValues) -> None:
        raise RuntimeError("boom")
    store.watch(boom)
    store.watch(lambda e, _v: heard.append(e))
    store.publish(QuotaEntity("x", None), {"producer_byte_rate": 1.0})
    assert heard == [QuotaEntity("x", None)]
