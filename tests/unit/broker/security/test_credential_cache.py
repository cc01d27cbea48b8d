"""CredentialCache: only the enabled SCRAM mechanisms are cached, quota keys are ignored,
a user's update replaces what was cached; the stores keep Kafka's layout (the local
metadata file survives a restart, ZooKeeper gets sanitized names and a notification)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from millrace.broker.config import KafkaConfig
from millrace.broker.metadata.local_store import LocalMetadataStore
from millrace.broker.security.credential_cache import (
    CredentialCache,
    LocalUserConfigStore,
    ZkUserConfigStore,
    build_local_credential_cache,
    enabled_scram_mechanisms,
    scram_credentials_of,
)
from millrace.broker.zk_broker import changed_users
from millrace.security.sasl.scram import ScramFormatter, ScramMechanism

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
BOTH = {"SCRAM-SHA-256", "SCRAM-SHA-512"}


def cred(mechanism: ScramMechanism = SHA256, password: str = "secret", iterations: int = 4096,
         salt: bytes = b"salt") -> str:
    return ScramFormatter(mechanism).generate_credential(password, iterations, salt) \
        .to_kafka_string()


class DictStore:
    """A user config store in memory (what the cache and admin rules see of a store)."""

    blocking = False

    def __init__(self, users: dict[str, dict[str, str]] | None = None) -> None:
        self.users = users or {}
        self.writes: list[tuple[str, dict[str, str]]] = []

    def user_configs(self, user: str) -> dict[str, str]:
        return dict(self.users.get(user, {}))

    def users_with_configs(self) -> list[str]:
        return sorted(self.users)

    def set_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        self.writes.append((user, dict(configs)))
        self.users[user] = dict(configs)


def test_only_enabled_mechanisms_are_cached_and_quota_keys_ignored() -> None:
    cache = CredentialCache(["PLAIN", "scram-sha-256"], DictStore())
    assert cache.enabled_mechanisms == {"SCRAM-SHA-256"}
    cache.update_user("alice", {"SCRAM-SHA-256": cred(iterations=8192),
                                "SCRAM-SHA-512": cred(SHA512),
                                "producer_byte_rate": "1024"})
    got = cache.scram_credential("SCRAM-SHA-256", "alice")
    assert got is not None and got.iterations == 8192 and got.salt == b"salt"
    assert cache.scram_credential("SCRAM-SHA-512", "alice") is None
    assert cache.scram_credential("PLAIN", "alice") is None
    assert cache.scram_credential("SCRAM-SHA-256", "bob") is None
    assert cache.users_with_credentials() == ["alice"]


def test_an_update_replaces_and_drops_credentials() -> None:
    cache = CredentialCache(BOTH, DictStore())
    cache.update_user("bob", {"SCRAM-SHA-256": cred(), "SCRAM-SHA-512": cred(SHA512)})
    cache.update_user("alice", {"SCRAM-SHA-512": cred(SHA512)})
    assert cache.users_with_credentials() == ["alice", "bob"]
    cache.update_user("bob", {"SCRAM-SHA-512": cred(SHA512, iterations=5000)})
    assert cache.scram_credential("SCRAM-SHA-256", "bob") is None
    bob = cache.scram_credential("SCRAM-SHA-512", "bob")
    assert bob is not None and bob.iterations == 5000
    cache.update_user("bob", {"consumer_byte_rate": "10"})
    cache.remove_user("alice")
    assert cache.users_with_credentials() == []


def test_a_value_that_does_not_parse_drops_only_that_credential(
        caplog: pytest.LogCaptureFixture) -> None:
    cache = CredentialCache(BOTH, DictStore())
    cache.update_user("alice", {"SCRAM-SHA-256": cred(), "SCRAM-SHA-512": cred(SHA512)})
    cache.update_user("alice", {"SCRAM-SHA-256": "salt=AAAA,iterations=4096",
                                "SCRAM-SHA-512": cred(SHA512)})
    assert cache.scram_credential("SCRAM-SHA-256", "alice") is None
    assert cache.scram_credential("SCRAM-SHA-512", "alice") is not None
    assert "ignoring the SCRAM-SHA-256 credential of user 'alice'" in caplog.text


def test_load_and_reload_read_the_store() -> None:
    store = DictStore({"alice": {"SCRAM-SHA-256": cred()}, "<default>": {"x": "1"}})
    cache = CredentialCache(BOTH, store)
    cache.load()
    assert cache.users_with_credentials() == ["alice"]
    store.users["carol"] = {"SCRAM-SHA-512": cred(SHA512)}
    store.users["alice"] = {}
    asyncio.run(cache.reload_user("carol"))
    asyncio.run(cache.reload_user("alice"))
    assert cache.users_with_credentials() == ["carol"]


def test_scram_credentials_of_leaves_quota_keys_out() -> None:
    assert scram_credentials_of({"SCRAM-SHA-256": "a", "producer_byte_rate": "1",
                                 "SCRAM-SHA-1": "b"}) == {"SCRAM-SHA-256": "a"}


def test_enabled_mechanisms_come_from_every_listener() -> None:
    config = KafkaConfig({
        "log.dirs": "/tmp/unused", "node.id": 1,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="admin-secret";',
    })
    assert enabled_scram_mechanisms(config) == {"SCRAM-SHA-512"}


# ---------------------------------------------------------------------- stores
def test_local_store_keeps_user_configs_across_a_restart(tmp_path: Path) -> None:
    log_dir = str(tmp_path / "logs")
    metadata = LocalMetadataStore(log_dir, 1)
    store = LocalUserConfigStore(metadata)
    assert store.users_with_configs() == [] and store.user_configs("alice") == {}
    store.set_user_configs("alice", {"SCRAM-SHA-256": cred(), "producer_byte_rate": "5"})
    store.set_user_configs("bob", {"SCRAM-SHA-512": cred(SHA512)})
    store.set_user_configs("bob", {})  # an empty config removes the entity
    saved = json.loads((tmp_path / "logs" / LocalMetadataStore.FILE).read_text())
    assert saved["users"] == {"alice": {"SCRAM-SHA-256": cred(), "producer_byte_rate": "5"}}

    config = KafkaConfig({"log.dirs": log_dir, "node.id": 1,
                          "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    cache = build_local_credential_cache(config, LocalMetadataStore(log_dir, 1))
    assert cache.users_with_credentials() == ["alice"]
    assert cache.store.user_configs("alice")["producer_byte_rate"] == "5"


class FakeZk:
    """The KafkaZkClient calls the ZooKeeper store makes, recorded."""

    def __init__(self) -> None:
        self.entities: dict[tuple[str, str], dict[str, str]] = {}
        self.notifications: list[str] = []

    def get_entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        return dict(self.entities.get((entity_type, name), {}))

    def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return [n for t, n in self.entities if t == entity_type]

    def set_or_create_entity_configs(self, entity_type: str, name: str,
                                     configs: Mapping[str, str]) -> None:
        self.entities[(entity_type, name)] = dict(configs)

    def create_config_change_notification(self, entity_path: str) -> str:
        self.notifications.append(entity_path)
        return f"{len(self.notifications):010d}"


def test_zookeeper_store_sanitizes_names_and_notifies() -> None:
    zk = FakeZk()
    store = ZkUserConfigStore(zk)  # type: ignore[arg-type]
    assert store.blocking
    store.set_user_configs("CN=alice smith,O=*", {"SCRAM-SHA-256": "v"})
    assert list(zk.entities) == [("users", "CN%3Dalice%20smith%2CO%3D%2A")]
    assert zk.notifications == ["users/CN%3Dalice%20smith%2CO%3D%2A"]
    assert store.users_with_configs() == ["CN=alice smith,O=*"]
    assert store.user_configs("CN=alice smith,O=*") == {"SCRAM-SHA-256": "v"}
    zk.entities[("users", "bad%zz")] = {"SCRAM-SHA-256": "v"}  # not a sanitized name
    assert store.users_with_configs() == ["CN=alice smith,O=*"]


@pytest.mark.parametrize(("paths", "users"), [
    (["topics/t", "users/alice", "users/alice"], ["alice"]),
    (["users/CN%3Dbob%20x", "users/carol/clients/app", "clients/app", "users/"],
     ["CN=bob x"]),
    (["users/bad%zz", "users/dave"], ["dave"]),
])
def test_change_notifications_name_users(paths: list[str], users: list[str]) -> None:
    assert changed_users(paths) == users


def test_run_store_runs_a_blocking_store_off_the_loop() -> None:
    import threading

    seen: dict[str, Any] = {}

    class Blocking(DictStore):
        blocking = True

    async def main() -> None:
        loop_thread = threading.get_ident()
        for store, key in ((DictStore(), "inline"), (Blocking(), "executor")):
            cache = CredentialCache(BOTH, store)
            seen[key] = await cache.run_store(threading.get_ident) == loop_thread

    asyncio.run(main())
    assert seen == {"inline": True, "executor": False}


def test_reloads_apply_in_order_of_reading() -> None:
    """A slow read that began before a change must not land after the read that saw it."""
    import threading
    import time

    class SlowFirstRead(DictStore):
        blocking = True

        def __init__(self) -> None:
            super().__init__({"alice": {"SCRAM-SHA-256": cred(iterations=4096)}})
            self.reads = 0
            self.first_read_taken = threading.Event()

        def user_configs(self, user: str) -> dict[str, str]:
            snapshot = super().user_configs(user)  # what ZooKeeper held when asked
            self.reads += 1
            if self.reads == 1:
                self.first_read_taken.set()
                time.sleep(0.2)
            return snapshot

    store = SlowFirstRead()
    cache = CredentialCache(BOTH, store)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(cache.reload_user("alice"))
        await loop.run_in_executor(None, store.first_read_taken.wait)
        store.users["alice"] = {"SCRAM-SHA-256": cred(iterations=9999)}  # the change
        await asyncio.gather(first, cache.reload_user("alice"))

    asyncio.run(main())
    got = cache.scram_credential("SCRAM-SHA-256", "alice")
    assert got is not None and got.iterations == 9999


def test_reload_reads_every_user_again() -> None:
    store = DictStore({"alice": {"SCRAM-SHA-256": cred()}, "bob": {"SCRAM-SHA-512": cred(SHA512)}})
    cache = CredentialCache(BOTH, store)
    cache.load()
    del store.users["alice"]
    store.users["carol"] = {"SCRAM-SHA-256": cred(iterations=5000)}
    asyncio.run(cache.reload())
    assert cache.users_with_credentials() == ["bob", "carol"]
