"""millrace's own transaction admin and ``millrace transactions`` against a real broker
process, on the state librdkafka leaves there (one transaction open, one committed),
compared with kafka-python 3's admin answers for the same state; then the open one is
aborted with the CLI and a read_committed consumer gets past it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from millrace.client.admin import KafkaAdminClient, TopicPartition, TransactionState
from millrace.testing.broker_process import BrokerProcess
from tests.integration.test_transactions_admin import TOPIC, _open_and_committed, _read_committed

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient as KpAdminClient
    from kafka import TopicPartition as KpTopicPartition

pytestmark = [pytest.mark.integration]

TP0 = TopicPartition(TOPIC, 0)


def cli(broker: BrokerProcess, *args: str) -> str:
    env = {**os.environ, "MILLRACE_BOOTSTRAP": broker.bootstrap}
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", "transactions", *args],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_admin_and_cli_against_librdkafka_transactions(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "b") as broker, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        opened = _open_and_committed(broker.bootstrap)
        theirs = KpAdminClient(bootstrap_servers=broker.bootstrap)
        ours = KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                                default_api_timeout_ms=15_000)
        try:
            # list: the same transactions as kafka-python sees, with their coordinator
            listed = ours.list_transactions()
            their_list = theirs.list_transactions()[0]
            assert [(t.transactional_id, t.producer_id, str(t.state)) for t in listed] == \
                sorted((t.transactional_id, t.producer_id, t.state.value) for t in their_list)
            assert {(t.transactional_id, t.state, t.coordinator_id) for t in listed} == {
                ("open-1", TransactionState.ONGOING, 0),
                ("done-1", TransactionState.COMPLETE_COMMIT, 0)}
            assert [t.transactional_id for t in ours.list_transactions(
                states=["Ongoing"])] == ["open-1"]
            assert [t.transactional_id for t in ours.list_transactions(
                transactional_id_pattern="done-.*")] == ["done-1"]

            # describe: field for field what kafka-python answers
            described = ours.describe_transactions(["open-1", "done-1", "nobody"])
            their_described = theirs.describe_transactions(["open-1", "done-1"])
            for tid in ("open-1", "done-1"):
                mine, other = described[tid].result(), their_described[tid]
                assert (mine.producer_id, mine.producer_epoch, str(mine.state),
                        mine.transaction_timeout_ms) == (
                    other.producer_id, other.producer_epoch, other.state.value,
                    other.transaction_timeout_ms)
                assert {(tp.topic, tp.partition) for tp in mine.topic_partitions} == \
                    {(tp.topic, tp.partition) for tp in other.topic_partitions}
            open_d = described["open-1"].result()
            assert open_d.topic_partitions == {TP0}
            assert open_d.transaction_timeout_ms == 600_000
            assert open_d.transaction_start_time_ms is not None
            assert described["nobody"].exception().code == 105  # TRANSACTIONAL_ID_NOT_FOUND

            # describe-producers: same producers and open-transaction offsets
            [mine_p] = ours.describe_producers([TP0]).all().values()
            [their_p] = theirs.describe_producers([KpTopicPartition(TOPIC, 0)]).values()
            assert sorted((p.producer_id, p.producer_epoch, p.current_transaction_start_offset)
                          for p in mine_p.active_producers) == sorted(
                (p.producer_id, p.producer_epoch,
                 p.current_transaction_start_offset if p.current_transaction_start_offset >= 0
                 else None) for p in their_p.active_producers)
            starts = {p.producer_id: p.current_transaction_start_offset
                      for p in mine_p.active_producers}
            assert starts[open_d.producer_id] == 0
        finally:
            theirs.close()
            ours.close()

        # the CLI on the same state
        rows = [line.split() for line in cli(broker, "list").splitlines()]
        assert rows == [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                        ["done-1", "0", str(described["done-1"].result().producer_id),
                         "CompleteCommit"],
                        ["open-1", "0", str(open_d.producer_id), "Ongoing"]]
        [row] = cli(broker, "describe", "--transactional-id", "open-1").splitlines()[1:]
        assert row.split()[:6] + row.split()[-1:] == [
            "0", "open-1", str(open_d.producer_id), str(open_d.producer_epoch), "Ongoing",
            "600000", f"{TOPIC}-0"]
        producers = json.loads(cli(broker, "describe-producers", "--topic", TOPIC,
                                   "--partition", "0", "-o", "json"))
        assert {p["producer_id"]: p["current_transaction_start_offset"]
                for p in producers} == starts
        # the open transaction is known to its coordinator: not hanging, however old
        assert cli(broker, "find-hanging", "--broker-id", "0",
                   "--max-transaction-timeout", "0").splitlines()[1:] == []

        # it holds the LSO: read_committed sees nothing until the CLI aborts it
        assert _read_committed(broker.bootstrap, 3) == []
        out = cli(broker, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0")
        assert out == (f"Aborted the transaction of producer {open_d.producer_id} (epoch "
                       f"{open_d.producer_epoch}) on {TOPIC}-0.\n")
        assert _read_committed(broker.bootstrap, 3) == [b"committed"]
        del opened
