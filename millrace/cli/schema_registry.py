"""``millrace schema-registry``: a Confluent-compatible schema registry over a Kafka cluster.

    millrace schema-registry --bootstrap-server HOST:PORT [--listen 127.0.0.1:8081]
        [--command-config client.properties] [--config registry.properties]
        [--override KEY=VALUE ...] [--output json]

The registry keeps its state in the cluster's ``_schemas`` topic (``millrace.schema_registry``),
so any number of instances may run against one cluster: they elect one writer and forward
writes to it.  ``--command-config`` holds the Kafka client settings the registry connects
with (security.protocol, sasl.*, ssl.*), as for every other command; ``--config`` is a
registry properties file with Confluent's names (listeners, kafkastore.topic,
schema.compatibility.level, authentication.method ...); ``--override`` wins over both.

It prints the URL once it serves (with ``--output json``: one line
``{"event": "started", "url": ...}``) and runs until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys

from millrace.cli.common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    CommandError,
    parse_key_value,
    read_properties_file,
)

DEFAULT_LISTEN = "127.0.0.1:8081"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("schema-registry", help="run a schema registry (Confluent's REST API)",
                       description="A schema registry speaking Confluent's REST API, storing "
                                   "schemas in the cluster's _schemas topic.")
    p.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                   default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
                   help=f"the Kafka cluster (default: ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    p.add_argument("--listen", metavar="[SCHEME://]HOST:PORT", default=None,
                   help=f"where to serve HTTP (default {DEFAULT_LISTEN}; https:// needs "
                        "ssl.keystore.* in --config)")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client settings (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--config", metavar="FILE",
                   help="registry settings with Confluent's names (schema-registry.properties)")
    p.add_argument("--override", action="append", metavar="KEY=VALUE", default=None,
                   help="one registry setting (repeatable; wins over --config)")
    p.add_argument("--output", "-o", choices=("table", "json"), default="table",
                   help="table, or JSON lines for scripts")
    p.add_argument("--log-level", default="info",
                   choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=command)


def registry_properties(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {}
    if args.config:
        props.update(read_properties_file(args.config, "--config"))
    if args.command_config:
        for key, value in read_properties_file(args.command_config, "--command-config").items():
            props.setdefault(f"kafkastore.{key}", value)
    props["kafkastore.bootstrap.servers"] = args.bootstrap_server
    if args.listen:
        listen = args.listen if "://" in args.listen else f"http://{args.listen}"
        props["listeners"] = listen
    for item in args.override or []:
        key, value = parse_key_value(item, "--override")
        props[key] = value
    return props


def command(args: argparse.Namespace) -> int:
    from millrace.common.errors import ConfigError
    from millrace.schema_registry.server import RegistryConfig, SchemaRegistryServer

    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    as_json = args.output == "json"
    try:
        config = RegistryConfig(registry_properties(args))
        server = SchemaRegistryServer(config)
        server.bind()
    except ConfigError as e:
        raise CommandError(str(e)) from None

    def started(s: SchemaRegistryServer) -> None:
        if as_json:
            print(json.dumps({"event": "started", "url": s.config.url,
                              "group": s.config.group_id, "topic": s.config.topic}), flush=True)
        else:
            print(f"schema registry: {s.config.url} (topic {s.config.topic}, group "
                  f"{s.config.group_id}); Ctrl-C stops it", flush=True)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await server.serve(stop, on_started=started)

    try:
        asyncio.run(run())
    except Exception as e:  # a store that cannot start: the cluster away, a bad topic
        from millrace.schema_registry.errors import RegistryError

        if isinstance(e, (RegistryError, ConfigError)):
            print(f"millrace schema-registry: {e}", file=sys.stderr)
            return 1
        raise
    if as_json:
        print(json.dumps({"event": "stopped"}), flush=True)
    return 0
