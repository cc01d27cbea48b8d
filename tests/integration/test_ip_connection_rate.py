"""The per-IP connection creation rate (KIP-612) against a real broker process: a
``connection_creation_rate`` set for 127.0.0.1 through AlterClientQuotas holds a storm of
new connections from it to the rate -- the excess closed by the broker at accept, at
once, with at most a line a second in the log -- while a connection already open keeps
being answered; once the rate has room again new connections are accepted; removing the
quota lifts it at once, and the default IP entity applies to an address without its own;
the quota holds from the start after a restart, and in a ZooKeeper cluster a quota set
through one broker holds on the other.
A broker without the quota accepts the same storm (the negative control).  The quota
half of ``millrace configs`` sets, shows and deletes ip quotas through the admin client
(called directly: ``millrace configs`` does not route ``--entity-type ips`` to it yet).

The brokers run with ``quota.window.num=2`` so the rate is measured over one to two
seconds: with Kafka's default of 11 one-second samples a new burst is averaged over ten
seconds, and a rate of 2 would admit the first 20 connections at once (the unit tests of
``connection_quotas`` cover that)."""

from __future__ import annotations

import argparse
import re
import socket
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import pytest

from millrace.cli import client_quotas
from millrace.cli.common import CommandError
from millrace.client.admin import (
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    KafkaAdminClient,
)
from millrace.launcher.local_cluster import LocalCluster
from millrace.protocol import ApiVersionsRequest
from millrace.protocol.types import AlterClientQuotasRequest
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.raw_connection import RawConnection
from tests.integration.test_connection_limits import StartBroker, broker_with

__all__ = ["broker_with"]  # the fixture, shared with the other connection limit tests

pytestmark = [pytest.mark.integration]

IO_TIMEOUT = 5.0
SHORT_WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
REFUSAL = "connection_creation_rate=2 reached"
API_VERSIONS_V0 = b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01x"


def _served(conn: RawConnection) -> bool:
    return bool(conn.call(ApiVersionsRequest(), 0).error_code == 0)


def _set_ip_rate(conn: RawConnection, ip: str | None, rate: float | None) -> None:
    """AlterClientQuotas v1 for one ip entity (None: the default); rate None removes."""
    e = AlterClientQuotasRequest.EntryData
    body = AlterClientQuotasRequest(validate_only=False, entries=[e(
        entity=[e.EntityData(entity_type="ip", entity_name=ip)],
        ops=[e.OpData(key="connection_creation_rate", value=rate or 0.0,
                      remove=rate is None)])])
    (result,) = conn.call(body, 1).entries
    assert (result.error_code, result.error_message) == (0, None)


def _storm(port: int, n: int, keeper: RawConnection) -> tuple[list[bool], list[float]]:
    """Open ``n`` connections as fast as possible, each sending ApiVersions, with the
    keeper asked between them; then whether each was closed without an answer, and how
    long each keeper answer took."""
    socks, answer_s = [], []
    try:
        for _ in range(n):
            sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
            socks.append(sock)
            with suppress(ConnectionResetError, BrokenPipeError):
                sock.sendall(API_VERSIONS_V0)
            start = time.monotonic()
            assert _served(keeper)
            answer_s.append(time.monotonic() - start)
        closed = []
        for sock in socks:
            try:
                closed.append(sock.recv(1024) == b"")
            except (ConnectionResetError, BrokenPipeError):
                closed.append(True)
        return closed, answer_s
    finally:
        for sock in socks:
            sock.close()


def _refusal_lines(broker: BrokerProcess) -> list[str]:
    return [line for line in broker.logs().splitlines()
            if "closing connection from 127.0.0.1" in line and REFUSAL in line]


def test_a_storm_over_the_ip_rate_is_closed_at_accept(broker_with: StartBroker) -> None:
    broker = broker_with(SHORT_WINDOW)
    with ExitStack() as stack:
        keeper = stack.enter_context(RawConnection(broker.port, timeout_s=IO_TIMEOUT))
        _set_ip_rate(keeper, "127.0.0.1", 2)
        started = time.monotonic()
        closed, answer_s = _storm(broker.port, 10, keeper)
        took = time.monotonic() - started
        assert took < 1.0, f"the storm took {took:.2f} s"  # else the rate had room again
        assert closed.count(False) == 2, closed  # the rate's two, the rest closed at once
        assert max(answer_s) < 1.0, answer_s  # the loop never stalled
        assert _served(keeper)
        time.sleep(0.2)
        lines = _refusal_lines(broker)
        assert 1 <= len(lines) <= 2, lines  # eight refusals, a line a second at most

        time.sleep(2.1)  # every sample of the storm has expired
        again = stack.enter_context(RawConnection(broker.port, timeout_s=IO_TIMEOUT))
        assert _served(again)
        assert broker.proc is not None and broker.proc.poll() is None


def test_without_the_quota_the_same_storm_is_accepted(broker_with: StartBroker) -> None:
    broker = broker_with(SHORT_WINDOW)
    with RawConnection(broker.port, timeout_s=IO_TIMEOUT) as keeper:
        closed, _ = _storm(broker.port, 10, keeper)
    assert closed == [False] * 10
    assert _refusal_lines(broker) == []


def test_removal_lifts_it_and_the_default_ip_entity_applies(broker_with: StartBroker
                                                            ) -> None:
    broker = broker_with(SHORT_WINDOW)
    with RawConnection(broker.port, timeout_s=IO_TIMEOUT) as keeper:
        _set_ip_rate(keeper, None, 2)  # ips/<default>
        closed, _ = _storm(broker.port, 6, keeper)
        assert closed.count(False) == 2, closed
        _set_ip_rate(keeper, "127.0.0.1", 100)  # its own entity wins over the default
        closed, _ = _storm(broker.port, 6, keeper)
        assert closed == [False] * 6
        _set_ip_rate(keeper, "127.0.0.1", None)  # back to the default's 2 ...
        _set_ip_rate(keeper, None, None)  # ... and that removed too: no limit
        closed, _ = _storm(broker.port, 10, keeper)
        assert closed == [False] * 10


def _quota_args(*pairs: tuple[str, str], **options: Any) -> argparse.Namespace:
    """What ``millrace configs --entity-type ips ...`` parses to (``""``: the default)."""
    base: dict[str, Any] = {"add_config": None, "delete_config": None, "zookeeper": None,
                            "validate_only": False, "output": "table"}
    repeated = {k: [v] for k, v in options.items() if k in ("add_config", "delete_config")}
    return argparse.Namespace(entity_types=[t for t, _ in pairs], entity_type=pairs[0][0],
                              entity_names=[n for _, n in pairs],
                              **{**base, **options, **repeated})


def test_the_configs_quota_commands_set_and_show_ip_quotas(
        broker_with: StartBroker, capsys: pytest.CaptureFixture[str]) -> None:
    """``client_quotas``' alter / describe (the ``millrace configs`` quota half) on ips,
    through the admin client; the refused forms say why before anything is sent."""
    broker = broker_with(SHORT_WINDOW)
    made: list[float] = []

    def admin(_args: argparse.Namespace) -> KafkaAdminClient:
        # each command's admin client opens up to two connections: a second apart they
        # stay within the 2/s this test gives 127.0.0.1 (closer, a refused connection
        # or two could make the client give up: it fails fast on an address that
        # refuses every attempt)
        if made:
            time.sleep(max(0.0, made[-1] + 1.1 - time.monotonic()))
        made.append(time.monotonic())
        return KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    assert client_quotas.alter(_quota_args(
        ("ips", "127.0.0.1"), add_config="connection_creation_rate=2"), admin) == 0
    assert client_quotas.alter(_quota_args(
        ("ips", ""), add_config="connection_creation_rate=30"), admin) == 0
    assert capsys.readouterr().out == (
        "Completed updating config for ip 127.0.0.1.\n"
        "Completed updating default config for ips in the cluster.\n")
    assert client_quotas.describe(_quota_args(("ips", "127.0.0.1")), admin) == 0
    assert client_quotas.describe(_quota_args(("ips", "")), admin) == 0
    assert capsys.readouterr().out == (
        "Quota configs for ip '127.0.0.1' are connection_creation_rate=2.0\n"
        "Quota configs for the default ip are connection_creation_rate=30.0\n")
    time.sleep(2.1)  # the admin clients' connections above counted against the rate too
    with RawConnection(broker.port, timeout_s=IO_TIMEOUT) as keeper:  # and it holds
        closed, _ = _storm(broker.port, 6, keeper)
        assert closed.count(False) == 1, closed  # the keeper was the first of two
    time.sleep(2.1)
    for args, message in (
            (_quota_args(("ips", "127.0.0.1"), add_config="producer_byte_rate=1"),
             "only quota configs (connection_creation_rate) can be set on this entity"),
            (_quota_args(("ips", "127.0.0.1"), ("users", "alice"),
                         add_config="connection_creation_rate=1"),
             "--entity-type ips cannot be combined with other entity types"),
            (_quota_args(("users", "alice"), add_config="connection_creation_rate=1"),
             "only quota configs (producer_byte_rate, consumer_byte_rate, "
             "request_percentage, controller_mutation_rate) can be set on this entity")):
        with pytest.raises(CommandError, match=re.escape(message)):
            client_quotas.alter(args, admin)
    assert client_quotas.alter(_quota_args(
        ("ips", "127.0.0.1"), delete_config="connection_creation_rate"), admin) == 0
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as a:
        left = a.describe_client_quotas(ClientQuotaFilter.contains_only(
            [ClientQuotaFilterComponent.of_entity_type("ip")]))
    assert left == {ClientQuotaEntity({"ip": None}): {"connection_creation_rate": 30.0}}


def test_an_ip_rate_set_through_one_broker_of_a_cluster_holds_on_another(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """In a ZooKeeper cluster (each broker loads the ip quotas when it starts serving and
    follows the config change notifications after): set through broker 1, broker 2
    refuses the storm."""
    directory: Path = tmp_path_factory.mktemp("ip-rate-cluster")
    with LocalCluster(directory, 2, overrides={**SHORT_WINDOW,
                                              "zookeeper.session.timeout.ms": "6000",
                                              "offsets.topic.replication.factor": "2",
                                              "transaction.state.log.replication.factor": "2",
                                              "transaction.state.log.min.isr": "1"}) as c:
        with RawConnection(c.brokers[1].port, timeout_s=IO_TIMEOUT) as admin:
            _set_ip_rate(admin, "127.0.0.1", 2)
        port = c.brokers[2].port
        deadline = time.monotonic() + 15
        while True:
            time.sleep(2.1)  # a fresh window for each try
            with RawConnection(port, timeout_s=IO_TIMEOUT) as keeper:
                closed, _ = _storm(port, 6, keeper)
            if closed.count(True) == 5 or time.monotonic() > deadline:
                break  # else the notification is still on its way
        assert closed.count(False) == 1, closed  # the keeper and one more: the rate's 2


def test_the_ip_rate_holds_from_the_start_after_a_restart(broker_with: StartBroker) -> None:
    """The quota is read back when the broker starts serving, before any connection."""
    broker = broker_with(SHORT_WINDOW)
    with RawConnection(broker.port, timeout_s=IO_TIMEOUT) as admin:
        _set_ip_rate(admin, "127.0.0.1", 2)
    broker.stop()
    broker.start()
    with RawConnection(broker.port, timeout_s=IO_TIMEOUT) as keeper:
        closed, _ = _storm(broker.port, 6, keeper)
    assert closed.count(False) == 1, closed  # the keeper and one more: the rate's 2
