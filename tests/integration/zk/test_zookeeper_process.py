"""``ZooKeeperProcess``: a real server that restarts on its port and data, freezes with
SIGSTOP (clients see their connection suspended, then back) and dies with SIGKILL."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from millrace.broker.zk import KafkaZkClient
from millrace.launcher.zookeeper_process import ZooKeeperProcess, four_letter_word

pytestmark = [pytest.mark.integration]


def test_config_file_and_log(tmp_path: Path) -> None:
    zk = ZooKeeperProcess(tmp_path, port=41234, tick_time_ms=250)
    assert zk.connect_string == "127.0.0.1:41234"
    assert zk.config() == {
        "tickTime": "250",
        "dataDir": str((tmp_path / "data").resolve()),
        "clientPort": "41234",
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "minSessionTimeout": "500",
        "maxSessionTimeout": "18000",
        "maxClientCnxns": "0",
        "4lw.commands.whitelist": "srvr,ruok,stat,cons",
    }


def test_restart_keeps_data_and_port_pause_suspends_kill_stops(tmp_path: Path) -> None:
    zk = ZooKeeperProcess(tmp_path)
    with zk:
        assert "Mode: standalone" in four_letter_word(zk.host, zk.port, "srvr")
        assert f"binding to port /127.0.0.1:{zk.port}" in zk.logs()  # slf4j-simple logs
        states: queue.Queue[str] = queue.Queue()
        with KafkaZkClient(zk.connect_string, session_timeout_ms=6000) as client:
            client.add_state_listener(states.put)
            cluster_id = client.create_or_get_cluster_id()

            zk.pause()
            assert not zk.serving()
            assert states.get(timeout=15) == "SUSPENDED"
            zk.resume()
            assert states.get(timeout=15) == "CONNECTED"
            assert client.get_cluster_id() == cluster_id

        port, pid = zk.port, zk.pid
        zk.restart()
        assert (zk.port, zk.running()) == (port, True) and zk.pid != pid
        with KafkaZkClient(zk.connect_string) as client:
            assert client.get_cluster_id() == cluster_id

        zk.kill()
        assert not zk.running() and not zk.serving()
        assert zk.proc is not None and zk.proc.returncode == -9
