"""A cluster whose only listeners are SASL_SSL (``DevSecurity``: a fresh CA, SCRAM-SHA-512
users created in ZooKeeper before the brokers start): clients and replication both go
over TLS with SASL, an acks=all producer loses nothing when a leader is killed, and
no broker ever opens a connection in clear."""

from __future__ import annotations

import re
from pathlib import Path

from cluster_support import (
    ClusterFactory,
    acked_across_a_leader_kill,
    admin,
    consume_all,
    create_topic,
    wait_in_sync,
)
from confluent_kafka.admin import AdminClient

from millrace.launcher.local_cluster import LocalCluster

# how a handshake ends when its peer process is killed: nothing about TLS itself
DROPPED = re.compile(r"failed: (ConnectionResetError|ConnectionAbortedError|"
                     r"BrokenPipeError|SSLEOFError|SSLZeroReturnError|"
                     r"no handshake within)")


def _client_config(cluster: LocalCluster) -> dict[str, str]:
    props = cluster.client_properties()
    props.pop("bootstrap.servers")
    return props


def test_sasl_ssl_only_cluster_survives_a_leader_kill9(fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(secured=True)
    config = _client_config(cluster)
    assert config["security.protocol"] == "SASL_SSL"
    client = admin(cluster.bootstrap, config)
    view = create_topic(client, "secure-ledger", 3, 3, {"min.insync.replicas": "2"})
    victim = view[0].leader
    acked = acked_across_a_leader_kill(cluster, "secure-ledger", victim, config, count=200)
    total = sum(len(v) for v in acked.values())
    cluster.restart_broker(victim)
    wait_in_sync(client, "secure-ledger", 3)  # the restarted broker replicated over SASL_SSL
    got = consume_all(cluster.bootstrap, "secure-ledger", 3, total, config=config)
    assert got == acked
    # Nobody talked in clear or with a bad certificate or password: the only failed
    # handshakes a broker logged are connections the killed broker dropped half-way
    # (reset / EOF), there was no authentication failure, and no broker has a PLAINTEXT
    # listener to fall back to.
    for broker_id, broker in cluster.brokers.items():
        text = Path(broker.log_path).read_text(errors="replace")
        for line in text.splitlines():
            if "TLS handshake with" in line:
                assert DROPPED.search(line), f"broker {broker_id}: {line}"
        assert "authentication of" not in text, f"broker {broker_id}"
        assert not re.search(r"listening on .*PLAINTEXT", text)


def test_a_client_without_credentials_gets_nothing(fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(brokers=1, overrides={"offsets.topic.replication.factor": "1",
                                                  "default.replication.factor": "1",
                                                  "min.insync.replicas": "1"},
                            secured=True)
    config = _client_config(cluster)
    errors: list[str] = []
    wrong = AdminClient({"bootstrap.servers": cluster.bootstrap,
                         **{**config, "sasl.password": "not-the-password"},
                         "error_cb": lambda e: errors.append(str(e))})
    md = None
    try:
        md = wrong.list_topics(timeout=5)
    except Exception as e:  # librdkafka: a transport/authentication failure
        errors.append(str(e))
    assert md is None
    for _ in range(10):  # error_cb runs from poll()
        wrong.poll(0.2)
        if errors[1:]:
            break
    assert any("Authentication" in e or "SASL" in e for e in errors), errors
    good = admin(cluster.bootstrap, config)
    assert good.list_topics(timeout=10).brokers
