"""Shared CLI helpers: tables, key=value parsing, JSON conversion, one-line errors."""

from __future__ import annotations

import argparse
import uuid

import pytest

from millrace.cli.common import (
    CommandError,
    client_configs,
    error_line,
    format_table,
    jsonable,
    parse_configs,
    parse_names,
    split_config_list,
)
from millrace.client.admin import (
    ConsumerGroupState,
    MemberAssignment,
    Node,
    TopicListing,
    TopicPartition,
)
from millrace.common.errors import ConfigError, TopicExistsError


def test_table_columns_are_aligned_and_none_prints_as_dash() -> None:
    text = format_table(("GROUP", "TOPIC", "LAG"), [("g", "orders", 12), ("group-2", "t", None)])
    assert text.splitlines() == [
        "GROUP   TOPIC  LAG",
        "g       orders 12",
        "group-2 t      -",
    ]


def test_header_only_table() -> None:
    assert format_table(("A", "BB"), []) == "A BB"


def test_config_lists_split_outside_brackets() -> None:
    assert split_config_list("a=1,b=[x,y],c=3") == ["a=1", "b=x,y", "c=3"]
    assert split_config_list(" a=1 , ") == ["a=1"]
    for bad in ("a=[1", "a=1]"):
        with pytest.raises(CommandError, match="unbalanced"):
            split_config_list(bad)


def test_parse_configs() -> None:
    assert parse_configs(["a=1", "b=x=y", "c="], "--config") == {"a": "1", "b": "x=y", "c": ""}
    assert parse_configs(["a=1,b=2", "c=[3,4]"], "--add-config", split=True) == {
        "a": "1", "b": "2", "c": "3,4"}
    assert parse_configs(["v=1,2"], "--config") == {"v": "1,2"}  # kafka-topics: no split
    with pytest.raises(CommandError, match="--config expects key=value, got 'oops'"):
        parse_configs(["oops"], "--config")
    with pytest.raises(CommandError):
        parse_configs(["=1"], "--config")


def test_parse_names() -> None:
    assert parse_names(["a,b", "a", " c "]) == ["a", "b", "c"]
    assert parse_names(None) == []


def test_jsonable() -> None:
    tid = uuid.UUID(int=5)
    assert jsonable(TopicListing("t", tid, False)) == {
        "name": "t", "topic_id": str(tid), "is_internal": False}
    assert jsonable(Node(1, "h", 9, None)) == {"id": 1, "host": "h", "port": 9, "rack": None}
    assert jsonable(ConsumerGroupState.STABLE) == "Stable"
    assert jsonable(MemberAssignment(frozenset({TopicPartition("t", 1), TopicPartition("t", 0)}),
                                     b"u")) == {
        "topic_partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}],
        "user_data": "u"}


def test_error_lines_are_single_lines() -> None:
    assert error_line(TopicExistsError("Topic 't' already exists.")) == \
        "TOPIC_ALREADY_EXISTS: Topic 't' already exists."
    assert error_line(TopicExistsError()) == "TOPIC_ALREADY_EXISTS"
    assert error_line(ConfigError("bad\nthing")) == "bad thing"
    assert error_line(FileNotFoundError(2, "No such file or directory", "x.properties")) == \
        "No such file or directory: x.properties"


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"bootstrap_server": "h:1", "command_config": None,
                               "timeout": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_client_configs(tmp_path: object) -> None:
    assert client_configs(_args()) == {"bootstrap.servers": "h:1",
                                       "default.api.timeout.ms": 30000}
    assert client_configs(_args(timeout=500)) == {
        "bootstrap.servers": "h:1", "default.api.timeout.ms": 500, "request.timeout.ms": 500}
    with pytest.raises(CommandError, match="--timeout must be positive"):
        client_configs(_args(timeout=0))
    with pytest.raises(CommandError, match="cannot read --command-config"):
        client_configs(_args(command_config="/nonexistent/admin.properties"))
    import pathlib
    binary = pathlib.Path(str(tmp_path)) / "binary.properties"
    binary.write_bytes(b"client.id=\xff\xfe\n")
    with pytest.raises(CommandError, match="not a UTF-8 properties file"):
        client_configs(_args(command_config=str(binary)))


def test_command_config_file(tmp_path: pytest.TempPathFactory) -> None:
    import pathlib
    path = pathlib.Path(str(tmp_path)) / "admin.properties"
    path.write_text("# comment\nclient.id=ops\ndefault.api.timeout.ms=9000\n")
    configs = client_configs(_args(command_config=str(path)))
    assert configs == {"client.id": "ops", "default.api.timeout.ms": "9000",
                       "bootstrap.servers": "h:1"}
