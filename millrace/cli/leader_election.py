"""``millrace leader-election``: ask the controller for preferred or unclean leader
elections (``kafka-leader-election`` habits; ``KafkaAdminClient.elect_leaders``).

The partitions: ``--topic T --partition P``, ``--all-topic-partitions``, or
``--path-to-json-file F`` holding ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``
(duplicates refused).  The answer sorts them three ways, printed as kafka-leader-election
does: elected now, already led by a valid replica (ELECTION_NOT_NEEDED: not a failure), and
failed -- any failure ends with exit code 1.  ``--output json`` prints the three lists.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    error_line,
    print_json,
)

if TYPE_CHECKING:
    from millrace.client.admin import TopicPartition


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "leader-election", parents=[connection_options()],
        help="preferred or unclean leader election (kafka-leader-election)",
        description="Ask the controller to elect leaders: preferred gives leadership back "
                    "to each partition's first assigned replica if it is in sync; unclean "
                    "gives a partition without an in-sync replica any live replica (records "
                    "acknowledged by the old leader may be lost).")
    p.add_argument("--election-type", required=True, type=str.lower,
                   choices=("preferred", "unclean"), help="preferred or unclean")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic of --partition")
    which.add_argument("--all-topic-partitions", action="store_true",
                       help="every partition of every topic")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions": [{"topic": "t", "partition": 0}, ...]}')
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.set_defaults(func=leader_election)


def read_partitions_file(path: str) -> list[TopicPartition]:
    """The partitions of a kafka-leader-election JSON file, in file order."""
    from millrace.client.admin import TopicPartition

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise CommandError(f"cannot read --path-to-json-file {path}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CommandError(f"--path-to-json-file {path} is not JSON: {e}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CommandError(f'--path-to-json-file {path}: expected {{"partitions": [...]}}')
    out: list[TopicPartition] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic or type(partition) is not int:
            raise CommandError(f"--path-to-json-file {path}: each partition needs a \"topic\" "
                               f"string and a \"partition\" number, got {json.dumps(entry)}")
        out.append(TopicPartition(topic, partition))
    duplicates = sorted({str(tp) for tp in out if out.count(tp) > 1})
    if duplicates:
        raise CommandError(f"--path-to-json-file {path} names partitions more than once: "
                           f"{', '.join(duplicates)}")
    if not out:
        raise CommandError(f"--path-to-json-file {path} names no partitions")
    return out


def wanted_partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions the arguments name; None for ``--all-topic-partitions``."""
    from millrace.client.admin import TopicPartition

    if args.partition is not None and args.topic is None:
        raise CommandError("--partition goes with --topic")
    if args.topic is not None:
        if args.partition is None:
            raise CommandError("--topic needs --partition")
        return [TopicPartition(args.topic, args.partition)]
    if args.path_to_json_file is not None:
        return read_partitions_file(args.path_to_json_file)
    return None


def leader_election(args: argparse.Namespace) -> int:
    from millrace.client.admin import ElectionType
    from millrace.common.errors import ElectionNotNeededError

    election = ElectionType[args.election_type.upper()]
    partitions = wanted_partitions(args)
    with admin_client(args) as admin:
        result = admin.elect_leaders(election, partitions)
    succeeded: list[str] = []
    not_needed: list[str] = []
    failed: dict[str, str] = {}
    for tp, future in result.items():
        error = future.exception()
        if error is None:
            succeeded.append(str(tp))
        elif isinstance(error, ElectionNotNeededError):
            not_needed.append(str(tp))
        else:
            failed[str(tp)] = error_line(error)
    if args.output == "json":
        doc: dict[str, Any] = {"election_type": election.name, "succeeded": succeeded,
                               "not_needed": not_needed, "failed": failed}
        print_json(doc)
    else:
        if succeeded:
            print(f"Successfully completed leader election ({election.name}) for partitions "
                  f"{', '.join(succeeded)}")
        if not_needed:
            print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
        for tp_text, message in failed.items():
            print(f"Error completing leader election ({election.name}) for partition: "
                  f"{tp_text}: {message}")
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0
