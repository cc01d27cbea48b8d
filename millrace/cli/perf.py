"""``millrace perf produce`` and ``millrace perf consume``: throughput and latency figures.

Habits of kafka-producer-perf-test and kafka-consumer-perf-test: the same options
(``--num-records``, ``--record-size``, ``--throughput``, ``--producer-props k=v ...``,
``--messages``, ``--timeout``, ``--show-detailed-stats``, ``--print-metrics``...) and the
same lines; ``--print-metrics`` adds the client's metrics after the totals, one
``group:name:{tags} : value`` line each (under ``"metrics"`` in the JSON).  The
runs themselves are ``millrace.client.perf``; this module parses, prints a line every
``--reporting-interval`` and the totals, or one JSON object with ``--output json``.
On a terminal a progress bar (rich) runs below the lines for runs of 10,000 records or
more.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    CommandError,
    configure_client_logging,
    parse_configs,
    print_json,
)

if TYPE_CHECKING:
    from millrace.client.perf import ConsumerPerfResult, ProducerPerfResult

PROGRESS_MIN_RECORDS = 10_000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    perf = sub.add_parser("perf", help="measure producer or consumer throughput",
                          description="Throughput and latency, as Kafka's perf-test tools.")
    commands = perf.add_subparsers(dest="perf_command", required=True, metavar="COMMAND")

    p = commands.add_parser(
        "produce", help="send records as fast as allowed; print throughput and latency",
        description="Send --num-records records of --record-size bytes and print records/s, "
                    "MB/s (2^20 bytes of values) and the send-to-acknowledgement latency.")
    p.add_argument("--topic", "-t", required=True)
    p.add_argument("--num-records", type=int, required=True, metavar="N")
    p.add_argument("--record-size", type=int, required=True, metavar="BYTES")
    p.add_argument("--throughput", type=float, default=-1, metavar="RECORDS_PER_S",
                   help="limit to this many records/s; -1 (default) for no limit")
    p.add_argument("--producer-props", nargs="+", action="extend", metavar="KEY=VALUE",
                   help="producer configs, e.g. acks=1 linger.ms=10")
    p.add_argument("--producer.config", "--command-config", dest="config_file",
                   metavar="FILE", help="a properties file of producer configs")
    p.add_argument("--timeout", type=int, metavar="MS",
                   help="give up waiting for the broker (metadata, buffer space) after this "
                        "long: the producer's max.block.ms (default: its 60000)")
    _shared_options(p)
    p.set_defaults(func=produce)

    c = commands.add_parser(
        "consume", help="read records as fast as possible; print throughput",
        description="Read --messages records and print the time taken, MB (2^20 bytes of "
                    "keys and values) and records per second, overall and while fetching.")
    c.add_argument("--topic", "-t", required=True)
    c.add_argument("--messages", "--num-records", dest="messages", type=int, required=True,
                   metavar="N", help="how many records to read")
    c.add_argument("--group", "-g",
                   help="consumer group to subscribe with (default: no group; every "
                        "partition is assigned directly)")
    c.add_argument("--from-latest", action="store_true",
                   help="start at the end of the partitions (default: the beginning)")
    c.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                   help="give up when no record has come for this long (default 10000)")
    c.add_argument("--consumer-props", nargs="+", action="extend", metavar="KEY=VALUE",
                   help="consumer configs, e.g. max.poll.records=1000")
    c.add_argument("--consumer.config", "--command-config", dest="config_file",
                   metavar="FILE", help="a properties file of consumer configs")
    c.add_argument("--show-detailed-stats", action="store_true",
                   help="print a line per --reporting-interval")
    c.add_argument("--hide-header", action="store_true", help="print the values only")
    _shared_options(c)
    c.set_defaults(func=consume)


def _shared_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                        help=f"broker(s) to connect to (default: bootstrap.servers from the "
                             f"props, else ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                        help="interval between progress lines (default 5000)")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table",
                        help="text lines (default) or one JSON object")
    parser.add_argument("--print-metrics", action="store_true",
                        help="print the client's metrics at the end (Java's names: "
                             "group:name:{tags} : value; in the JSON under \"metrics\")")


def _configs(args: argparse.Namespace, props: list[str] | None, option: str) -> dict[str, Any]:
    """The config file, then ``--*-props``, then ``--bootstrap-server``."""
    from millrace.common.config import parse_properties

    configs: dict[str, Any] = {}
    if args.config_file:
        try:
            with open(args.config_file, encoding="utf-8") as f:
                configs.update(parse_properties(f.read()))
        except OSError as e:
            raise CommandError(f"cannot read {args.config_file}: {e.strerror}") from None
    configs.update(parse_configs(props, option))
    if args.bootstrap_server:
        configs["bootstrap.servers"] = args.bootstrap_server
    else:
        configs.setdefault("bootstrap.servers",
                           os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP))
    return configs


def _check(args: argparse.Namespace, count: int, option: str) -> None:
    if count < 0:
        raise CommandError(f"{option} cannot be negative, got {count}")
    if args.reporting_interval <= 0:
        raise CommandError(f"--reporting-interval must be positive, got "
                           f"{args.reporting_interval}")


class _Reporter:
    """Where the lines go: plain prints, or above a rich progress bar on a terminal."""

    def __init__(self, progress: Any = None, task: Any = None) -> None:
        self._progress = progress
        self._task = task

    def line(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, highlight=False, markup=False,
                                        soft_wrap=True)
        else:
            print(text, flush=True)

    def advance_to(self, done: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done)


@contextmanager
def _reporter(args: argparse.Namespace, total: int, what: str) -> Iterator[_Reporter]:
    if args.output == "json" or total < PROGRESS_MIN_RECORDS or not sys.stdout.isatty():
        yield _Reporter()
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        yield _Reporter(progress, progress.add_task(what, total=total))


def produce(args: argparse.Namespace) -> int:
    from millrace.client.perf import ProducerPerformance

    _check(args, args.num_records, "--num-records")
    if args.record_size < 0:
        raise CommandError(f"--record-size cannot be negative, got {args.record_size}")
    if args.throughput == 0:
        raise CommandError("--throughput must be positive, or -1 for no limit")
    configure_client_logging()
    configs = _configs(args, args.producer_props, "--producer-props")
    if args.timeout is not None:
        if args.timeout <= 0:
            raise CommandError(f"--timeout must be positive, got {args.timeout}")
        configs["max.block.ms"] = args.timeout
    quiet = args.output == "json"
    with _reporter(args, args.num_records, "producing") as reporter:
        perf = ProducerPerformance(
            configs, args.topic, args.num_records, args.record_size,
            throughput=args.throughput, reporting_interval_ms=args.reporting_interval,
            on_window=None if quiet else (lambda w: reporter.line(w.line())),
            on_progress=reporter.advance_to, collect_metrics=args.print_metrics)
        result = perf.run()
    _print_producer(args, result)
    if result.records_failed:
        raise CommandError(f"{result.records_failed} of {args.num_records} records failed; "
                           f"first: {result.first_error}")
    return 0


def _print_producer(args: argparse.Namespace, result: ProducerPerfResult) -> None:
    if args.output == "json":
        print_json(result.as_dict())
    else:
        print(result.summary_line())
        _print_metrics(result.metrics)


def _print_metrics(metrics: dict[str, float] | None) -> None:
    from millrace.client.perf import format_metrics

    for line in format_metrics(metrics or {}):
        print(line)


def consume(args: argparse.Namespace) -> int:
    from millrace.client.perf import CONSUMER_HEADER, WINDOW_HEADER, ConsumerPerformance

    _check(args, args.messages, "--messages")
    if args.timeout <= 0:
        raise CommandError(f"--timeout must be positive, got {args.timeout}")
    configure_client_logging()
    configs = _configs(args, args.consumer_props, "--consumer-props")
    detailed = args.show_detailed_stats and args.output != "json"
    with _reporter(args, args.messages, "consuming") as reporter:
        on_window: Callable[[Any], None] | None = None
        if detailed:
            if not args.hide_header:
                reporter.line(WINDOW_HEADER)
            on_window = lambda w: reporter.line(w.line())  # noqa: E731
        perf = ConsumerPerformance(
            configs, args.topic, args.messages, group=args.group,
            from_latest=args.from_latest, timeout_ms=args.timeout,
            reporting_interval_ms=args.reporting_interval, on_window=on_window,
            on_progress=reporter.advance_to, collect_metrics=args.print_metrics)
        result = perf.run()
    _print_consumer(args, result, CONSUMER_HEADER)
    if result.timed_out:
        raise CommandError(f"read {result.records} of {args.messages} records: no record "
                           f"came for {args.timeout} ms (--timeout)")
    return 0


def _print_consumer(args: argparse.Namespace, result: ConsumerPerfResult, header: str) -> None:
    if args.output == "json":
        print_json(result.as_dict())
        return
    if not args.hide_header:
        print(header)
    print(result.row())
    _print_metrics(result.metrics)
