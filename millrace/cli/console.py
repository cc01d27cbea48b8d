"""``millrace produce`` and ``millrace consume``: the console producer and consumer.

Habits of kafka-console-producer/-consumer: lines from stdin (or ``--file``) become record
values, ``--key-separator`` splits a key off each line (``--parse-key``), ``--header k=v``
adds headers; the consumer prints values (optionally key, partition, offset, timestamp,
headers) or one JSON object per record, from the committed offset or ``--from-beginning``.

Schemas (``--value-format avro|json-schema|protobuf``, ``--key-format`` likewise, with
``--schema-registry URL``): the producer reads each line (and key, with ``--parse-key``) as
JSON, converts it to the schema of ``--value-schema-file`` and writes it in the Confluent
wire format, the schema registered under ``<topic>-value`` (``-key``) first; a line that
does not fit stops the command naming the line.  The consumer decodes by each record's
schema id and prints JSON; a record that does not decode stops it naming the topic,
partition and offset (what was printed before it is committed).  The conversions are
``millrace.cli.schema_formats``'.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import logging
import os
import stat
import sys
import uuid
from typing import Any, BinaryIO, cast

from millrace.cli import schemas
from millrace.cli.common import (
    DEFAULT_TIMEOUT_MS,
    CommandError,
    client_configs,
    configure_client_logging,
    connection_options,
    error_line,
    parse_key_value,
    print_json,
    progress_bar,
)

log = logging.getLogger(__name__)

FORMAT_NAMES = ("avro", "json-schema", "protobuf")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("produce", parents=[connection_options(),
                                           schemas.registry_options(prefixed=True)],
                       help="send lines from stdin or a file as records",
                       description="Each input line becomes one record (kafka-console-producer "
                                   "habits). With --output json a summary goes to stdout; "
                                   "on a terminal a progress bar shows on stderr.")
    p.add_argument("--topic", "-t", required=True, help="the topic to write to")
    p.add_argument("--file", "-f", help="read lines from this file instead of stdin")
    p.add_argument("--parse-key", action="store_true",
                   help="split a key off each line at the key separator")
    p.add_argument("--key-separator", default="\t",
                   help="key/value separator with --parse-key (default TAB)")
    p.add_argument("--header", action="append", metavar="KEY=VALUE",
                   help="add this header to every record (repeatable)")
    p.add_argument("--partition", type=int,
                   help="send every record to this partition (default: by key / sticky)")
    p.add_argument("--acks", default="all", choices=("0", "1", "all", "-1"),
                   help="acknowledgements to wait for (default all)")
    p.add_argument("--compression", default="none",
                   choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="compression codec (default none)")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="any producer config (repeatable)")
    p.add_argument("--transactional-id", metavar="ID",
                   help="write in transactions with this transactional.id: the input (or "
                        "each --transaction-size records) is committed at once or not at "
                        "all; on an error the transaction is aborted")
    p.add_argument("--transaction-size", type=int, default=0, metavar="N",
                   help="with --transactional-id, commit every N records (default: the "
                        "whole input in one transaction)")
    for side in ("value", "key"):
        p.add_argument(f"--{side}-format", choices=FORMAT_NAMES,
                       help=f"write each {side} (a JSON document) with this schema format "
                            f"and the schema registry (default: the line's bytes as they are)")
        p.add_argument(f"--{side}-schema-file", metavar="FILE",
                       help=f"the {side} schema (.avsc, .json, .proto or a protoc "
                            f"descriptor set), registered under <topic>-{side}")
    p.set_defaults(func=produce)

    c = sub.add_parser("consume", parents=[connection_options(),
                                           schemas.registry_options(prefixed=True)],
                       help="print records of a topic",
                       description="Print records as they arrive (Ctrl-C to stop); with "
                                   "--output json, one JSON object per record.")
    c.add_argument("--topic", "-t", required=True, help="the topic to read")
    c.add_argument("--group", "-g", help="consumer group (default: a new console group)")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when the group has none committed")
    c.add_argument("--max-messages", type=int, help="exit after this many records")
    c.add_argument("--idle-timeout", type=int, metavar="MS",
                   help="exit when no record arrives for this long (counted once the "
                        "group has assigned partitions)")
    c.add_argument("--print-key", action="store_true", help="print each record's key")
    c.add_argument("--print-partition", action="store_true", help="print the partition")
    c.add_argument("--print-offset", action="store_true", help="print the offset")
    c.add_argument("--print-timestamp", action="store_true", help="print the timestamp")
    c.add_argument("--print-headers", action="store_true", help="print the headers")
    c.add_argument("--key-separator", default="\t",
                   help="separator between the printed fields (default TAB)")
    c.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                   help="any consumer config (repeatable)")
    for side in ("value", "key"):
        c.add_argument(f"--{side}-format", choices=FORMAT_NAMES,
                       help=f"decode each {side} with the schema registry and print it as "
                            "JSON (default: text, or base64: for bytes that are not UTF-8)")
    c.set_defaults(func=consume)


def _producer_configs(args: argparse.Namespace) -> dict[str, Any]:
    configs = client_configs(args)
    configs.pop("default.api.timeout.ms", None)
    configs.update({"acks": args.acks, "compression.type": args.compression})
    # --timeout bounds the wait for metadata / buffer space and each record's delivery
    timeout = DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout
    configs["max.block.ms"] = timeout
    configs["delivery.timeout.ms"] = timeout + 100  # >= linger.ms + request timeout
    configs.update(dict(parse_key_value(x, "--producer-property")
                        for x in args.producer_property or []))
    if getattr(args, "transactional_id", None):
        configs["transactional.id"] = args.transactional_id
    return configs


class _Transactions:
    """``produce --transactional-id``: begin, commit every ``size`` records (0: at the
    end), abort on an error; a fenced producer is reported in one line."""

    def __init__(self, producer: Any, transactional_id: str | None, size: int) -> None:
        self.producer = producer
        self.transactional_id = transactional_id
        self.size = size
        self.in_batch = 0
        self.open = False
        self.committed = 0

    def __enter__(self) -> _Transactions:
        if self.transactional_id:
            self._guard(self.producer.init_transactions)
        return self

    def before_send(self) -> None:
        if self.transactional_id and not self.open:
            self._guard(self.producer.begin_transaction)
            self.open = True

    def after_send(self) -> None:
        self.in_batch += 1
        if self.transactional_id and self.size and self.in_batch >= self.size:
            self.commit()

    def commit(self) -> None:
        if self.open:
            self._guard(self.producer.commit_transaction)
            self.open = False
            self.committed += self.in_batch
            self.in_batch = 0

    def __exit__(self, et: Any, e: Any, tb: Any) -> None:
        if not self.open:
            return
        if e is None:
            self.commit()
            return
        from millrace.client.producer.errors import is_fatal
        if isinstance(e, CommandError) and e.__cause__ is not None and is_fatal(e.__cause__):
            return
        try:
            self.producer.abort_transaction()
        except Exception as abort_error:  # the first error is the one to report
            log.debug("abort failed: %s", abort_error)

    def _guard(self, call: Any) -> None:
        from millrace.client.producer.errors import ProducerFencedError, is_fatal
        try:
            call()
        except ProducerFencedError as e:
            raise CommandError(f"producer fenced: another producer with transactional id "
                               f"{self.transactional_id!r} took over") from e
        except Exception as e:
            if self.open and not is_fatal(e):
                try:
                    self.producer.abort_transaction()
                except Exception as abort_error:
                    log.debug("abort failed: %s", abort_error)
                self.open = False
            raise CommandError(f"transaction failed: {error_line(e)}") from e


def _input_size(source: BinaryIO) -> int | None:
    """The size of a regular file (for a progress bar in bytes), else None."""
    try:
        info = os.fstat(source.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _encoders(args: argparse.Namespace) -> tuple[Any, Any]:
    """(key encoder, value encoder), each None without its ``--*-format``; the schemas
    parsed and registered now, before any line is read."""
    from millrace.cli.schema_formats import FORMATS, RecordEncoder
    from millrace.client.schema_registry import InvalidSchemaError
    from millrace.client.schema_registry.client import SchemaRegistryError

    for side in ("value", "key"):
        fmt, path = getattr(args, f"{side}_format"), getattr(args, f"{side}_schema_file")
        if fmt and not path:
            raise CommandError(f"--{side}-format {fmt} needs --{side}-schema-file")
        if path and not fmt:
            raise CommandError(f"--{side}-schema-file needs --{side}-format "
                               f"({'|'.join(FORMAT_NAMES)})")
    if args.key_format and not args.parse_key:
        raise CommandError("--key-format needs --parse-key (the key is split off each line)")
    if not (args.key_format or args.value_format):
        return None, None
    client = schemas.registry_client(args)
    encoders: list[Any] = []
    for side in ("key", "value"):
        fmt, path = getattr(args, f"{side}_format"), getattr(args, f"{side}_schema_file")
        if not fmt:
            encoders.append(None)
            continue
        option = f"--{side}-schema-file"
        schema = schemas.read_schema_file(path, FORMATS[fmt], option=option)
        actual = schemas.schema_type_of(path, None, option) \
            if path.lower().endswith(tuple(schemas.EXTENSIONS)) else schema.schema_type
        if actual != schema.schema_type:
            raise CommandError(f"{option} {path} is a {actual} schema, not --{side}-format "
                               f"{fmt}")
        try:
            parsed = client.parse(schema)
        except InvalidSchemaError as e:
            raise CommandError(f"{option} {path}: {e}") from None
        encoder = RecordEncoder(client, fmt, schema, parsed, args.topic, side == "key")
        try:
            encoder.register()
        except SchemaRegistryError as e:
            raise CommandError(f"registering {option} {path} under subject "
                               f"{encoder.subject}: {e}") from None
        encoders.append(encoder)
    return encoders[0], encoders[1]


def _encode(encoder: Any, raw: bytes, line_no: int, side: str) -> bytes:
    from millrace.cli.schema_formats import DoesNotFit

    try:
        document = json.loads(raw)
    except ValueError as e:  # UnicodeDecodeError is a ValueError
        raise CommandError(f"line {line_no}: the {side} is not JSON: {e}") from None
    try:
        data: bytes = encoder.encode(document)
    except DoesNotFit as e:
        raise CommandError(f"line {line_no}: the {side} does not fit the schema of subject "
                           f"{encoder.subject}: {' '.join(str(e).split())}") from None
    return data


def produce(args: argparse.Namespace) -> int:
    from millrace.client.producer import KafkaProducer, ProducerRecord

    configure_client_logging()
    configs = _producer_configs(args)
    headers = [(k, v.encode()) for k, v in (parse_key_value(h, "--header")
                                            for h in args.header or [])]
    separator = args.key_separator.encode()
    if args.partition is not None and args.partition < 0:
        raise CommandError(f"--partition must not be negative, got {args.partition}")
    if args.parse_key and not separator:
        raise CommandError("--key-separator must not be empty")
    key_encoder, value_encoder = _encoders(args)
    source: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    sent = 0
    line_no = 0
    errors: list[BaseException] = []

    def on_done(_: Any, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)

    try:
        name = os.path.basename(args.file) if args.file else "stdin"
        # bytes in, bytes out: no serializers, so the generic parameters are moot here
        if args.transaction_size < 0:
            raise CommandError(f"--transaction-size must not be negative, got "
                               f"{args.transaction_size}")
        with cast(Any, KafkaProducer(configs)) as producer, contextlib.ExitStack() as stack, \
                progress_bar(f"{name} -> {args.topic}", _input_size(source), transfer=True,
                             enabled=not source.isatty()) as bar:  # no bar while typing
            read = 0
            txn = stack.enter_context(_Transactions(producer, args.transactional_id,
                                                    args.transaction_size))
            for line in source:
                read += len(line)
                line_no += 1
                value = line[:-1] if line.endswith(b"\n") else line
                if (key_encoder or value_encoder) and not value.strip():
                    continue  # a blank line in a JSON lines file
                record_key: bytes | None = None
                if args.parse_key:
                    if separator not in value:
                        raise CommandError(f"line {line_no} has no key separator "
                                           f"{args.key_separator!r}")
                    record_key, value = value.split(separator, 1)
                if key_encoder is not None and record_key is not None:
                    record_key = _encode(key_encoder, record_key, line_no, "key")
                if value_encoder is not None:
                    value = _encode(value_encoder, value, line_no, "value")
                txn.before_send()
                producer.send(ProducerRecord(args.topic, value, key=record_key,
                                             partition=args.partition,
                                             headers=list(headers) or None), on_done)
                txn.after_send()
                sent += 1
                if bar.enabled and sent % 256 == 0:
                    bar.update(completed=read)
            bar.update(completed=read, description=f"{name} -> {args.topic}: flushing")
            if args.transactional_id:
                txn.commit()
            producer.flush()
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    if args.output == "json":
        print_json({"topic": args.topic, "sent": sent - len(errors), "failed": len(errors),
                    "first_error": error_line(errors[0]) if errors else None})
    if errors:
        raise CommandError(f"{len(errors)} of {sent} records failed; first: "
                           f"{error_line(errors[0])}")
    if args.output != "json":
        subjects = [e.subject for e in (key_encoder, value_encoder) if e is not None]
        print(f"sent {sent} records to {args.topic}" +
              (f" (schemas: {', '.join(subjects)})" if subjects else ""), file=sys.stderr)
    return 0


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _check_topic(consumer: Any, topic: str, auto_create: bool, timeout_ms: int) -> None:
    """Before subscribing: the broker must answer within ``timeout_ms`` (else the library's
    "no broker reachable at ..." error), and the topic must exist -- or be created now by
    the broker (Kafka's ``auto.create.topics.enable``, on by default), which is said on
    stderr so a mistyped name does not pass unnoticed."""
    if topic in consumer.list_topics(timeout_ms):
        return
    if not auto_create:
        raise CommandError(f"topic '{topic}' does not exist (allow.auto.create.topics=false)")
    if not consumer.partitions_for(topic, timeout_ms):
        raise CommandError(f"topic '{topic}' does not exist and the broker did not create it "
                           "(auto.create.topics.enable=false)")
    print(f"created topic '{topic}' (auto.create.topics.enable)", file=sys.stderr)


def consume(args: argparse.Namespace) -> int:
    from millrace.client.consumer import KafkaConsumer
    from millrace.client.consumer.config import ConsumerConfig

    configure_client_logging()
    configs = client_configs(args)
    configs.pop("default.api.timeout.ms", None)
    configs["group.id"] = args.group or f"console-consumer-{uuid.uuid4().hex[:8]}"
    configs["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    configs["enable.auto.commit"] = False  # we commit exactly what was printed
    configs.update(dict(parse_key_value(x, "--consumer-property")
                        for x in args.consumer_property or []))
    if args.max_messages is not None and args.max_messages < 1:
        raise CommandError("--max-messages must be at least 1")
    from millrace.client.cluster import TopicPartition

    decoders: dict[str, Any] = {}
    if args.key_format or args.value_format:
        from millrace.cli.schema_formats import RecordDecoder

        client = schemas.registry_client(args)
        for side in ("key", "value"):
            fmt = getattr(args, f"{side}_format")
            if fmt:
                decoders[side] = RecordDecoder(client, fmt)

    seen = 0
    idle_ms = 0
    printed: dict[TopicPartition | tuple[str, int], int] = {}  # next offset to commit
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(config=configs)
    try:
        _check_topic(consumer, args.topic, ConsumerConfig(configs)["allow.auto.create.topics"],
                     DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout)
        consumer.subscribe([args.topic])
        while args.max_messages is None or seen < args.max_messages:
            records = list(consumer.poll(500))
            if not records:
                if consumer.assignment():  # the group's first join is not idleness
                    idle_ms += 500
                if args.idle_timeout is not None and idle_ms >= args.idle_timeout:
                    break
                continue
            idle_ms = 0
            for r in records:
                if args.max_messages is not None and seen >= args.max_messages:
                    break
                try:
                    decoded = _decode(decoders, r)
                except CommandError:
                    sys.stdout.flush()
                    if printed:  # a rerun of the group starts at the record that failed
                        consumer.commit_sync(printed)
                    raise
                seen += 1
                _print_record(args, r, decoded)
                printed[TopicPartition(r.topic, r.partition)] = r.offset + 1
            sys.stdout.flush()
        if printed:  # commit what was printed, not the rest of the last poll
            consumer.commit_sync(printed)
    finally:
        consumer.close()
    print(f"Processed a total of {seen} messages", file=sys.stderr)
    return 0


def _decode(decoders: dict[str, Any], r: Any) -> dict[str, Any]:
    """The record's key and value decoded by their ``--*-format`` (as JSON values);
    ``CommandError`` naming topic, partition and offset when one does not decode."""
    from millrace.client.errors import SerializationError
    from millrace.client.schema_registry.client import SchemaRegistryError

    decoded: dict[str, Any] = {}
    for side, decoder in decoders.items():
        data = r.key if side == "key" else r.value
        try:
            decoded[side] = decoder.decode(r.topic, data)
        except (SerializationError, SchemaRegistryError) as e:
            cause = e if isinstance(e, SchemaRegistryError) else e.__cause__
            unreachable = isinstance(cause, SchemaRegistryError) and cause.http_status is None
            what = (f"its {decoder.format} schema could not be fetched" if unreachable
                    else f"the {side} does not decode as {decoder.format}")
            raise CommandError(f"topic {r.topic} partition {r.partition} offset {r.offset}: "
                               f"{what}: {' '.join(str(e).split())}") from None
    return decoded


def _shown(decoded: dict[str, Any], side: str, data: bytes | None) -> str:
    if side in decoded:
        return json.dumps(decoded[side], ensure_ascii=False)
    return _text(data)


def _print_record(args: argparse.Namespace, r: Any,
                  decoded: dict[str, Any] | None = None) -> None:
    decoded = decoded or {}
    if args.output == "json":
        def field(side: str, data: bytes | None) -> Any:
            if side in decoded:
                return decoded[side]
            return None if data is None else _text(data)

        print(json.dumps({
            "topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp, "key": field("key", r.key),
            "value": field("value", r.value),
            "headers": [[k, None if v is None else _text(v)] for k, v in (r.headers or [])],
        }))
        return
    parts = []
    if args.print_timestamp:
        parts.append(f"CreateTime:{r.timestamp}")
    if args.print_partition:
        parts.append(f"Partition:{r.partition}")
    if args.print_offset:
        parts.append(f"Offset:{r.offset}")
    if args.print_headers:
        parts.append(",".join(f"{k}:{_text(v)}" for k, v in (r.headers or [])) or "NO_HEADERS")
    if args.print_key:
        parts.append(_shown(decoded, "key", r.key))
    parts.append(_shown(decoded, "value", r.value))
    print(args.key_separator.join(parts) if len(parts) > 1 else parts[0])
