"""``ZkAclStore`` against a real ZooKeeper, in Kafka's layout: what one client writes
another reads; two writers racing on one resource both land (the version check); an
emptied resource's znode goes away; a change reaches another client's watcher within a
second; znodes written by hand the way Kafka's ``kafka-acls`` / ``AclAuthorizer`` write
them are read; old notifications are purged."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable

import pytest

from millrace.broker.security.acl_store import (
    CHANGE_EXPIRATION_MS,
    ZkAclChangeWatcher,
    ZkAclStore,
)
from millrace.broker.zk import KafkaZkClient
from millrace.common.time import MockTime
from millrace.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

pytestmark = [pytest.mark.integration]

Factory = Callable[[], KafkaZkClient]
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
APP_GROUPS = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
CLUSTER = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
ALICE_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
BOB_WRITE = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE,
                               AclPermissionType.DENY)


def entry(i: int) -> AccessControlEntry:
    return AccessControlEntry(f"User:u{i}", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)


def add(*entries: AccessControlEntry) -> Callable[[set[AccessControlEntry]],
                                                   set[AccessControlEntry]]:
    return lambda current: current | set(entries)


def children(zk: KafkaZkClient, path: str) -> list[str]:
    return sorted(zk.zk.get_children(path))


def znode_json(zk: KafkaZkClient, path: str) -> object:
    got = zk.zk.get_data(path)
    assert got is not None, f"{path} does not exist"
    return json.loads(got[0])


def test_written_by_one_client_read_by_another(zk_client_factory: Factory) -> None:
    writer, reader = zk_client_factory(), zk_client_factory()
    store = ZkAclStore(writer)
    store.update(ORDERS, add(ALICE_READ, BOB_WRITE))
    store.update(APP_GROUPS, add(ALICE_READ))
    store.update(CLUSTER, add(ALICE_READ))

    other = ZkAclStore(reader)
    assert other.load() == {ORDERS: {ALICE_READ, BOB_WRITE}, APP_GROUPS: {ALICE_READ},
                            CLUSTER: {ALICE_READ}}
    assert other.get(ORDERS) == {ALICE_READ, BOB_WRITE}
    # Kafka's paths and JSON
    assert znode_json(reader, "/kafka-acl-extended/prefixed/Group/app-") == {
        "version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                "operation": "Read", "host": "*"}]}
    orders = znode_json(reader, "/kafka-acl/Topic/orders")
    assert isinstance(orders, dict) and orders["version"] == 1
    assert sorted(orders["acls"], key=lambda e: e["principal"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write",
         "host": "10.0.0.1"}]
    assert reader.zk.exists("/kafka-acl/Cluster/kafka-cluster") is not None
    # one notification per change, in each change dir
    literal = children(reader, "/kafka-acl-changes")
    assert literal == ["acl_changes_0000000000", "acl_changes_0000000001"]
    got = reader.zk.get_data("/kafka-acl-changes/acl_changes_0000000000")
    assert got is not None and got[0] == b"TOPIC:orders"
    got = reader.zk.get_data("/kafka-acl-changes/acl_changes_0000000001")
    assert got is not None and got[0] == b"CLUSTER:kafka-cluster"
    assert znode_json(reader, "/kafka-acl-extended-changes/acl_changes_0000000000") == {
        "version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}


def test_a_lost_race_is_retried_on_the_fresh_version(zk_client_factory: Factory) -> None:
    first = ZkAclStore(zk_client_factory(), sleep=lambda s: None)
    second = ZkAclStore(zk_client_factory())
    first.update(ORDERS, add(entry(0)))
    calls = []

    def fn(current: set[AccessControlEntry]) -> set[AccessControlEntry]:
        calls.append(set(current))
        if len(calls) == 1:  # between first's read and its write, another client writes
            second.update(ORDERS, add(BOB_WRITE))
        return current | {ALICE_READ}

    assert first.update(ORDERS, fn) == {entry(0), BOB_WRITE, ALICE_READ}
    assert calls == [{entry(0)}, {entry(0), BOB_WRITE}]
    assert second.get(ORDERS) == {entry(0), BOB_WRITE, ALICE_READ}
    # the same when the resource did not exist yet (create loses to create)
    calls.clear()

    def fn2(current: set[AccessControlEntry]) -> set[AccessControlEntry]:
        calls.append(set(current))
        if len(calls) == 1:
            second.update(APP_GROUPS, add(BOB_WRITE))
        return current | {ALICE_READ}

    assert first.update(APP_GROUPS, fn2) == {BOB_WRITE, ALICE_READ}
    assert calls == [set(), {BOB_WRITE}]


def test_concurrent_writers_lose_no_entry(zk_client_factory: Factory) -> None:
    stores = [ZkAclStore(zk_client_factory(), max_update_retries=50) for _ in range(2)]
    per_writer = 12
    errors: list[BaseException] = []

    def slow_add(e: AccessControlEntry) -> Callable[[set[AccessControlEntry]],
                                                    set[AccessControlEntry]]:
        def fn(current: set[AccessControlEntry]) -> set[AccessControlEntry]:
            time.sleep(0.02)  # widen the read-to-write window: races are certain
            return current | {e}
        return fn

    def write(n: int) -> None:
        try:
            for i in range(per_writer):
                stores[n].update(ORDERS, slow_add(entry(n * per_writer + i)))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert stores[0].get(ORDERS) == {entry(i) for i in range(2 * per_writer)}
    got = stores[1].zk.zk.get_data("/kafka-acl/Topic/orders")
    assert got is not None and got[1].version == 2 * per_writer - 1
    assert len(children(stores[1].zk, "/kafka-acl-changes")) == 2 * per_writer


def test_removing_the_last_entry_deletes_the_znode(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    store = ZkAclStore(zk)
    store.create_paths()
    store.update(ORDERS, add(ALICE_READ, BOB_WRITE))
    store.update(ORDERS, lambda current: current - {ALICE_READ})
    assert zk.zk.exists("/kafka-acl/Topic/orders") is not None
    assert store.update(ORDERS, lambda current: set()) == set()
    assert zk.zk.exists("/kafka-acl/Topic/orders") is None
    assert zk.zk.exists("/kafka-acl/Topic") is not None  # the type dir stays, as in Kafka
    assert store.load() == {}
    assert len(children(zk, "/kafka-acl-changes")) == 3
    # emptying what is already empty writes nothing and announces nothing
    store.update(ORDERS, lambda current: set())
    assert len(children(zk, "/kafka-acl-changes")) == 3


def test_a_change_reaches_another_clients_watcher_within_a_second(
        zk_client_factory: Factory) -> None:
    writer = ZkAclStore(zk_client_factory())
    reader = ZkAclStore(zk_client_factory())
    seen: queue.Queue[list[ResourcePattern]] = queue.Queue()
    watcher = reader.watch(seen.put)
    watcher.start()
    try:
        time.sleep(0.2)  # the first round (nothing there yet) is done
        assert seen.empty()
        for pattern in (ORDERS, APP_GROUPS):
            started = time.monotonic()
            writer.update(pattern, add(ALICE_READ))
            assert seen.get(timeout=1.0) == [pattern]
            assert time.monotonic() - started < 1.0
            assert reader.get(pattern) == {ALICE_READ}
    finally:
        watcher.stop()
    writer.update(ORDERS, add(BOB_WRITE))
    time.sleep(0.3)
    assert seen.empty()  # stopped: no more callbacks


def test_a_started_watcher_reports_notifications_already_there(
        zk_client_factory: Factory) -> None:
    writer = ZkAclStore(zk_client_factory())
    writer.update(ORDERS, add(ALICE_READ))
    writer.update(APP_GROUPS, add(ALICE_READ))
    writer.update(ORDERS, add(BOB_WRITE))
    seen: queue.Queue[list[ResourcePattern]] = queue.Queue()
    watcher = ZkAclStore(zk_client_factory()).watch(seen.put)
    watcher.start()
    try:
        assert seen.get(timeout=5.0) == [ORDERS, APP_GROUPS]
    finally:
        watcher.stop()


def test_znodes_written_the_way_kafka_writes_them_are_read(zk_client_factory: Factory) -> None:
    kafka = zk_client_factory()
    # AclAuthorizer / kafka-acls: createAclPaths, then Jackson's bytes (HashMap key order)
    kafka.create_acl_paths()
    kafka.zk.create("/kafka-acl/Topic/orders",
                    b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
                    b'"operation":"Read"},{"principal":"User:bob","permissionType":"Deny",'
                    b'"host":"10.0.0.1","operation":"Write"}],"version":1}')
    kafka.zk.create("/kafka-acl-extended/prefixed/Group/app-",
                    b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
                    b'"operation":"Read"}],"version":1}')
    kafka.zk.create("/kafka-acl/Bogus")  # an unknown type dir is skipped, as Kafka does
    kafka.zk.create("/kafka-acl/Bogus/x", b'{"acls":[],"version":1}')
    kafka.zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:orders", sequential=True)
    kafka.zk.create("/kafka-acl-extended-changes/acl_changes_",
                    b'{"version":1,"resourceType":"GROUP","name":"app-",'
                    b'"patternType":"PREFIXED"}', sequential=True)

    ours = zk_client_factory()
    store = ZkAclStore(ours)
    assert store.load() == {ORDERS: {ALICE_READ, BOB_WRITE}, APP_GROUPS: {ALICE_READ}}
    watcher = ZkAclChangeWatcher(ours, lambda patterns: None)
    assert watcher.run_once() == [ORDERS, APP_GROUPS]
    # and a Kafka-written znode is updated in place, at its version
    store.update(ORDERS, lambda current: current - {BOB_WRITE})
    got = ours.zk.get_data("/kafka-acl/Topic/orders")
    assert got is not None and got[1].version == 1
    assert store.get(ORDERS) == {ALICE_READ}


def test_a_malformed_acl_znode_fails_the_load_naming_it(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    zk.zk.create("/kafka-acl/Topic/broken", b'{"version":2,"acls":[]}', make_parents=True)
    with pytest.raises(ValueError, match="/kafka-acl/Topic/broken"):
        ZkAclStore(zk).load()


def test_undecodable_notifications_are_skipped(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    zk.zk.create("/kafka-acl-changes/acl_changes_", b"garbage", sequential=True,
                 make_parents=True)
    ZkAclStore(zk).update(ORDERS, add(ALICE_READ))
    assert ZkAclChangeWatcher(zk, lambda patterns: None).run_once() == [ORDERS]


def test_notifications_older_than_fifteen_minutes_are_purged(
        zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    store = ZkAclStore(zk)
    store.update(ORDERS, add(ALICE_READ))
    store.update(APP_GROUPS, add(ALICE_READ))
    clock = MockTime(int(time.time() * 1000))
    watcher = ZkAclChangeWatcher(zk, lambda patterns: None, time=clock)
    assert watcher.run_once() == [ORDERS, APP_GROUPS]
    assert len(children(zk, "/kafka-acl-changes")) == 1  # young: kept
    clock.sleep(CHANGE_EXPIRATION_MS + 60_000)
    store.update(ORDERS, add(BOB_WRITE))  # created "now" by the server's clock
    assert watcher.run_once() == [ORDERS]
    # every node is older than 15 minutes by the watcher's clock
    assert children(zk, "/kafka-acl-changes") == []
    assert children(zk, "/kafka-acl-extended-changes") == []
