"""The ``millrace`` command: argument parsing and output only; logic lives in the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


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
    for codec in CompressionType:
        builder = RecordBatchBuilder(compression=codec)
        for i in range(100):
            builder.append(1_700_000_000_000 + i, f"key-{i}".encode(), b"value " * 20,
                           [("h", b"v")])
        batch = RecordBatch(builder.build())
        batch.validate()
        count = sum(1 for _ in batch.records())
        print(f"record batch {codec.name.lower():6} {len(batch.buffer):6} bytes, "
              f"{count} records ok")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="millrace",
                                     description="A streaming platform that speaks Kafka.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("selftest", help="round-trip the codec and record formats").set_defaults(
        func=_selftest)
    sub.add_parser("version", help="print the version").set_defaults(
        func=lambda _: print(__import__("millrace").__version__) or 0)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
