"""What every client command owes the user, checked across the whole command tree: a
``--help``, ``--output json``, a help line per option; progress bars only on a terminal,
only on stderr; and the console producer's output without a broker (a fake producer)."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.cli import console as console_cmd
from millrace.cli import groups as groups_cmd
from millrace.cli import topics as topics_cmd
from millrace.cli.common import ProgressBar, progress_bar
from millrace.cli.main import build_parser, main
from tests.unit.cli.test_cli_commands import FakeAdmin

# the client commands this file vouches for (other modules register commands too)
CLIENT_COMMANDS = ("topics", "groups", "configs", "cluster", "produce", "consume")


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                  ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable command: (its words, its parser)."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for action in subparsers:
        for name, child in action.choices.items():
            yield from leaf_commands(child, (*path, name))


def client_commands() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(p, c) for p, c in leaf_commands(build_parser()) if p[0] in CLIENT_COMMANDS]
    assert {p[0] for p, _ in found} == set(CLIENT_COMMANDS)
    return found


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    leaves = list(leaf_commands(build_parser()))
    assert len(leaves) >= 20
    for path, _parser in leaves:
        with pytest.raises(SystemExit) as e:
            main([*path, "--help"])
        assert e.value.code == 0, path
        assert capsys.readouterr().out.startswith(f"usage: millrace {' '.join(path)}"), path


def test_every_client_option_says_what_it_does() -> None:
    for path, parser in client_commands():
        assert parser.description or parser.format_usage(), path
        for action in parser._actions:
            if action.option_strings:
                assert action.help, (path, action.option_strings)


def test_every_client_command_offers_json_output() -> None:
    for path, parser in client_commands():
        output = next((a for a in parser._actions if "--output" in a.option_strings), None)
        assert output is not None, path
        assert output.choices is not None and "json" in output.choices, path


# ---------------------------------------------------------------------- progress bars
def test_no_progress_bar_without_a_terminal() -> None:
    stream = io.StringIO()
    with progress_bar("working", 10, stream=stream) as bar:
        assert not bar.enabled
        bar.advance(5)
        bar.update(completed=10, description="done")
    assert stream.getvalue() == ""
    terminal = FakeTerminal()
    with progress_bar("working", stream=terminal, enabled=False) as bar:
        assert not bar.enabled
    assert terminal.getvalue() == ""
    ProgressBar().advance()  # a bare handle is a no-op


def test_progress_bar_on_a_terminal() -> None:
    stream = FakeTerminal()
    with progress_bar("copying lines", 1000, transfer=True, stream=stream) as bar:
        assert bar.enabled
        bar.update(completed=500)
    drawn = stream.getvalue()
    assert "copying lines" in drawn and "\x1b[" in drawn  # drawn with terminal controls


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    for module in (topics_cmd, groups_cmd):
        monkeypatch.setattr(module, "admin_client", lambda args: fake)
    return fake


def test_long_admin_calls_show_progress_on_stderr_only(
        admin: FakeAdmin, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["topics", "create", "-t", "new", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"succeeded": ["new"], "failed": {}}
    assert "creating topic new" in terminal.getvalue()
    assert main(["groups", "reset-offsets", "-g", "g1", "--all-topics", "--to-earliest",
                 "--execute", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["executed"] is True and len(out["offsets"]) == 2
    assert "resetting offsets of group g1" in terminal.getvalue()


def test_json_when_nothing_was_done(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    assert main(["topics", "create", "-t", "orders", "--if-not-exists", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"succeeded": [], "failed": {},
                                                   "existing": ["orders"]}
    assert main(["topics", "delete", "-t", "nothing.*", "--if-exists", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"succeeded": [], "failed": {}}


# ---------------------------------------------------------------------- the console producer
class FakeProducer:
    """Takes records; fails those whose value is ``b"fail"``."""

    instances: list[FakeProducer] = []

    def __init__(self, configs: dict[str, Any]) -> None:
        self.configs = configs
        self.records: list[Any] = []
        FakeProducer.instances.append(self)

    def __enter__(self) -> FakeProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def send(self, record: Any, callback: Any) -> None:
        self.records.append(record)
        error = RuntimeError("broker said no") if record.value == b"fail" else None
        callback(None, error)

    def flush(self) -> None:
        pass


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> type[FakeProducer]:
    FakeProducer.instances = []
    monkeypatch.setattr("millrace.client.producer.KafkaProducer", FakeProducer)
    return FakeProducer


def test_produce_sends_lines_as_bytes(producer: type[FakeProducer], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lines"
    path.write_bytes(b"k1:v1\nk2:caf\xc3\xa9:x\nk3:\xff\xfe")  # the last line has no newline
    assert main(["produce", "-t", "t", "-f", str(path), "--parse-key", "--key-separator", ":",
                 "--header", "src=file", "--timeout", "2000"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("", "sent 3 records to t\n")
    (fake,) = producer.instances
    assert [(r.key, r.value, r.headers) for r in fake.records] == [
        (b"k1", b"v1", [("src", b"file")]), (b"k2", "café:x".encode(), [("src", b"file")]),
        (b"k3", b"\xff\xfe", [("src", b"file")])]
    assert fake.configs["max.block.ms"] == 2000 and fake.configs["acks"] == "all"


def test_produce_json_summary_and_progress(producer: type[FakeProducer], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lines"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["produce", "-t", "t", "-f", str(path), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"topic": "t", "sent": 1000, "failed": 0,
                                                   "first_error": None}
    assert "lines -> t" in terminal.getvalue()
    assert "sent 1000" not in terminal.getvalue()  # the summary is the JSON


def test_produce_failures_are_one_line_and_counted(producer: type[FakeProducer],
                                                   tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lines"
    path.write_text("ok\nfail\nok\nfail\n")
    assert main(["produce", "-t", "t", "-f", str(path), "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"topic": "t", "sent": 2, "failed": 2,
                               "first_error": "broker said no"}
    assert err == "Error: 2 of 4 records failed; first: broker said no\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["--partition", "-1"], "Error: --partition must not be negative, got -1\n"),
    (["--parse-key"], "Error: line 1 has no key separator '\\t'\n"),
    (["-f", "/nonexistent/lines"], "Error: No such file or directory: /nonexistent/lines\n"),
])
def test_produce_errors_are_one_line(producer: type[FakeProducer], tmp_path: Path,
                                     argv: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lines"
    path.write_text("no separator here\n")
    assert main(["produce", "-t", "t", "-f", str(path), *argv]) == 1
    assert capsys.readouterr() == ("", message)


def test_input_size_only_for_regular_files(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    with open(path, "rb") as f:
        assert console_cmd._input_size(f) == 5
    assert console_cmd._input_size(io.BytesIO(b"x")) is None  # no file descriptor


def test_no_progress_bar_while_the_user_types(producer: type[FakeProducer],
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    class Keyboard(io.BytesIO):
        def isatty(self) -> bool:
            return True

    class Stdin:
        buffer = Keyboard(b"typed 1\ntyped 2\n")

    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stdin", Stdin())
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["produce", "-t", "t"]) == 0
    assert terminal.getvalue() == "sent 2 records to t\n"
    assert [r.value for r in producer.instances[0].records] == [b"typed 1", b"typed 2"]
