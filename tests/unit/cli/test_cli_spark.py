"""``millrace spark up`` before it starts anything, and the pipeline's Spark master setting:
bad counts, sizes, ports and master URLs are one-line errors.  Busy ports are fakes."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from millrace.cli import spark as spark_cmd
from millrace.cli.common import CommandError
from millrace.cli.main import build_parser
from millrace.common.errors import ConfigError
from millrace.launcher import broker_process
from millrace.spark.pipeline.config import DEFAULT_MASTER, check_master


def up_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["spark", "up", *argv])


@pytest.fixture
def busy(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    ports: set[int] = set()
    monkeypatch.setattr(broker_process, "port_in_use", lambda port, host="127.0.0.1":
                        port in ports)
    return ports


def test_defaults_are_sparks_own(busy: set[int]) -> None:
    args = up_args()
    assert (args.workers, args.cores, args.memory) == (2, 1, "1g")
    assert (args.port, args.webui_port) == (7077, 8080)
    spark_cmd.check_up_arguments(args)


@pytest.mark.parametrize(("argv", "message"), [
    (("--workers", "0"), "--workers 0: expected 1 to 64"),
    (("--cores", "0"), "--cores 0: expected at least 1"),
    (("--memory", "lots"), "--memory 'lots': expected a size like 512m or 1g"),
    (("--memory", "1q"), "expected a size like 512m or 1g"),
    (("--port", "70000"), "--port 70000: expected a port"),
    (("--port", "9000", "--webui-port", "9000"), "--port and --webui-port must differ"),
])
def test_bad_arguments_are_one_line(busy: set[int], argv: tuple[str, ...],
                                    message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("[", r"\[")):
        spark_cmd.check_up_arguments(up_args(*argv))


def test_a_busy_port_is_named_before_anything_starts(busy: set[int]) -> None:
    busy.add(8080)
    with pytest.raises(CommandError, match=r"--webui-port 8080: 127\.0\.0\.1:8080 is in use"):
        spark_cmd.check_up_arguments(up_args())


@pytest.mark.parametrize("master", [DEFAULT_MASTER, "local", "local[*]", "local[4,2]",
                                    "spark://127.0.0.1:7077", "spark://a:7077,b:7077",
                                    "yarn", "k8s://https://10.0.0.1:6443"])
def test_master_urls_spark_knows(master: str) -> None:
    check_master(master)


@pytest.mark.parametrize("master", ["", "spark://host", "spark://host:port", "local[",
                                    "local[two]", "mesos://x:5050", "127.0.0.1:7077"])
def test_other_master_urls_are_refused(master: Any) -> None:
    with pytest.raises(ConfigError, match=r"spark_master .*expected local"):
        check_master(master)


RUN = ("--topic", "orders", "--database", "sqlite:///x.db", "--checkpoint", "ck",
       "--value-format", "raw", "--state-table", "s", "--key", "key")


def run_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["pipeline", "run", *RUN, *argv])


def test_pipeline_runs_on_local_2_unless_told() -> None:
    from millrace.cli.pipeline import build_config

    c = build_config(run_args())
    assert (c.spark_master, c.spark_conf) == ("local[2]", {})


def test_pipeline_master_and_spark_settings_from_flags_and_job_file(tmp_path: Any) -> None:
    from millrace.cli.pipeline import build_config

    c = build_config(run_args("--master", "spark://127.0.0.1:7077",
                              "--conf", "spark.executor.memory=512m",
                              "--conf", "spark.cores.max=2"))
    assert c.spark_master == "spark://127.0.0.1:7077"
    assert c.spark_conf == {"spark.executor.memory": "512m", "spark.cores.max": "2"}
    job = tmp_path / "job.toml"
    job.write_text('name = "j"\nspark_master = "spark://h:7077"\n'
                   'database = "sqlite:///x.db"\ncheckpoint_dir = "ck"\n'
                   '[source]\nbootstrap_servers = "127.0.0.1:9092"\nsubscribe = "orders"\n'
                   '[spark_conf]\n"spark.executor.cores" = "1"\n')
    c = build_config(run_args("--config", str(job), "--conf", "spark.cores.max=1"))
    assert c.spark_master == "spark://h:7077"
    assert c.spark_conf == {"spark.executor.cores": "1", "spark.cores.max": "1"}


@pytest.mark.parametrize(("argv", "message"), [
    (("--master", "spark://nowhere"), "spark_master 'spark://nowhere'"),
    (("--conf", "executor.memory=1g"), "spark_conf: expected a table of spark.\\* settings"),
])
def test_pipeline_master_mistakes_are_one_line(argv: tuple[str, ...], message: str) -> None:
    from millrace.cli.pipeline import build_config

    with pytest.raises(ConfigError, match=message):
        build_config(run_args(*argv))


def test_a_relative_checkpoint_is_made_absolute_for_executors(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from millrace.cli.pipeline import build_config
    from millrace.spark.pipeline import Pipeline

    monkeypatch.chdir(tmp_path)
    pipeline = Pipeline(build_config(run_args()))
    assert pipeline.checkpoint("s") == f"{tmp_path}/ck/s"
    pipeline.config.checkpoint_dir = "hdfs://nn:8020/ck/"
    assert pipeline.checkpoint(None).startswith("hdfs://nn:8020/ck/")
