"""What every ``millrace`` client command shares: connection options, building the admin
client, ``key=value`` parsing, aligned tables and JSON output, progress bars, and errors
as one line.

Client settings (Kafka's tools' habit): every command that talks to a cluster takes
``--command-config FILE``, a Java properties file of client configs, and ``-X KEY=VALUE``
(kcat's habit, repeatable) for single settings; ``-X`` wins over the file, and
``--bootstrap-server``/``--timeout`` over both.  They reach every client the command
builds (admin client, console producer and consumer; ``perf`` reads the same file as
``--producer.config``/``--consumer.config``, and ``pipeline run`` hands it to its source as
``kafka.*`` options).  This is how a command connects to a secured cluster::

    # client.properties
    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.username=alice
    sasl.password=alice-secret
    ssl.ca.location=/etc/millrace/ca.pem

    millrace topics list -b broker:9093 --command-config client.properties
    millrace topics list -b broker:9093 -X security.protocol=SSL -X ssl.ca.location=ca.pem

A wrong password ends the command at once with ``Error: SASL_AUTHENTICATION_FAILED: ...``.

A command module defines ``register(subparsers)``; its handlers take the parsed
``argparse.Namespace`` and return the exit code.  Anything they raise that the user can
act on -- a Kafka error, a timeout, a bad config, a bad argument (``CommandError``) -- is
printed by ``main`` as one ``Error: ...`` line on stderr with exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from millrace.client.admin import KafkaAdminClient

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "MILLRACE_BOOTSTRAP"
DEFAULT_TIMEOUT_MS = 30_000
LOG_LEVEL_ENV = "MILLRACE_LOG_LEVEL"


class CommandError(Exception):
    """A problem with the command as given (printed as one line, exit code 1)."""


# ---------------------------------------------------------------------- options
def connection_options() -> argparse.ArgumentParser:
    """A parent parser: ``--bootstrap-server``, ``--command-config``, ``-X``,
    ``--timeout``, ``--output``."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection and output")
    group.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                       default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
                       help=f"broker(s) to connect to, comma-separated (default: "
                            f"${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    group.add_argument("--command-config", metavar="FILE",
                       help="a properties file of client configs (client.id, "
                            "security.protocol, sasl.*, ssl.*, ...)")
    group.add_argument("-X", dest="client_properties", action="append", default=None,
                       metavar="KEY=VALUE",
                       help="one client config, e.g. -X security.protocol=SSL (repeatable; "
                            "wins over --command-config)")
    group.add_argument("--timeout", type=int, metavar="MS",
                       help=f"give up after this many ms (default {DEFAULT_TIMEOUT_MS})")
    group.add_argument("--output", "-o", choices=("table", "json"), default="table",
                       help="output format (default table)")
    return parent


def client_configs(args: argparse.Namespace) -> dict[str, Any]:
    """Client configs from ``--command-config``, ``-X`` and the connection options."""
    configs: dict[str, Any] = {}
    if getattr(args, "command_config", None):
        configs.update(read_properties_file(args.command_config, "--command-config"))
    configs.update(parse_configs(getattr(args, "client_properties", None), "-X"))
    configs["bootstrap.servers"] = args.bootstrap_server
    timeout = getattr(args, "timeout", None)
    if timeout is not None:
        if timeout <= 0:
            raise CommandError(f"--timeout must be positive, got {timeout}")
        configs["default.api.timeout.ms"] = timeout
        configs["request.timeout.ms"] = min(timeout, DEFAULT_TIMEOUT_MS)
    else:
        configs.setdefault("default.api.timeout.ms", DEFAULT_TIMEOUT_MS)
    return configs


def read_properties_file(path: str, option: str) -> dict[str, str]:
    """A Java properties file of client configs (``CommandError`` if unreadable)."""
    from millrace.common.config import parse_properties

    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        raise CommandError(f"cannot read {option} {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise CommandError(f"cannot read {option} {path}: not a UTF-8 properties "
                           "file") from None


def configure_client_logging() -> None:
    """Client commands log nothing below ERROR unless $MILLRACE_LOG_LEVEL says otherwise:
    a refused connection is retried quietly and ends, if it must, in one error line."""
    level = os.environ.get(LOG_LEVEL_ENV, "error").upper()
    logging.basicConfig(level=getattr(logging, level, logging.ERROR),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")


def admin_client(args: argparse.Namespace) -> KafkaAdminClient:
    from millrace.client.admin import KafkaAdminClient

    configure_client_logging()
    return KafkaAdminClient(client_configs(args))


# ---------------------------------------------------------------------- parsing
def parse_key_value(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise CommandError(f"{option} expects key=value, got {item!r}")
    return key.strip(), value


def split_config_list(text: str) -> list[str]:
    """``a=1,b=[x,y],c=3`` -> ``["a=1", "b=x,y", "c=3"]``: commas inside ``[...]`` belong
    to the value (kafka-configs' rule for list values); the brackets are dropped."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
            if depth == 1:
                continue
        elif ch == "]":
            if depth == 0:
                raise CommandError(f"unbalanced ']' in {text!r}")
            depth -= 1
            if depth == 0:
                continue
        elif ch == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    if depth:
        raise CommandError(f"unbalanced '[' in {text!r}")
    items.append("".join(current))
    return [i.strip() for i in items if i.strip()]


def parse_configs(items: Iterable[str] | None, option: str, *, split: bool = False
                  ) -> dict[str, str]:
    """Repeated ``k=v`` options (``split``: each may hold several, comma-separated)."""
    out: dict[str, str] = {}
    for raw in items or ():
        for item in (split_config_list(raw) if split else [raw]):
            key, value = parse_key_value(item, option)
            out[key] = value
    return out


def parse_names(items: Iterable[str] | None) -> list[str]:
    """Repeated and/or comma-separated names, in order, without duplicates."""
    names = [n.strip() for raw in items or () for n in raw.split(",")]
    return list(dict.fromkeys(n for n in names if n))


# ---------------------------------------------------------------------- output
def cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns as wide as their widest cell, one space apart (Kafka's tools);
    None and "" print as "-"."""
    lines = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                     for line in lines)


def jsonable(value: Any) -> Any:
    """Plain JSON values from the admin API's dataclasses, named tuples, enums, UUIDs."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: jsonable(v) for k, v in value._asdict().items()}
    if isinstance(value, enum.Enum):
        return value.name if isinstance(value, enum.IntEnum) else value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted((jsonable(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(jsonable(value), indent=2), file=out or sys.stdout)


def error_line(error: BaseException) -> str:
    """One line for the user: Kafka errors as ``NAME: message``."""
    from millrace.common.errors import KafkaError

    if isinstance(error, KafkaError):
        text = error.name if error.message == error.name else f"{error.name}: {error.message}"
    elif isinstance(error, OSError) and error.strerror:
        text = f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())


def print_error(error: BaseException | str) -> None:
    text = error if isinstance(error, str) else error_line(error)
    print(f"Error: {text}", file=sys.stderr)


# ---------------------------------------------------------------------- progress
class ProgressBar:
    """A handle on one ``rich`` progress task; without a terminal every call is a no-op.

    ``total=None`` draws an indeterminate bar (a long wait of unknown length)."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress = progress
        self._task = task

    @property
    def enabled(self) -> bool:
        return self._progress is not None

    def advance(self, amount: float = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, amount)

    def update(self, *, completed: float | None = None, total: float | None = None,
               description: str | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=completed, total=total,
                                  description=description)


@contextlib.contextmanager
def progress_bar(description: str, total: float | None = None, *, transfer: bool = False,
                 stream: TextIO | None = None, enabled: bool = True) -> Iterator[ProgressBar]:
    """Show a transient progress bar on ``stream`` (stderr) while the block runs -- only
    when that stream is a terminal, so piped output and JSON on stdout never carry it.

    ``transfer``: the total and steps are bytes (shown as sizes and a rate);
    ``enabled=False``: no bar whatever the stream (e.g. while a user types the input)."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if not (enabled and callable(isatty) and isatty()):
        yield ProgressBar()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    columns = [TextColumn("{task.description}"), BarColumn(), TaskProgressColumn()]
    columns += ([DownloadColumn(), TransferSpeedColumn()] if transfer
                else [MofNCompleteColumn()] if total is not None else [])
    columns.append(TimeElapsedColumn())
    console = Console(file=stream, force_terminal=True)
    # stdout is never redirected through the bar: what a command prints stays on stdout
    with Progress(*columns, console=console, transient=True, redirect_stdout=False,
                  redirect_stderr=False) as progress:
        yield ProgressBar(progress, progress.add_task(description, total=total))
