"""``LocalAclStore`` over the single node's metadata file (kept across a restart, beside
the topics and users), and ``ZkAclStore``'s read-modify-write rules against an in-memory
stand-in for ``KafkaZkClient`` (the real ZooKeeper is in tests/integration/zk)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from millrace.broker.metadata.local_store import LocalMetadataStore
from millrace.broker.security.acl_store import LocalAclStore, ZkAclStore
from millrace.broker.zk import KafkaZkClient, ZkError
from millrace.broker.zk import zk_data as zd
from millrace.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
APP_GROUPS = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
ALICE_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
BOB_WRITE = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE,
                               AclPermissionType.DENY)


def add(*entries: AccessControlEntry) -> Any:
    return lambda current: current | set(entries)


def remove(*entries: AccessControlEntry) -> Any:
    return lambda current: current - set(entries)


# ---------------------------------------------------------------------------- local
def test_local_store_survives_a_restart(tmp_path: Path) -> None:
    metadata = LocalMetadataStore(str(tmp_path), 1)
    metadata.create_topic("orders", {0: [1]}, {})
    metadata.set_user_configs("alice", {"SCRAM-SHA-256": "x"})
    store = LocalAclStore(metadata)
    assert store.update(ORDERS, add(ALICE_READ, BOB_WRITE)) == {ALICE_READ, BOB_WRITE}
    assert store.update(APP_GROUPS, add(ALICE_READ)) == {ALICE_READ}

    reloaded = LocalMetadataStore(str(tmp_path), 1)
    again = LocalAclStore(reloaded)
    assert again.load() == {ORDERS: {ALICE_READ, BOB_WRITE}, APP_GROUPS: {ALICE_READ}}
    assert again.get(ORDERS) == {ALICE_READ, BOB_WRITE}
    assert again.get(ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED)) == set()
    # the rest of the file is untouched
    assert "orders" in reloaded.topics
    assert reloaded.user_configs("alice") == {"SCRAM-SHA-256": "x"}


def test_local_store_file_holds_kafkas_znode_json(tmp_path: Path) -> None:
    store = LocalAclStore(LocalMetadataStore(str(tmp_path), 1))
    store.update(APP_GROUPS, add(ALICE_READ))
    store.update(ORDERS, add(ALICE_READ))
    with open(tmp_path / LocalMetadataStore.FILE, encoding="utf-8") as f:
        records = json.load(f)["acls"]
    assert [(r["patternType"], r["resourceType"], r["name"]) for r in records] == \
        [("LITERAL", "Topic", "orders"), ("PREFIXED", "Group", "app-")]
    assert records[0]["data"]["version"] == 1
    assert records[0]["data"]["acls"] == [{"principal": "User:alice", "permissionType": "Allow",
                                           "operation": "Read", "host": "*"}]


def test_local_store_removing_the_last_entry_drops_the_pattern(tmp_path: Path) -> None:
    store = LocalAclStore(LocalMetadataStore(str(tmp_path), 1))
    store.update(ORDERS, add(ALICE_READ, BOB_WRITE))
    assert store.update(ORDERS, remove(ALICE_READ)) == {BOB_WRITE}
    assert store.update(ORDERS, remove(BOB_WRITE)) == set()
    assert store.load() == {}
    with open(tmp_path / LocalMetadataStore.FILE, encoding="utf-8") as f:
        assert "acls" not in json.load(f)
    assert LocalAclStore(LocalMetadataStore(str(tmp_path), 1)).load() == {}


def test_local_watch_reports_changes_only_while_started(tmp_path: Path) -> None:
    store = LocalAclStore(LocalMetadataStore(str(tmp_path), 1))
    seen: list[list[ResourcePattern]] = []
    watcher = store.watch(seen.append)
    store.update(ORDERS, add(ALICE_READ))
    assert seen == []  # not started yet
    watcher.start()
    store.update(ORDERS, add(BOB_WRITE))
    store.update(ORDERS, add(BOB_WRITE))  # no change: no write, no callback
    store.update(APP_GROUPS, add(ALICE_READ))
    assert seen == [[ORDERS], [APP_GROUPS]]
    watcher.stop()
    store.update(ORDERS, remove(ALICE_READ))
    assert seen == [[ORDERS], [APP_GROUPS]]


# ---------------------------------------------------------------------------- ZooKeeper rules
class FakeZk:
    """A pattern's znode as (entries, version); ``lose`` makes that many writes find the
    version moved (another writer got there first)."""

    def __init__(self) -> None:
        self.znodes: dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]] = {}
        self.notifications: list[ResourcePattern] = []
        self.lose = 0
        self.writes = 0

    def get_versioned_acls(self, pattern: ResourcePattern) -> zd.VersionedAcls:
        got = self.znodes.get(pattern)
        return zd.VersionedAcls(*got) if got else zd.NO_ACLS

    def _race(self) -> bool:
        self.writes += 1
        if self.lose:
            self.lose -= 1
            return True
        return False

    def conditional_set_acls(self, pattern: ResourcePattern, entries: Any,
                             expected_version: int) -> int | None:
        if self._race() or self.znodes[pattern][1] != expected_version:
            return None
        self.znodes[pattern] = (frozenset(entries), expected_version + 1)
        return expected_version + 1

    def create_acls_if_not_exists(self, pattern: ResourcePattern, entries: Any) -> bool:
        if self._race() or pattern in self.znodes:
            return False
        self.znodes[pattern] = (frozenset(entries), 0)
        return True

    def conditional_delete_acls(self, pattern: ResourcePattern, expected_version: int) -> bool:
        if self._race():
            return False
        self.znodes.pop(pattern, None)
        return True

    def create_acl_change_notification(self, pattern: ResourcePattern) -> str:
        self.notifications.append(pattern)
        return f"{len(self.notifications) - 1:010d}"


def zk_store(fake: FakeZk, sleeps: list[float]) -> ZkAclStore:
    return ZkAclStore(cast(KafkaZkClient, fake), sleep=sleeps.append)


def test_zk_update_creates_sets_deletes_and_notifies_on_change_only() -> None:
    fake, sleeps = FakeZk(), []
    store = zk_store(fake, sleeps)
    store.update(ORDERS, add(ALICE_READ))
    assert fake.znodes[ORDERS] == ({ALICE_READ}, 0)
    store.update(ORDERS, add(BOB_WRITE))
    assert fake.znodes[ORDERS] == ({ALICE_READ, BOB_WRITE}, 1)
    store.update(ORDERS, add(BOB_WRITE))  # a write, but nothing changed: no notification
    store.update(ORDERS, remove(ALICE_READ, BOB_WRITE))
    assert ORDERS not in fake.znodes
    store.update(ORDERS, remove(ALICE_READ))  # nothing there, nothing to write
    assert fake.notifications == [ORDERS, ORDERS, ORDERS]
    assert sleeps == []


def test_zk_update_retries_a_lost_race_with_kafkas_backoff() -> None:
    fake, sleeps = FakeZk(), []
    store = zk_store(fake, sleeps)
    calls: list[set[AccessControlEntry]] = []

    def fn(current: set[AccessControlEntry]) -> set[AccessControlEntry]:
        calls.append(set(current))
        return current | {ALICE_READ}

    fake.lose = 3
    assert store.update(ORDERS, fn) == {ALICE_READ}
    assert len(calls) == 4 and fake.writes == 4
    assert len(sleeps) == 3 and all(0.100 <= s < 0.150 for s in sleeps)


def test_zk_update_gives_up_after_ten_retries() -> None:
    fake, sleeps = FakeZk(), []
    store = zk_store(fake, sleeps)
    fake.lose = 100
    with pytest.raises(ZkError, match="maximum of 10 times"):
        store.update(ORDERS, add(ALICE_READ))
    assert fake.writes == 11  # AclAuthorizer: retries <= maxUpdateRetries
    assert fake.notifications == []
