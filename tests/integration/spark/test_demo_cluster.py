"""``millrace demo --brokers 3`` as a user runs it: ZooKeeper and three brokers, the topic
replicated three times with min.insync.replicas=2, the leader of one partition killed with
SIGKILL half-way through producing -- and still every row of the database verified; and
the same with ``--security sasl_ssl``, every listener SASL_SSL (replication included) and
every client -- admin, producer, Spark's driver and workers -- a SCRAM-SHA-512 user.

CI runs the secured demo, and checks in that one run what the plaintext run checks too
(every broker's /metrics and the console scraped while the cluster serves, the leader kill's
note, the data dir's layout): the code path is the same but for the security settings.  The
plaintext run is in the long profile (``scripts/pipeline-soak.sh`` runs it); CI also runs
the pipeline on a plaintext 3-broker cluster through a leader kill
(``test_cluster_restarts.py``)."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR
from tests.integration.spark.test_demo import demo, demo_scraping

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)


# long profile: the secured run below checks all of this as well (module docstring)
@pytest.mark.long
def test_demo_on_three_brokers_survives_a_leader_kill(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    result, scraped, consoles = demo_scraping("--brokers", "3", "--events", "3000",
                                              "--partitions", "3", "--data-dir", str(data),
                                              "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["brokers"] == 3 and doc["events_total"] == 3000
    # every broker's /metrics printed, one port each, scraped while the cluster served
    assert sorted(doc["metrics_urls"]) == ["1", "2", "3"]
    assert sorted(scraped) == sorted(doc["metrics_urls"].values())
    assert len(set(scraped)) == 3
    assert list(consoles.values()) == [3], result.stderr   # the console saw all three
    assert all(any(n.startswith("kafka_") for n in names) for names in scraped.values())
    assert doc["pipeline_input_rows"] == 3000  # nothing lost, nothing twice
    assert doc["verification"]["passed"] is True, doc["verification"]
    assert doc["verification"]["orders_actual"] == doc["verification"]["orders_expected"] > 0
    killed = [n for n in doc["notes"] if n.startswith("killed broker ")]
    assert len(killed) == 1 and "(kill -9), the leader of orders-" in killed[0], doc["notes"]
    assert "fault killed broker " in result.stderr
    assert sorted(p.name for p in (data / "cluster").iterdir()) == [
        "broker-1", "broker-2", "broker-3", "zookeeper"]


def test_cluster_demo_needs_three_brokers(tmp_path: Path) -> None:
    result = demo("--brokers", "2", "--events", "10", "--data-dir", str(tmp_path / "d"),
                  timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --brokers 2: the cluster demo needs at least 3 brokers (replication factor "
        "3) and starts them itself (no --bootstrap-server)")


def test_demo_on_a_sasl_ssl_cluster_survives_a_leader_kill(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    security = data / "cluster" / "security"

    def client_user() -> tuple[str, str]:  # every route but the probes wants a SASL user
        return "client", json.loads((security / "users.json").read_text())["client"]

    result, scraped, consoles = demo_scraping("--brokers", "3", "--security", "sasl_ssl",
                                              "--events", "3000", "--partitions", "3",
                                              "--data-dir", str(data), "--output", "json",
                                              auth=client_user)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["security_protocol"] == "SASL_SSL" and doc["brokers"] == 3
    assert doc["pipeline_input_rows"] == 3000 == doc["events_total"]
    assert doc["verification"]["passed"] is True, doc["verification"]
    assert doc["verification"]["orders_actual"] == doc["verification"]["orders_expected"] > 0
    assert any(n.startswith("killed broker ") for n in doc["notes"]), doc["notes"]
    assert "(SASL_SSL, SCRAM-SHA-512)" in result.stderr
    # what the plaintext run (long profile) checks, checked here too: every broker's
    # /metrics printed, one port each, scraped while the cluster served
    assert sorted(doc["metrics_urls"]) == ["1", "2", "3"]
    assert sorted(scraped) == sorted(doc["metrics_urls"].values())
    assert len(set(scraped)) == 3
    assert list(consoles.values()) == [3], result.stderr   # the console saw all three
    assert all(any(n.startswith("kafka_") for n in names) for names in scraped.values())
    killed = [n for n in doc["notes"] if n.startswith("killed broker ")]
    assert len(killed) == 1 and "(kill -9), the leader of orders-" in killed[0], doc["notes"]
    assert "fault killed broker " in result.stderr
    assert sorted(p.name for p in (data / "cluster").iterdir()) == [
        "broker-1", "broker-2", "broker-3", "security", "zookeeper"]

    properties = Path(doc["client_properties"])
    assert properties == security / "client.properties"
    assert stat.S_IMODE(properties.stat().st_mode) == 0o600  # it holds a password
    password = json.loads((security / "users.json").read_text())["client"]
    assert f"sasl.password={password}" in properties.read_text()
    assert password not in result.stdout + result.stderr
    for broker in ("broker-1", "broker-2", "broker-3"):
        log = (data / "cluster" / broker / "broker.log").read_text(errors="replace")
        assert "SASL_SSL://127.0.0.1:" in log and "PLAINTEXT://" not in log, broker
        assert "CRC mismatch" not in log, broker  # fetches over TLS send the right bytes


def test_security_needs_the_cluster_demo(tmp_path: Path) -> None:
    result = demo("--security", "sasl_ssl", "--events", "10", "--data-dir",
                  str(tmp_path / "d"), timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --security sasl_ssl secures the demo's own cluster: use it with --brokers 3 "
        "(for a secured cluster of your own, give --bootstrap-server and --command-config)")
