"""Two schema registries on a secured 3-broker cluster (SASL_SSL, SCRAM users in
ZooKeeper): the writer is killed with kill -9 while registrations are in flight through
both instances; the other takes over, and nothing acknowledged is lost, no id changes, no
id names two schemas -- checked against the instances' answers and against the
``_schemas`` topic itself."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from cluster_support import ClusterFactory

from millrace.client.cluster import TopicPartition
from millrace.client.consumer import KafkaConsumer
from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.schema_registry import SchemaRegistryProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONTENT = "application/vnd.schemaregistry.v1+json"


class Api:
    def __init__(self, url: str, user_info: str) -> None:
        self.url = url
        self.auth = "Basic " + base64.b64encode(user_info.encode()).decode()

    def call(self, path: str, method: str = "GET", body: Any = None,
             auth: bool = True) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": CONTENT, **({"Authorization": self.auth} if auth else {})}
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw) if raw else None
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def is_leader(self) -> bool:
        request = urllib.request.Request(self.url + "/metrics",
                                         headers={"Authorization": self.auth})
        with urllib.request.urlopen(request, timeout=30) as response:
            return "kafka_schema_registry_master_slave_role 1.0" in response.read().decode()


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "fields": [
        {"name": "f", "type": "long"}]})


class Registrar(threading.Thread):
    """Registers schema i under subject s<i> (and, every third, schema i-1 again under
    c<i>: an id shared across subjects), alternating between the instances and retrying a
    registration on errors, as a client with both URLs does, until it is acknowledged."""

    def __init__(self, apis: list[Api]) -> None:
        super().__init__(daemon=True)
        self.apis = apis
        self.acked: list[tuple[str, str, int]] = []  # (subject, schema, id)
        self.failures: list[str] = []
        self.stop_event = threading.Event()

    def register(self, subject: str, text: str, turn: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            api = self.apis[turn % len(self.apis)]
            try:
                status, body = api.call(f"/subjects/{subject}/versions", "POST", {"schema": text})
            except (urllib.error.URLError, OSError) as e:
                status, body = 0, str(e)
            if status == 200:
                self.acked.append((subject, text, body["id"]))
                return
            self.failures.append(f"{api.url} {status} {body}")
            turn += 1
            time.sleep(0.2)
        raise AssertionError(f"{subject} never registered: {self.failures[-3:]}")

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            self.register(f"s{i}", schema(i), i)
            if i % 3 == 2:
                self.register(f"c{i}", schema(i - 1), i + 1)
            i += 1


def read_schemas_topic(cluster: LocalCluster) -> dict[tuple[str, int], tuple[int, str]]:
    """(subject, version) -> (id, schema) as the committed records of _schemas say."""
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(config={
        **cluster.client_properties("admin"), "isolation.level": "read_committed",
        "enable.auto.commit": False})
    tp = TopicPartition("_schemas", 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning([tp])
        end = consumer.end_offsets([tp])[tp]
        out: dict[tuple[str, int], tuple[int, str]] = {}
        while consumer.position(tp) < end:
            for r in consumer.poll(1000):
                key = json.loads(r.key)
                if key["keytype"] == "SCHEMA" and r.value is not None:
                    value = json.loads(r.value)
                    previous = out.get((key["subject"], key["version"]))
                    assert previous in (None, (value["id"], value["schema"])), \
                        f"{key} was written twice with different schemas"
                    out[(key["subject"], key["version"])] = (value["id"], value["schema"])
        return out
    finally:
        consumer.close()


def problems(acked: list[tuple[str, str, int]],
             topic: dict[tuple[str, int], tuple[int, str]]) -> list[str]:
    """What is wrong between the acknowledged registrations and the topic: a schema with
    two ids, an id with two schemas, an acknowledged registration missing."""
    found = []
    ids_of: dict[str, set[int]] = {}
    schemas_of: dict[int, set[str]] = {}
    for _, text, schema_id in acked:
        ids_of.setdefault(text, set()).add(schema_id)
    for schema_id, text in topic.values():
        ids_of.setdefault(text, set()).add(schema_id)
        schemas_of.setdefault(schema_id, set()).add(text)
    found += [f"schema {t} has ids {sorted(i)}" for t, i in ids_of.items() if len(i) > 1]
    found += [f"id {i} names {len(t)} schemas" for i, t in schemas_of.items() if len(t) > 1]
    in_topic = {(subject, schema_id) for (subject, _), (schema_id, _) in topic.items()}
    found += [f"{subject} (id {schema_id}) acknowledged but not in _schemas"
              for subject, _, schema_id in acked if (subject, schema_id) not in in_topic]
    return found


def test_the_checker_catches_a_lost_registration_and_a_reused_id() -> None:
    acked = [("s0", schema(0), 1), ("s1", schema(1), 2)]
    topic = {("s0", 1): (1, schema(0)), ("s1", 1): (2, schema(1))}
    assert problems(acked, topic) == []
    assert problems([*acked, ("s2", schema(2), 3)], topic) == [
        "s2 (id 3) acknowledged but not in _schemas"]
    reused = {**topic, ("s2", 1): (2, schema(2))}
    assert "id 2 names 2 schemas" in problems(acked, reused)


def test_the_writer_killed_mid_registration_loses_nothing(fresh_cluster: ClusterFactory,
                                                          tmp_path: Path) -> None:
    cluster = fresh_cluster(secured=True)
    assert cluster.security is not None
    kafka = {f"kafkastore.{k}": v for k, v in cluster.client_properties("admin").items()
             if k != "bootstrap.servers"}
    props = {**kafka, "authentication.method": "BASIC",
             "authentication.scram.zookeeper.connect": cluster.zookeeper_connect}
    password = cluster.security.passwords["client"]
    with SchemaRegistryProcess(cluster.bootstrap, tmp_path / "a", properties=props) as a, \
            SchemaRegistryProcess(cluster.bootstrap, tmp_path / "b", properties=props) as b:
        api = {a: Api(a.url, f"client:{password}"), b: Api(b.url, f"client:{password}")}
        # the registry's own Kafka password is in a 0600 file, not on its command line
        admin_password = cluster.security.passwords["admin"]
        assert admin_password not in Path(f"/proc/{a.pid}/cmdline").read_text()
        assert a.config_path.stat().st_mode & 0o077 == 0
        # credentials are the brokers' SCRAM users: a wrong password or none is 401
        assert Api(a.url, "client:wrong").call("/subjects")[0] == 401
        assert api[a].call("/subjects", auth=False)[0] == 401
        deadline = time.monotonic() + 60
        while not (api[a].is_leader() or api[b].is_leader()):
            assert time.monotonic() < deadline, "no leader elected"
            time.sleep(0.2)
        leader, follower = (a, b) if api[a].is_leader() else (b, a)
        registrar = Registrar([api[follower], api[leader]])  # forwarded and direct
        registrar.start()
        deadline = time.monotonic() + 120
        while len(registrar.acked) < 12:
            assert registrar.is_alive() and time.monotonic() < deadline, registrar.failures[-3:]
            time.sleep(0.05)
        leader.kill()  # kill -9, registrations in flight
        killed_at = len(registrar.acked)
        deadline = time.monotonic() + 180
        while len(registrar.acked) < killed_at + 12:
            assert registrar.is_alive() and time.monotonic() < deadline, registrar.failures[-3:]
            time.sleep(0.1)
        registrar.stop_event.set()
        registrar.join(150)
        assert api[follower].is_leader()
        acked = registrar.acked
        assert registrar.failures, "the kill interrupted no registration"
        assert problems(acked, read_schemas_topic(cluster)) == []
        for subject, _, schema_id in acked:  # the survivor answers what was acknowledged
            status, body = api[follower].call(f"/subjects/{subject}/versions/latest")
            assert status == 200 and body["id"] == schema_id, (subject, body)
        # the killed instance restarts and answers the same
        leader.start()
        for subject, _, schema_id in acked:
            status, body = api[leader].call(f"/subjects/{subject}/versions/latest")
            assert status == 200 and body["id"] == schema_id
    assert password not in a.logs() + b.logs()
