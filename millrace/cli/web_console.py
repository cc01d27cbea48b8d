"""``millrace console``: the web console (``millrace.console``) for any Kafka cluster.

``millrace console --bootstrap-server HOST:PORT [--command-config client.properties]
[--listen 127.0.0.1:8080] [--read-only]`` serves the console until Ctrl-C.  It talks to
the cluster as a Kafka client with the settings given, as ``millrace topics`` does.
Bound to a loopback address (the default) it needs no login; bound to any other it needs
a token: the first line of ``--token-file``, or ``$MILLRACE_CONSOLE_TOKEN``, or else one
made up at start and printed once on stdout (it is never logged).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
from pathlib import Path

from millrace.cli.common import (
    CommandError,
    client_configs,
    configure_client_logging,
    connection_options,
)

DEFAULT_LISTEN = "127.0.0.1:8080"
TOKEN_ENV = "MILLRACE_CONSOLE_TOKEN"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("console", parents=[connection_options()],
                       help="serve the web console for a cluster",
                       description="A web console for any Kafka cluster: brokers, alerts, "
                                   "topics, messages, consumer groups, with their history.")
    p.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                   help=f"where to serve HTTP (default {DEFAULT_LISTEN}; port 0 picks one)")
    p.add_argument("--read-only", action="store_true",
                   help="refuse every write (produce, topic changes, offset resets)")
    p.add_argument("--token-file", metavar="FILE",
                   help=f"the login token (first line) when bound to a non-loopback address "
                        f"(default ${TOKEN_ENV}, else one is made up and printed)")
    p.add_argument("--protocol-only", action="store_true",
                   help="read the cluster through the Kafka protocol only, never the "
                        "millrace brokers' HTTP views (what the console sees of any Kafka)")
    p.add_argument("--otlp", action="store_true",
                   help="also export each traced record's journey over OTLP/HTTP (where: "
                        "the OTEL_EXPORTER_OTLP_* variables; needs millrace[otel])")
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                   help="how often the cluster is polled (default 1)")
    p.set_defaults(func=command)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise CommandError(f"--listen must be HOST:PORT, got {text!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def _token(args: argparse.Namespace) -> tuple[str, bool]:
    """The login token, and whether it was made up here."""
    if args.token_file:
        try:
            lines = Path(args.token_file).read_text().splitlines()
        except OSError as e:
            raise CommandError(f"--token-file {args.token_file}: {e.strerror}") from None
        if not lines or not lines[0].strip():
            raise CommandError(f"--token-file {args.token_file} is empty")
        return lines[0].strip(), False
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV], False
    return secrets.token_urlsafe(24), True


def command(args: argparse.Namespace) -> int:
    from millrace.console.server import ConsoleServer, is_loopback

    if args.interval <= 0:
        raise CommandError(f"--interval must be positive, got {args.interval}")
    host, port = parse_listen(args.listen)
    token: str | None = None
    made_up = False
    if not is_loopback(host):
        token, made_up = _token(args)
    otlp = None
    if args.otlp:
        from millrace.client.otel import MissingExtraError, journey_tracer_provider
        try:
            otlp = journey_tracer_provider(service_name="millrace-console")
        except MissingExtraError as e:
            raise CommandError(f"--otlp: {e}") from None
    configure_client_logging()
    as_json = args.output == "json"

    async def run() -> None:
        server = ConsoleServer(client_configs(args), host=host, port=port,
                               read_only=args.read_only, token=token,
                               interval_s=args.interval, protocol_only=args.protocol_only,
                               otlp=otlp)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await server.start()
        except OSError as e:
            await server.stop()
            raise CommandError(f"cannot listen on {args.listen}: {e.strerror}") from None
        if as_json:
            print(json.dumps({"event": "started", "url": server.url,
                              "read_only": args.read_only,
                              "login": token is not None}), flush=True)
        else:
            mode = " (read-only)" if args.read_only else ""
            print(f"millrace console: {server.url}{mode}; Ctrl-C stops it", flush=True)
        if made_up:
            print(f"login token: {token}", flush=True)
        try:
            await stop.wait()
        finally:
            await server.stop()
            if otlp is not None:
                otlp.shutdown()

    asyncio.run(run())
    if as_json:
        print(json.dumps({"event": "stopped"}), flush=True)
    return 0
