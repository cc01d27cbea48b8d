"""The ``millrace`` command: argument parsing and output only; logic lives in the library.

Subcommands come from ``COMMAND_MODULES``: each module defines
``register(subparsers)``, which adds its parser(s) with ``set_defaults(func=handler)``;
a handler takes the parsed arguments and returns the exit code.  To add a command
(``produce``, ``consume``, ``perf``), write ``millrace/cli/<name>.py`` and list it here.
Errors a user can act on (``MillraceError`` -- Kafka errors, timeouts, bad configs --,
``OSError``, ``CommandError``) are printed by ``main`` as one line on stderr, exit code 1.
A command line argparse refuses (an unknown option, a missing argument, a bad choice) is
one line too, ``millrace <command>: error: ... (see millrace <command> --help)``, exit
code 2, instead of argparse's usage block (``CommandParser``).  Every command takes
``--output json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from millrace.broker.server import KafkaServer

COMMAND_MODULES: tuple[str, ...] = (
    "millrace.cli.topics",
    "millrace.cli.groups",
    "millrace.cli.transactions",
    "millrace.cli.configs",
    "millrace.cli.acls",
    "millrace.cli.cluster",
    "millrace.cli.spark",
    "millrace.cli.schema_registry",
    "millrace.cli.schemas",
    "millrace.cli.leader_election",
    "millrace.cli.reassign_partitions",
    "millrace.cli.log_dirs",
    "millrace.cli.console",
    "millrace.cli.web_console",
    "millrace.cli.pipeline",
    "millrace.cli.perf",
    "millrace.cli.demo",
)


# the parser that parsed a command's own words, kept on the namespace while parsing
_PARSER_ATTR = "_millrace_parser"


class CommandParser(argparse.ArgumentParser):
    """argparse whose errors are one line with a hint, exit code 2 (argparse prints the
    whole usage first, which buries the one thing that was wrong).

    argparse reports options it did not recognise from the top-level parser ("millrace:
    error: unrecognized arguments"), not from the subcommand they were given to; each
    parser therefore records itself on the namespace it parsed into (the innermost one
    wins, since a subcommand's namespace is copied into its parent's), and ``parse_args``
    lets that parser report them."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} "
                     f"(see {self.prog} --help)\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _PARSER_ATTR):
            setattr(parsed, _PARSER_ATTR, self)
        return parsed, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        parser: argparse.ArgumentParser = getattr(parsed, _PARSER_ATTR, self)
        delattr(parsed, _PARSER_ATTR)
        if extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def _output_option(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("table", "json"),
                   what: str = "output format") -> None:
    parser.add_argument("--output", "-o", choices=choices, default=choices[0],
                        help=f"{what} (default {choices[0]})")


def _emit(doc: dict[str, Any]) -> None:
    """One JSON object on one line of stdout, flushed (a reader may be waiting for it)."""
    print(json.dumps(doc), flush=True)


def _version(args: argparse.Namespace) -> int:
    version = __import__("millrace").__version__
    if args.output == "json":
        _emit({"version": version})
    else:
        print(version)
    return 0


def _selftest(args: argparse.Namespace) -> int:
    """Encode/decode every API at every version and a record batch with every codec."""
    from millrace.protocol import API
    from millrace.record import CompressionType, RecordBatch, RecordBatchBuilder

    as_json = args.output == "json"
    pairs = 0
    for api in API.values():
        for version in range(api.versions.low, api.versions.high + 1):
            for codec in (api.request, api.response):
                data = codec.encode(codec.cls(), version)
                codec.decode(data, version)
                pairs += 1
    if not as_json:
        print(f"protocol: {len(API)} APIs, {pairs} message/version pairs round-trip")
    batches: list[dict[str, Any]] = []
    for compression in CompressionType:
        builder = RecordBatchBuilder(compression=compression)
        for i in range(100):
            builder.append(1_700_000_000_000 + i, f"key-{i}".encode(), b"value " * 20,
                           [("h", b"v")])
        batch = RecordBatch(builder.build())
        batch.validate()
        count = sum(1 for _ in batch.records())
        batches.append({"compression": compression.name.lower(), "bytes": batch.header.size,
                        "records": count})
        if not as_json:
            print(f"record batch {compression.name.lower():6} {batch.header.size:6} bytes, "
                  f"{count} records ok")
    if as_json:
        _emit({"apis": len(API), "message_versions": pairs, "record_batches": batches})
    return 0


def _broker(args: argparse.Namespace) -> int:
    """Run a broker until SIGTERM/SIGINT; bad configs exit 2 with the key named, a taken
    port or a failed log dir (a full or broken disk) exit 1.

    The broker logs to stderr whatever ``--output``; ``--output json`` adds one JSON line
    on stdout per event of its life -- ``started`` (node, cluster id, bound listeners),
    ``stopped``, or ``error`` (the message and the exit code) -- for scripts that start it.
    """
    import faulthandler
    import logging
    import signal

    from millrace.broker.config import KafkaConfig
    from millrace.broker.metrics import loop_idle
    from millrace.broker.server import KafkaServer
    from millrace.common.errors import ConfigError

    as_json = args.output == "json"

    def fail(message: str, code: int) -> int:
        if as_json:
            _emit({"event": "error", "error": message, "exit_code": code})
        else:
            print(f"millrace broker: {message}", file=sys.stderr)
        return code

    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    # kill -USR1 <pid> prints every thread's stack to the log (Java's jstack, for a
    # broker that looks stuck).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    overrides: dict[str, str] = {}
    for item in args.override or []:
        key, sep, value = item.partition("=")
        if not sep:
            return fail(f"--override expects key=value, got {item!r}", 2)
        overrides[key.strip()] = value
    try:
        text = ""
        if args.config:
            with open(args.config, encoding="utf-8") as f:
                text = f.read()
        config = KafkaConfig.from_text(text, overrides)
        server = KafkaServer(config)  # loads keystores and JAAS texts: ConfigError
    except (ConfigError, OSError) as e:
        return fail(str(e), 2)
    code = loop_idle.run(server.serve_forever(on_started=_started if as_json else None,
                                              freeze_heap=True))
    if code and server.failure is not None:  # already logged: JSON only adds the event
        return fail(server.failure, code) if as_json else code
    if as_json:
        _emit({"event": "stopped", "exit_code": code})
    return code


def _started(server: KafkaServer) -> None:
    assert server.services is not None and server.socket_server is not None
    _emit({"event": "started", "node_id": server.config.node_id,
           "cluster_id": server.services.metadata.cluster_id,
           "listeners": [f"{host}:{port}"
                         for host, port in server.socket_server.bound_addresses()],
           "http": server.metrics_service.urls() if server.metrics_service else []})


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="millrace",
                           description="A streaming platform that speaks Kafka.")
    # subparsers are made with the parent's class (CommandParser), at every level
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    selftest = sub.add_parser("selftest", help="round-trip the codec and record formats",
                              description="Encode and decode every API at every version "
                                          "and a record batch with every compression.")
    _output_option(selftest)
    selftest.set_defaults(func=_selftest)
    broker = sub.add_parser(
        "broker", help="run a broker (Kafka server.properties names)",
        description="Run a millrace broker until SIGTERM or Ctrl-C: a single node by "
                    "default, a cluster member with zookeeper.connect.  Configuration "
                    "uses Kafka's server.properties names.  Exit status: 0 after a clean "
                    "stop, 1 when a listener cannot be bound or the log dir failed, 2 for "
                    "a bad configuration.")
    broker.add_argument("--config", "-c", help="a server.properties file")
    broker.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="set one config key (repeatable), e.g. --override "
                             "listeners=PLAINTEXT://127.0.0.1:9092")
    broker.add_argument("--log-level", default="info", type=str.lower,
                        choices=["debug", "info", "warning", "error"],
                        help="what the broker logs to stderr (default: info)")
    _output_option(broker, ("text", "json"),
                   "json: one JSON line on stdout when the broker has started, stopped or "
                   "failed (logs stay on stderr)")
    broker.set_defaults(func=_broker)
    version = sub.add_parser("version", help="print the version")
    _output_option(version)
    version.set_defaults(func=_version)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from millrace.cli.common import CommandError, print_error
    from millrace.common.errors import MillraceError

    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except BrokenPipeError:
        # The reader went away (``millrace ... | head``): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (MillraceError, CommandError, OSError) as e:
        print_error(e)
        return 1
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
