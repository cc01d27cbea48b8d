"""The broker's fixed cost per produce request, as librdkafka's many-partition traffic
shows it: one ``millrace broker`` child, one raw socket, N ProduceRequests (v9, acks=1)
of a single partition each, R x 100 B records per request, round-robin over P partitions,
up to K in flight (sent in groups of K/2, as a pipelining client does).

    .venv/bin/python bench/produce_requests.py [--requests 20000] [--records 40]
        [--partitions 1000] [--in-flight 32] [--override key=value ...]

librdkafka (confluent-kafka 2.16.1) sends one ProduceRequest per partition: at 1,000
partitions the broker serves ~16,000 requests of ~38 records for 600,000 records, so its
cost per request, not per partition in a request, is what ``partitions.py``'s row pays.
This prints requests/s and the broker's CPU microseconds per request (from
``/proc/<pid>/stat``), which a busy machine skews less than the rate.  The client is
plain Python over the protocol codec (no Kafka client library), so it measures the
broker, not a client.  Exit 1 on an error code in any response.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import partitions
from _common import BenchFailure, main_guard, parse_overrides

from millrace.launcher.broker_process import BrokerProcess
from millrace.protocol import ClientConnection, Response
from millrace.protocol.types import ProduceRequest
from millrace.record import RecordBatchBuilder

VERSION = 9


def broker_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def request(topic: str, partition: int, records: bytes) -> Any:
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition,
                                                                records=records)
    return ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[data])])


def run() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000, metavar="N")
    ap.add_argument("--records", type=int, default=40, metavar="R", help="per request")
    ap.add_argument("--partitions", type=int, default=1000, metavar="P")
    ap.add_argument("--in-flight", type=int, default=32, metavar="K")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting (can be repeated)")
    args = ap.parse_args()
    builder = RecordBatchBuilder()
    for i in range(args.records):
        builder.append(1_700_000_000_000 + i, None, bytes(100))
    batch = builder.build()
    with tempfile.TemporaryDirectory(prefix="millrace-bench-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides=parse_overrides(ap, args.override)).start()
        try:
            assert broker.proc is not None
            partitions.create_topics(broker.bootstrap, {"bench-requests": args.partitions})
            conn = ClientConnection("bench-requests")
            frames = [conn.send_request(request("bench-requests", i % args.partitions,
                                                batch), VERSION)[1]
                      for i in range(args.requests)]
            host, port = broker.bootstrap.rsplit(":", 1)
            with socket.create_connection((host, int(port))) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                cpu0, t0 = broker_cpu(broker.proc.pid), time.perf_counter()
                sent = answered = reads = 0
                while answered < args.requests:
                    if sent < args.requests and sent - answered <= args.in_flight // 2:
                        n = min(args.requests, answered + args.in_flight) - sent
                        sock.sendall(b"".join(frames[sent:sent + n]))
                        sent += n
                    data = sock.recv(1 << 20)
                    if not data:
                        raise BenchFailure("the broker closed the connection")
                    reads += 1
                    conn.receive_data(data)
                    while isinstance(event := conn.next_event(), Response):
                        answered += 1
                        for topic in event.body.responses:
                            for part in topic.partition_responses:
                                if part.error_code:
                                    raise BenchFailure(f"error {part.error_code} for "
                                                       f"partition {part.index}")
                secs = time.perf_counter() - t0
                user, system = (b - a for a, b in zip(cpu0, broker_cpu(broker.proc.pid),
                                                      strict=True))
        finally:
            broker.stop()
    print(f"{args.requests} requests of 1 partition x {args.records} x 100 B over "
          f"{args.partitions} partitions, {args.in_flight} in flight: "
          f"{args.requests / secs:,.0f} requests/s, broker "
          f"{1e6 * (user + system) / args.requests:.1f} CPU us/request "
          f"({1e6 * system / args.requests:.1f} of them in the kernel), "
          f"{args.requests / reads:.1f} responses per client read")


if __name__ == "__main__":
    main_guard(run)
