"""Client quota benchmark: an unthrottled producer's ingest alone and alongside a
producer held to its quota, on the same broker, in one run.

    .venv/bin/python bench/quotas.py [--quick] [--repeat N] [--json out.json]

One ``millrace broker`` child process (PLAINTEXT).  At start-up the client id
``bench-throttled`` gets ``producer_byte_rate`` = 1 MiB/s through AlterClientQuotas; the
benchmark's own producer has no quota.  Per case (broker_ingest's acks=1 cases, through
its ``ingest`` function: 100 B and 1 KiB records, confluent-kafka, one partition):

* ``alone``: the unthrottled producer on its own (the quota is configured, nobody is
  over it);
* ``alongside``: the same while a second process produces 1 KiB records as fast as it
  can as ``bench-throttled`` to another topic.  librdkafka ignores ``throttle_time_ms``,
  so only the broker's mute holds that producer back (KIP-219); its achieved rate is
  printed from its topic's end offset, over its whole life of about 12 s.  Expect 1x to
  2x the quota there: Kafka's rate is a sum over ``quota.window.num`` samples divided by
  at least ``quota.window.num - 1`` windows, so 10 s worth of quota goes through at
  once when the producer starts, and again as those first samples expire 11 s later;
  over long runs it averages out at the quota.

The two alternate order between repeats.  The ratio is alongside rec/s over alone rec/s.
Goal (reported, never asserted): >= 0.9 -- a throttled client costs the broker its
quota's worth and nothing more, and never holds up anyone else.  The throttled process
is separate so that it does not compete with the measured client for this process's GIL.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import time
from multiprocessing.synchronize import Event
from typing import Any

from _common import (
    CLIENT_QUIET,
    BenchFailure,
    Goal,
    MillraceTarget,
    Result,
    Target,
    main_guard,
    parse_args,
    print_table,
    produce_records,
    scaled,
    watermarks,
    write_json,
)
from broker_ingest import CASES as INGEST_CASES
from broker_ingest import ingest
from confluent_kafka import Producer

from millrace.protocol.types import AlterClientQuotasRequest
from millrace.testing.raw_connection import RawConnection

ALONE, ALONGSIDE = "alone", "alongside"
THROTTLED_ID = "bench-throttled"
QUOTA = 1024 * 1024  # bytes/s
CASES = tuple(c for c in INGEST_CASES if c.acks == "1")
BURST_RECORDS = 10 * QUOTA // 1024  # (11 - 1) windows of 1 s at the quota, 1 KiB each
MIN_THROTTLED_S = 12.0  # past quota.window.num x quota.window.size.seconds


def goal(mine: Result | None, base: Result | None) -> str:
    if mine is None or base is None or not base.rec_s:
        return ""
    return ("met" if mine.rec_s / base.rec_s >= 0.9 else "NOT met") + " (>=0.9 of alone)"


def set_quota(port: int) -> None:
    req = AlterClientQuotasRequest(validate_only=False, entries=[
        AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntryData.EntityData(
                entity_type="client-id", entity_name=THROTTLED_ID)],
            ops=[AlterClientQuotasRequest.EntryData.OpData(
                key="producer_byte_rate", value=float(QUOTA), remove=False)])])
    with RawConnection(port) as conn:
        resp = conn.call(req, 1)
    if [e.error_code for e in resp.entries] != [0]:
        raise BenchFailure(f"AlterClientQuotas failed: {resp}")


def flood(bootstrap: str, topic: str, ready: Event, stop: Event) -> None:
    """The throttled producer (a child process): 1 KiB records as fast as librdkafka
    takes them until ``stop``; what is still queued then is dropped."""
    p = Producer({"bootstrap.servers": bootstrap, "client.id": THROTTLED_ID, "acks": "1",
                  "linger.ms": 5, "enable.idempotence": False,
                  "queue.buffering.max.kbytes": 16 * 1024, **CLIENT_QUIET})
    p.list_topics(topic, timeout=10)
    record = bytes(1024)
    ready.set()
    while not stop.is_set():
        try:
            p.produce(topic, record, partition=0)
        except BufferError:
            p.poll(0.01)
    p.purge()
    p.flush(5)


class View(Target):
    """The one broker under a second name (a table column)."""

    def __init__(self, broker: MillraceTarget, name: str) -> None:
        self.name = name
        self.bootstrap = broker.bootstrap
        self.broker_pid = broker.broker_pid
        self._broker = broker

    def create_topic(self, topic: str) -> None:
        self._broker.create_topic(topic)

    def close(self) -> None:
        pass


def ingest_alongside(t: View, case: Any, topic: str, count: int, rep: int) -> Result:
    """``ingest`` while the throttled producer floods its own topic.  The measurement
    starts once its first burst has landed (one quota window's worth is let through at
    once: the rate's window is never shorter than ``quota.window.num - 1`` samples), so
    the measured client meets a producer that is muted; the flood runs on to at least
    ``MIN_THROTTLED_S`` and its rate is reported over its whole life, burst included."""
    ctx = mp.get_context("spawn")  # a fresh interpreter: no fork of librdkafka's threads
    flood_topic = f"bench-quota-flood-{case.size}-{rep}"
    t.create_topic(flood_topic)
    ready, stop = ctx.Event(), ctx.Event()
    child = ctx.Process(target=flood, args=(t.bootstrap, flood_topic, ready, stop))
    child.start()
    try:
        if not ready.wait(30):
            raise BenchFailure("the throttled producer did not start")
        born = time.perf_counter()
        while (landed := watermarks(t.bootstrap, flood_topic)[1]) < BURST_RECORDS:
            if time.perf_counter() > born + 30:
                raise BenchFailure(f"the throttled producer wrote only {landed} records")
            time.sleep(0.1)
        result = ingest(t, case, topic, count)
        time.sleep(max(0.0, born + MIN_THROTTLED_S - time.perf_counter()))
        landed = watermarks(t.bootstrap, flood_topic)[1]
        life = time.perf_counter() - born
    finally:
        stop.set()
        child.join(30)
        if child.is_alive():
            child.kill()
    rate = landed * 1024 / life
    result.extra["throttled_bytes_s"] = round(rate)
    print(f"  {'':<14} {'':<9} throttled client: {landed * 1024 / 1e6:.1f} MB in its "
          f"{life:.1f} s = {rate / QUOTA:.2f}x its quota", flush=True)
    return result


def run() -> None:
    args = parse_args(__doc__ or "")
    results: list[Result] = []
    broker = MillraceTarget(args.overrides)
    try:
        set_quota(int(broker.bootstrap.rsplit(":", 1)[1]))
        alone, alongside = View(broker, ALONE), View(broker, ALONGSIDE)
        broker.create_topic("bench-quota-warmup")  # connections, allocator: untimed
        produce_records(broker.bootstrap, "bench-quota-warmup", bytes(100), 100_000)
        for rep, case in itertools.product(range(args.repeat), CASES):
            n = scaled(args, case.records)
            for view in ((alone, alongside) if rep % 2 == 0 else (alongside, alone)):
                topic = f"bench-quota-{view.name}-{case.size}-{rep}"
                if view is alone:
                    results.append(ingest(view, case, topic, n))
                else:
                    results.append(ingest_alongside(view, case, topic, n, rep))
    finally:
        broker.close()
    goals: dict[str, Goal] = {c.name: goal for c in CASES}
    rows: list[dict[str, Any]] = print_table(
        f"an unthrottled producer alone vs alongside one held to {QUOTA // 1024} KiB/s "
        "(confluent-kafka Producer, as broker_ingest)", results, goals, ALONGSIDE, ALONE)
    write_json(args.json, "quotas", rows)


if __name__ == "__main__":
    main_guard(run)
