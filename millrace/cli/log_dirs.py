"""``millrace log-dirs --describe``: each broker's log dirs and the size on disk of each
partition in them (``kafka-log-dirs.sh`` habits; ``KafkaAdminClient.describe_log_dirs``).

``--broker-list 1,2`` picks the brokers (default: every broker of the cluster; an id not
in it is refused, naming those that are), ``--topic-list a,b`` the topics whose
partitions are shown (default: all; filtered here, as Kafka's tool does -- the brokers
are asked for everything).  The table output is kafka-log-dirs.sh's: two progress lines
and one line of JSON::

    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/var/lib/kafka",
     "error":null,"partitions":[{"partition":"t-0","size":123,"offsetLag":0,
     "isFuture":false}]}]}]}

``--output json`` prints that document alone, indented.  A dir's ``error`` is null when
it is online, else the error's one-line text (Kafka prints the Java exception's class).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    error_line,
    print_json,
)

if TYPE_CHECKING:
    from millrace.client.admin import LogDirDescription


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "log-dirs", parents=[connection_options()],
        help="describe brokers' log dirs and partition sizes (kafka-log-dirs)",
        description="Describe the log dirs of brokers: for each dir its error (null when "
                    "online) and, for each partition it holds, the size of its segments "
                    "in bytes, how far its log end offset is behind the high watermark, "
                    "and whether it is a future log.")
    p.add_argument("--describe", action="store_true", required=True,
                   help="describe the log dirs (the only action)")
    p.add_argument("--broker-list", metavar="IDS",
                   help="comma-separated broker ids (default: every broker)")
    p.add_argument("--topic-list", metavar="TOPICS",
                   help="comma-separated topics whose partitions to show (default: all)")
    p.set_defaults(func=log_dirs)


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--broker-list {text!r}: expected comma-separated broker ids "
                           f"such as 1,2") from None
    if not ids:
        raise CommandError("--broker-list names no broker")
    return list(dict.fromkeys(ids))


def log_dirs_document(described: Mapping[int, Mapping[str, LogDirDescription]],
                      topics: set[str]) -> dict[str, Any]:
    """kafka-log-dirs.sh's JSON document; only the partitions of ``topics`` (empty: all)."""
    return {"version": 1, "brokers": [
        {"broker": broker, "logDirs": [
            {"logDir": path,
             "error": None if d.error is None else error_line(d.error),
             "partitions": [
                 {"partition": str(tp), "size": info.size, "offsetLag": info.offset_lag,
                  "isFuture": info.is_future}
                 for tp, info in sorted(d.replica_infos.items(),
                                        key=lambda item: (item[0].topic, item[0].partition))
                 if not topics or tp.topic in topics]}
            for path, d in dirs.items()]}
        for broker, dirs in described.items()]}


def log_dirs(args: argparse.Namespace) -> int:
    topics = {t.strip() for t in (args.topic_list or "").split(",") if t.strip()}
    wanted = None if args.broker_list is None else _broker_ids(args.broker_list)
    with admin_client(args) as admin:
        existing = [n.id for n in admin.describe_cluster().nodes]
        if wanted is None:
            brokers = sorted(existing)
        else:
            missing = [b for b in wanted if b not in existing]
            if missing:
                raise CommandError(
                    f"the given brokers do not exist from --broker-list: "
                    f"{','.join(map(str, missing))}; current brokers: "
                    f"{','.join(map(str, sorted(existing)))}")
            brokers = wanted
        if args.output != "json":
            print("Querying brokers for log directories information")
        described = admin.describe_log_dirs(brokers)
    doc = log_dirs_document(described, topics)
    if args.output == "json":
        print_json(doc)
    else:
        print(f"Received log directory information from brokers "
              f"{','.join(map(str, brokers))}")
        print(json.dumps(doc, separators=(",", ":")))
    return 0
