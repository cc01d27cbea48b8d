"""Issue 16 item 5: every command takes ``--output json``, and a command line argparse
refuses is one line -- ``millrace <command>: error: ... (see millrace <command> --help)``,
exit code 2 -- not the usage block, named after the command it was given to."""

from __future__ import annotations

import json

import pytest

from millrace.cli.main import build_parser, main
from tests.unit.cli.test_cli_output import leaf_commands


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``main`` printed on stderr for an argument error (exit 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2, argv
    out, err = capsys.readouterr()
    assert out == "", argv
    lines = err.splitlines()
    assert len(lines) == 1, (argv, err)
    assert "usage:" not in err, argv
    return lines[0]


def test_every_command_offers_json_output() -> None:
    leaves = list(leaf_commands(build_parser()))
    assert {path[0] for path, _ in leaves} >= {"broker", "selftest", "version", "demo",
                                               "pipeline", "perf", "topics", "consume"}
    for path, parser in leaves:
        output = next((a for a in parser._actions if "--output" in a.option_strings), None)
        assert output is not None, path
        assert output.choices is not None and "json" in output.choices, path
        assert output.help, path


def test_every_command_refuses_an_unknown_option_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    for path, _parser in leaf_commands(build_parser()):
        command = " ".join(("millrace", *path))
        line = refused([*path, "--no-such-option"], capsys)
        # commands with required options name those first; either way one line
        assert line.startswith(f"{command}: error: "), line
        assert line.endswith(f"(see {command} --help)"), line


@pytest.mark.parametrize(("argv", "line"), [
    (["consume", "--topic", "t", "--bogus", "1"],
     "millrace consume: error: unrecognized arguments: --bogus 1 "
     "(see millrace consume --help)"),
    (["topics", "create"],
     "millrace topics create: error: the following arguments are required: --topic/-t "
     "(see millrace topics create --help)"),
    (["topics", "list", "-o", "yaml"],
     "millrace topics list: error: argument --output/-o: invalid choice: 'yaml' (choose "
     "from 'table', 'json') (see millrace topics list --help)"),
    (["topics", "create", "--topic", "t", "--partitions", "many"],
     "millrace topics create: error: argument --partitions: invalid int value: 'many' "
     "(see millrace topics create --help)"),
    (["broker", "--output", "table"],
     "millrace broker: error: argument --output/-o: invalid choice: 'table' (choose from "
     "'text', 'json') (see millrace broker --help)"),
    ([], "millrace: error: the following arguments are required: COMMAND "
         "(see millrace --help)"),
])
def test_argument_errors_name_the_command_and_the_help(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(argv, capsys) == line


def test_an_unknown_subcommand_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["topics", "frob"], capsys)
    assert line.startswith("millrace topics: error: argument ACTION: invalid choice: 'frob'")
    assert line.endswith("(see millrace topics --help)")


def test_help_still_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["consume", "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("usage: millrace consume")


def test_parsed_arguments_carry_no_parser_bookkeeping() -> None:
    args = build_parser().parse_args(["topics", "list"])
    assert not any(name.startswith("_") for name in vars(args))


def test_version_and_selftest_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "version": __import__("millrace").__version__}
    assert main(["selftest", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["apis"] > 30 and doc["message_versions"] > doc["apis"]
    assert {b["compression"] for b in doc["record_batches"]} >= {"none", "gzip", "zstd"}
    assert all(b["records"] == 100 for b in doc["record_batches"])
