"""The ``millrace`` command: argument parsing and output only; logic lives in the library.

Subcommands come from ``COMMAND_MODULES``: each module defines
``register(subparsers)``, which adds its parser(s) with ``set_defaults(func=handler)``;
a handler takes the parsed arguments and returns the exit code.  To add a command
(``produce``, ``consume``, ``perf``), write ``millrace/cli/<name>.py`` and list it here.
Errors a user can act on (``MillraceError`` -- Kafka errors, timeouts, bad configs --,
``OSError``, ``CommandError``) are printed by ``main`` as one line on stderr, exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
    "millrace.cli.topics",
    "millrace.cli.groups",
    "millrace.cli.configs",
    "millrace.cli.cluster",
    "millrace.cli.leader_election",
    "millrace.cli.reassign_partitions",
    "millrace.cli.console",
    "millrace.cli.pipeline",
    "millrace.cli.perf",
    "millrace.cli.demo",
)


def _selftest(_: argparse.Namespace) -> int:
    """Encode/decode every API at every version and a record batch with every codec."""
    from millrace.protocol import API
    from millrace.record import CompressionType, RecordBatch, RecordBatchBuilder

    pairs = 0
    for api in API.values():
        for version in range(api.versions.low, api.versions.high + 1):
            for codec in (api.request, api.response):
                data = codec.encode(codec.cls(), version)
                codec.decode(data, version)
                pairs += 1
    print(f"protocol: {len(API)} APIs, {pairs} message/version pairs round-trip")
    for compression in CompressionType:
        builder = RecordBatchBuilder(compression=compression)
        for i in range(100):
            builder.append(1_700_000_000_000 + i, f"key-{i}".encode(), b"value " * 20,
                           [("h", b"v")])
        batch = RecordBatch(builder.build())
        batch.validate()
        count = sum(1 for _ in batch.records())
        print(f"record batch {compression.name.lower():6} {batch.header.size:6} bytes, "
              f"{count} records ok")
    return 0


def _broker(args: argparse.Namespace) -> int:
    """Run a broker until SIGTERM/SIGINT; bad configs exit 2 with the key named, a failed
    log dir (a full or broken disk) exits 1."""
    import faulthandler
    import logging
    import signal

    from millrace.broker.config import KafkaConfig
    from millrace.broker.server import run
    from millrace.common.errors import ConfigError

    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    # kill -USR1 <pid> prints every thread's stack to the log (Java's jstack, for a
    # broker that looks stuck).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    overrides: dict[str, str] = {}
    for item in args.override or []:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"millrace broker: --override expects key=value, got {item!r}",
                  file=sys.stderr)
            return 2
        overrides[key.strip()] = value
    try:
        text = ""
        if args.config:
            with open(args.config, encoding="utf-8") as f:
                text = f.read()
        config = KafkaConfig.from_text(text, overrides)
    except (ConfigError, OSError) as e:
        print(f"millrace broker: {e}", file=sys.stderr)
        return 2
    return run(config)  # 1: the log dir failed (the log says why)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="millrace",
                                     description="A streaming platform that speaks Kafka.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("selftest", help="round-trip the codec and record formats").set_defaults(
        func=_selftest)
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
    broker.set_defaults(func=_broker)
    sub.add_parser("version", help="print the version").set_defaults(
        func=lambda _: print(__import__("millrace").__version__) or 0)
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
