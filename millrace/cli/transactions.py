"""``millrace transactions list|describe|describe-producers|abort|find-hanging``: Kafka's
``kafka-transactions.sh`` (``TransactionsCommand``), with its columns and behaviour.

- ``list``: every broker's transactions (TransactionalId, Coordinator, ProducerId,
  TransactionState), filtered by state, producer id, duration (only those open longer
  than D ms) and an id pattern.
- ``describe``: one transactional id as its coordinator holds it; the duration is now
  minus the start time, "None" when no transaction is open.
- ``describe-producers``: a partition's active producers, with the first offset of each
  one's open transaction.
- ``abort``: write an ABORT marker on one partition for a *hanging* transaction -- one its
  coordinator forgot, which holds the partition's last stable offset (and so every
  read_committed consumer) forever.  Either ``--start-offset`` (the producer whose open
  transaction starts there, found with DescribeProducers) or the producer id, epoch and
  coordinator epoch by hand; a coordinator epoch of -1 (a producer whose first
  transaction never ended) is sent as 0, as Kafka's tool does.
- ``find-hanging``: the open transactions on a broker's (or a topic's) partitions that
  have run longer than ``--max-transaction-timeout`` minutes (15 by default, the
  broker's ``transaction.max.timeout.ms``) and that their coordinator does not know of:
  no transactional id lists the producer id, or its description does not name the
  partition.  Kafka asks ``--broker-id`` itself; millrace's DescribeProducers answers
  only as leader, so the partitions with a replica on that broker are asked of their
  leaders, which hold the same producer state.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    format_table,
    parse_names,
    print_json,
)
from millrace.common.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from millrace.client.admin import (
        KafkaAdminClient,
        ProducerState,
        TopicPartition,
        TransactionDescription,
    )

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs",
                    "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")
PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)")
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
_MS_PER_MIN = 60_000

# the clock of durations; tests replace it with a MockTime
clock: Time = SYSTEM_TIME


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parent = connection_options()
    cmd = sub.add_parser("transactions", help="list, describe, abort transactions",
                         description="Transactions (kafka-transactions.sh): list and describe "
                                     "them, show a partition's producers, find and abort "
                                     "hanging transactions.")
    actions = cmd.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("list", parents=[parent], help="every broker's transactions")
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only these states, e.g. Ongoing (repeatable, or comma-separated)")
    p.add_argument("--producer-id", type=int, action="append", metavar="N",
                   help="only this producer id (repeatable)")
    p.add_argument("--duration-ms", "--duration-filter", type=int, metavar="D",
                   dest="duration_ms", help="only transactions open longer than D ms")
    p.add_argument("--pattern", metavar="RE",
                   help="only transactional ids the regular expression matches in whole")
    p.set_defaults(func=list_)

    p = actions.add_parser("describe", parents=[parent],
                           help="one transactional id's state at its coordinator")
    p.add_argument("--transactional-id", required=True, metavar="ID")
    p.set_defaults(func=describe)

    p = actions.add_parser("describe-producers", parents=[parent],
                           help="the active producers of a partition")
    _partition_options(p)
    p.add_argument("--broker-id", type=int, metavar="N",
                   help="ask this broker (default: the partition's leader)")
    p.set_defaults(func=describe_producers)

    p = actions.add_parser("abort", parents=[parent],
                           help="abort a hanging transaction on one partition")
    _partition_options(p)
    p.add_argument("--start-offset", type=int, metavar="OFFSET",
                   help="the first offset of the open transaction (finds its producer)")
    p.add_argument("--producer-id", type=int, metavar="N", help="without --start-offset")
    p.add_argument("--producer-epoch", type=int, metavar="N", help="with --producer-id")
    p.add_argument("--coordinator-epoch", type=int, metavar="N", help="with --producer-id")
    p.set_defaults(func=abort)

    p = actions.add_parser("find-hanging", parents=[parent],
                           help="open transactions their coordinator does not know of")
    p.add_argument("--broker-id", type=int, metavar="N",
                   help="search the partitions with a replica on this broker")
    p.add_argument("--topic", help="search this topic (required with --partition)")
    p.add_argument("--partition", type=int, help="search this partition")
    p.add_argument("--max-transaction-timeout", type=int, metavar="MIN",
                   default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                   help="only transactions open longer than this many minutes (default "
                        f"{DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN})")
    p.set_defaults(func=find_hanging)


def _partition_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)


def _tp(args: argparse.Namespace) -> TopicPartition:
    from millrace.client.admin import TopicPartition

    return TopicPartition(args.topic, args.partition)


# ---------------------------------------------------------------------- list, describe
def list_(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        listings = admin.list_transactions(
            states=parse_names(args.state) or None, producer_ids=args.producer_id,
            duration_ms=args.duration_ms, transactional_id_pattern=args.pattern)
    if args.output == "json":
        print_json(listings)
    else:
        print(format_table(LIST_HEADERS, [(t.transactional_id, t.coordinator_id,
                                           t.producer_id, t.state) for t in listings]))
    return 0


def describe_row(transactional_id: str, d: TransactionDescription, now_ms: int
                 ) -> tuple[Any, ...]:
    start = d.transaction_start_time_ms
    return (d.coordinator_id, transactional_id, d.producer_id, d.producer_epoch, d.state,
            d.transaction_timeout_ms, "None" if start is None else start,
            "None" if start is None else now_ms - start,
            ",".join(str(tp) for tp in sorted(d.topic_partitions)))


def describe(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    with admin_client(args) as admin:
        d = admin.describe_transactions([tid])[tid].result()
    row = describe_row(tid, d, clock.milliseconds())
    if args.output == "json":
        print_json({"transactional_id": tid, **_jsonable_description(d),
                    "transaction_duration_ms": None if row[7] == "None" else row[7]})
    else:
        print(format_table(DESCRIBE_HEADERS, [row]))
    return 0


def _jsonable_description(d: TransactionDescription) -> dict[str, Any]:
    return {"coordinator_id": d.coordinator_id, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "state": str(d.state),
            "transaction_timeout_ms": d.transaction_timeout_ms,
            "transaction_start_time_ms": d.transaction_start_time_ms,
            "topic_partitions": [str(tp) for tp in sorted(d.topic_partitions)]}


# ---------------------------------------------------------------------- producers
def producer_row(p: ProducerState) -> tuple[Any, ...]:
    return (p.producer_id, p.producer_epoch,
            -1 if p.coordinator_epoch is None else p.coordinator_epoch, p.last_sequence,
            p.last_timestamp, "None" if p.current_transaction_start_offset is None
            else p.current_transaction_start_offset)


def describe_producers(args: argparse.Namespace) -> int:
    tp = _tp(args)
    with admin_client(args) as admin:
        state = admin.describe_producers([tp], broker_id=args.broker_id)[tp].result()
    if args.output == "json":
        print_json(state.active_producers)
    else:
        print(format_table(PRODUCER_HEADERS, [producer_row(p) for p in state.active_producers]))
    return 0


# ---------------------------------------------------------------------- abort
def abort(args: argparse.Namespace) -> int:
    from millrace.client.admin import AbortTransactionSpec

    tp = _tp(args)
    with admin_client(args) as admin:
        if args.start_offset is not None:
            spec = _spec_at(admin, tp, args.start_offset)
        elif args.producer_id is None:
            raise CommandError("The transaction to abort must be identified either with "
                               "--start-offset or with --producer-id, --producer-epoch and "
                               "--coordinator-epoch")
        else:
            for option in ("producer_epoch", "coordinator_epoch"):
                if getattr(args, option) is None:
                    raise CommandError(f"Missing required argument "
                                       f"--{option.replace('_', '-')}")
            spec = AbortTransactionSpec(tp, args.producer_id, args.producer_epoch,
                                        max(args.coordinator_epoch, 0))
        admin.abort_transaction(spec)
    if args.output == "json":
        print_json({"aborted": spec})
    else:
        print(f"Aborted the transaction of producer {spec.producer_id} (epoch "
              f"{spec.producer_epoch}) on {tp}.")
    return 0


def _spec_at(admin: KafkaAdminClient, tp: TopicPartition, start_offset: int) -> Any:
    from millrace.client.admin import AbortTransactionSpec

    state = admin.describe_producers([tp])[tp].result()
    for p in state.active_producers:
        if p.current_transaction_start_offset == start_offset:
            return AbortTransactionSpec(tp, p.producer_id, p.producer_epoch,
                                        p.coordinator_epoch or 0)
    raise CommandError(f"Could not find any open transactions starting at offset "
                       f"{start_offset} on partition {tp}")


# ---------------------------------------------------------------------- find-hanging
def open_transactions(states: Mapping[TopicPartition, Iterable[ProducerState]], now_ms: int,
                      max_timeout_ms: int) -> list[tuple[TopicPartition, ProducerState]]:
    """The producers with an open transaction that has run longer than the timeout
    (measured from the producer's last write, as Kafka's tool does)."""
    return [(tp, p) for tp, producers in states.items() for p in producers
            if p.current_transaction_start_offset is not None
            and now_ms - p.last_timestamp > max_timeout_ms]


def hanging(candidates: list[tuple[TopicPartition, ProducerState]],
            transactional_ids: Mapping[int, str],
            descriptions: Mapping[str, TransactionDescription | None]
            ) -> list[tuple[TopicPartition, ProducerState]]:
    """Kafka's rule: hanging when no transactional id lists the producer id, the id is
    unknown to its coordinator, or its description does not name the partition (the
    coordinator would write that partition's marker itself otherwise)."""
    out = []
    for tp, p in candidates:
        tid = transactional_ids.get(p.producer_id)
        d = None if tid is None else descriptions.get(tid)
        if d is None or tp not in d.topic_partitions:
            out.append((tp, p))
    return out


def _partitions_to_search(admin: KafkaAdminClient, args: argparse.Namespace
                          ) -> list[TopicPartition]:
    from millrace.client.admin import TopicPartition

    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    topics = [args.topic] if args.topic is not None else \
        [t.name for t in admin.list_topics(list_internal=True)]
    found = []
    for name, desc in admin.describe_topics(topics).all().items():
        for p in desc.partitions:
            if args.broker_id is None or any(r.id == args.broker_id for r in p.replicas):
                found.append(TopicPartition(name, p.partition))
    return found


def find_hanging(args: argparse.Namespace) -> int:
    from millrace.common.errors import TransactionalIdNotFoundError

    if args.topic is None and args.broker_id is None:
        raise CommandError("The `find-hanging` command requires either --topic or "
                           "--broker-id to limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * _MS_PER_MIN
    found: list[tuple[TopicPartition, ProducerState]] = []
    with admin_client(args) as admin:
        partitions = _partitions_to_search(admin, args)
        states = admin.describe_producers(partitions).all() if partitions else {}
        candidates = open_transactions(
            {tp: s.active_producers for tp, s in states.items()}, clock.milliseconds(),
            max_timeout_ms)
        if candidates:
            pids = sorted({p.producer_id for _, p in candidates})
            ids = {t.producer_id: t.transactional_id
                   for t in admin.list_transactions(producer_ids=pids)
                   if t.producer_id in pids}
            descriptions: dict[str, TransactionDescription | None] = {}
            for tid, future in admin.describe_transactions(ids.values()).items():
                error = future.exception()
                if isinstance(error, TransactionalIdNotFoundError):
                    descriptions[tid] = None
                elif error is not None:
                    raise error
                else:
                    descriptions[tid] = future.result()
            found = hanging(candidates, ids, descriptions)
    now = clock.milliseconds()
    rows = [(tp.topic, tp.partition, p.producer_id, p.producer_epoch,
             -1 if p.coordinator_epoch is None else p.coordinator_epoch,
             p.current_transaction_start_offset, p.last_timestamp,
             (now - p.last_timestamp) // _MS_PER_MIN) for tp, p in found]
    if args.output == "json":
        print_json([dict(zip(HANGING_HEADERS, row, strict=True)) for row in rows])
    else:
        print(format_table(HANGING_HEADERS, rows))
    return 0
