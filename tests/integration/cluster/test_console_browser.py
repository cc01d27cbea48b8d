"""The web console in a real browser against a real 3-broker cluster.

``millrace console`` runs as a child process (``ConsoleProcess``) against the module's
cluster (ZooKeeper and three ``millrace broker`` processes); Playwright drives Debian's
``/usr/bin/chromium`` through ``executable_path`` (no browser download).  Every page load
is watched: a request to any host but loopback fails the test.  The console reads the
cluster only through the Kafka protocol, so what passes here passes for any Kafka.

Screenshots of each view go to ``$MILLRACE_CONSOLE_SCREENSHOTS`` when set (``docs/console/``
is refreshed that way), else under the test's temporary directory.

The test that pauses a follower runs last: it leaves the cluster as it found it once the
follower is resumed and back in the ISR.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import WAIT, admin, create_topic, wait_in_sync, wait_until
from console_support import EXPECT_MS, TOKEN, Guarded, api, state
from opentelemetry.proto.trace.v1 import trace_pb2
from playwright.sync_api import expect

from millrace.client.consumer import KafkaConsumer
from millrace.common.topic_partition import TopicPartition
from millrace.launcher.console_process import ConsoleProcess
from millrace.launcher.local_cluster import LocalCluster
from tests.integration.otlp_receiver import OtlpReceiver, attributes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def console(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ConsoleProcess]:
    with ConsoleProcess(cluster.bootstrap, tmp_path_factory.mktemp("console"),
                        interval_s=0.5) as process:
        yield process

# ---------------------------------------------------------------------- views
def test_overview_shows_the_brokers_the_controller_and_no_alerts(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded,
        shots: Path) -> None:
    page = guarded.page
    page.goto(console.url + "#/overview")
    expect(page.get_by_test_id("view-overview")).to_be_visible(timeout=EXPECT_MS)
    rows = page.get_by_test_id("broker-row")
    expect(rows).to_have_count(3, timeout=EXPECT_MS)
    controller = state(console)["cluster"]["controller"]
    assert controller in (1, 2, 3)
    for broker_id in (1, 2, 3):
        row = page.locator(f'[data-testid="broker-row"][data-broker-id="{broker_id}"]')
        expect(row).to_contain_text(cluster.broker(broker_id).bootstrap)
    expect(page.get_by_test_id("alerts")).to_contain_text("No alerts", timeout=EXPECT_MS)
    expect(page.get_by_test_id("live")).to_have_text(re.compile("live"), timeout=EXPECT_MS)
    expect(page.get_by_test_id("throughput-chart")).to_be_visible()
    expect(page.get_by_test_id("throughput-out-chart")).to_be_visible()
    page.screenshot(path=str(shots / "overview.png"), full_page=True)


def test_topics_list_and_detail_show_partitions_leaders_and_isr(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded,
        shots: Path) -> None:
    client = admin(cluster.bootstrap)
    view = create_topic(client, "console-orders", 3, 3)
    page = guarded.page
    page.goto(console.url + "#/topics")
    row = page.locator('[data-testid="topic-row"][data-topic="console-orders"]')
    expect(row).to_be_visible(timeout=EXPECT_MS)
    page.screenshot(path=str(shots / "topics.png"), full_page=True)
    row.get_by_role("link", name="console-orders").click()
    expect(page.get_by_test_id("view-topic")).to_be_visible(timeout=EXPECT_MS)
    expect(page.get_by_test_id("partition-row")).to_have_count(3, timeout=EXPECT_MS)
    for number, partition in view.items():
        cells = page.locator(f'[data-testid="partition-row"][data-partition="{number}"]')
        expect(cells).to_contain_text(str(partition.leader))
    timeline = page.get_by_test_id("timeline-entry")
    expect(timeline.first).to_be_visible(timeout=EXPECT_MS)
    page.screenshot(path=str(shots / "topic.png"), full_page=True)

    # edit a config, see the topic's own value, put the default back
    retention = page.locator('[data-testid="configs"] tr[data-config="retention.ms"]')
    expect(retention).to_contain_text("604800000", timeout=EXPECT_MS)
    edit = page.get_by_test_id("edit-configs")
    edit.locator('[name="set"]').fill("retention.ms=3600000")
    edit.locator('button[type="submit"]').click()
    expect(edit.get_by_test_id("configs-ok")).to_be_visible(timeout=EXPECT_MS)
    expect(retention).to_contain_text("3600000", timeout=EXPECT_MS)
    expect(retention).to_contain_text("DYNAMIC_TOPIC_CONFIG")
    edit.locator('[name="set"]').fill("")
    edit.locator('[name="delete"]').fill("retention.ms")
    edit.locator('button[type="submit"]').click()
    expect(retention).to_contain_text("604800000", timeout=EXPECT_MS)
    expect(retention).not_to_contain_text("DYNAMIC_TOPIC_CONFIG")
    # a config the broker does not know: its error, in the form
    edit.locator('[name="delete"]').fill("")
    edit.locator('[name="set"]').fill("retention.nonsense=1")
    edit.locator('button[type="submit"]').click()
    expect(edit.get_by_test_id("form-error")).to_contain_text("INVALID_CONFIG",
                                                              timeout=EXPECT_MS)


def test_a_record_produced_in_the_form_appears_in_the_browser(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded,
        shots: Path) -> None:
    create_topic(admin(cluster.bootstrap), "console-form", 2, 3)
    page = guarded.page
    page.goto(console.url + "#/messages")
    expect(page.get_by_test_id("view-messages")).to_be_visible(timeout=EXPECT_MS)
    form = page.get_by_test_id("produce")
    _choose(form, "topic", "console-form")
    form.locator('[name="partition"]').fill("1")
    form.locator('[name="key"]').fill("order-17")
    form.locator('[name="value"]').fill('{"status": "paid", "amount": 42}')
    form.locator('[name="headers"]').fill("source=console-test")
    form.locator('button[type="submit"]').click()
    result = page.get_by_test_id("produce-result")
    expect(result).to_contain_text("partition 1", timeout=EXPECT_MS)
    offset = int(re.search(r"offset (\d+)", result.inner_text()).group(1))  # type: ignore[union-attr]

    # a real consumer finds it where the console said
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": None})
    try:
        tp = TopicPartition("console-form", 1)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        records = wait_until("the produced record", lambda: list(consumer.poll(500)))
    finally:
        consumer.close()
    assert (records[0].key, records[0].value) == (b"order-17",
                                                   b'{"status": "paid", "amount": 42}')
    assert records[0].headers[0] == ("source", b"console-test")

    browse = page.get_by_test_id("browse")
    _choose(browse, "topic", "console-form")
    browse.locator('[name="q"]').fill("paid")
    _choose(browse, "format", "json")
    browse.locator('button[type="submit"]').click()
    row = page.locator(f'[data-testid="record-row"][data-partition="1"][data-offset="{offset}"]')
    expect(row).to_be_visible(timeout=EXPECT_MS)
    expect(row).to_contain_text("order-17")
    expect(row).to_contain_text('"amount": 42')
    expect(row).to_contain_text("source")
    page.screenshot(path=str(shots / "messages.png"), full_page=True)

    # its bytes on disk (DescribeLogDirs): the topic's, and partition 1's alone
    page.goto(console.url + "#/topics")
    size = page.locator('[data-testid="topic-row"][data-topic="console-form"] '
                        '[data-testid="topic-size"]')
    expect(size).to_have_attribute("data-bytes", re.compile(r"^[1-9]\d*$"), timeout=EXPECT_MS)
    expect(size).to_contain_text(re.compile(r"\d+ B"))
    page.goto(console.url + "#/topics/console-form")
    sizes = {p: page.locator(f'[data-testid="partition-row"][data-partition="{p}"] '
                             '[data-testid="partition-size"]') for p in (0, 1)}
    expect(sizes[1]).to_have_attribute("data-bytes", re.compile(r"^[1-9]\d*$"),
                                       timeout=EXPECT_MS)
    expect(sizes[0]).to_have_attribute("data-bytes", "0")   # nothing was produced there


def _choose(form: Any, name: str, value: str) -> None:
    field = form.locator(f'[name="{name}"]')
    if field.evaluate("e => e.tagName") == "SELECT":
        expect(field.locator(f'option[value="{value}"]')).to_have_count(1, timeout=EXPECT_MS)
        field.select_option(value)
    else:
        field.fill(value)


GROUP_MEMBER = Path(__file__).parents[1] / "group_member.py"


def _member(cluster: LocalCluster, group: str, topic: str, client_id: str,
            directory: Path) -> subprocess.Popen[bytes]:
    """A real group member in its own process (it commits after every poll)."""
    return subprocess.Popen(
        [sys.executable, str(GROUP_MEMBER), cluster.bootstrap, topic, group, client_id,
         str(directory / f"{client_id}.log")], stdout=subprocess.DEVNULL)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)   # leaves the group cleanly
    try:
        process.wait(WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _produce(cluster: LocalCluster, topic: str, count: int, partition: int) -> None:
    lines = "".join(f"event-{i}\n" for i in range(count)).encode()
    subprocess.run([sys.executable, "-m", "millrace.cli.main", "produce", "-b",
                    cluster.bootstrap, "--topic", topic, "--partition", str(partition)],
                   input=lines, check=True, stdout=subprocess.DEVNULL, timeout=WAIT)


def test_groups_show_members_rebalances_with_reasons_and_lag_climbing(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded,
        shots: Path, tmp_path: Path) -> None:
    create_topic(admin(cluster.bootstrap), "console-events", 2, 3)
    for partition in (0, 1):   # so that the group commits an offset for each
        _produce(cluster, "console-events", 50, partition)
    first = _member(cluster, "billing", "console-events", "member-a", tmp_path)
    second = None
    try:
        def one_member() -> bool:
            status, group = api(console, "api/groups/billing")
            return (status == 200 and group["state"] == "Stable" and group["members"] != []
                    and len(group["members"]) == 1 and group["lag"] == 0
                    and len(group["partitions"]) == 2)
        wait_until("billing stable with one member and no lag", one_member)
        # what the member consumes now is throughput out (its commits move)
        for partition in (0, 1):
            _produce(cluster, "console-events", 20, partition)

        def consumed() -> float | None:
            outs = [p["out"] for p in state(console)["throughput"] if p["out"]]
            return max(outs) if outs else None
        wait_until("records consumed per second on the overview", consumed)
        second = _member(cluster, "billing", "console-events", "member-b", tmp_path)
        page = guarded.page
        page.goto(console.url + "#/groups/billing")
        expect(page.get_by_test_id("view-group")).to_be_visible(timeout=EXPECT_MS)
        # the coordinator's reason (KIP-800), read from the millrace broker's HTTP view
        rebalance = page.get_by_test_id("rebalance").filter(has_text="client member-b")
        expect(rebalance.first).to_contain_text("adding new member", timeout=EXPECT_MS)
        expect(page.get_by_test_id("members")).to_contain_text("member-a", timeout=EXPECT_MS)
        expect(page.get_by_test_id("members")).to_contain_text("member-b", timeout=EXPECT_MS)
        # Kafka refuses to reset the offsets of an active group; so does the console
        status, body = api(console, "api/groups/billing/reset", {"to": "earliest"})
        assert status == 400 and "NON_EMPTY_GROUP" in body["error"], body
    finally:
        for member in (first, second):
            if member is not None:
                _stop(member)

    # the consumers are gone: what is produced now is lag, and the chart climbs
    for partition in (0, 1):
        _produce(cluster, "console-events", 150, partition)

    def climbed() -> list[int] | None:
        status, group = api(console, "api/groups/billing")
        lags = [point["lag"] for point in group.get("lag_history", [])]
        return lags if status == 200 and lags and lags[-1] >= 300 else None
    lags = wait_until("the group's lag to climb to 300", climbed)
    assert min(lags) == 0
    page.goto(console.url + "#/groups")
    expect(page.locator('[data-testid="group-row"][data-group="billing"]')).to_contain_text(
        "300", timeout=EXPECT_MS)
    page.screenshot(path=str(shots / "groups.png"), full_page=True)
    page.goto(console.url + "#/groups/billing")
    chart = page.get_by_test_id("lag-chart")
    expect(chart.locator("path, polyline").first).to_be_attached(timeout=EXPECT_MS)
    expect(page.get_by_test_id("group-partition-row")).to_have_count(2, timeout=EXPECT_MS)
    page.screenshot(path=str(shots / "group.png"), full_page=True)

    # resetting the offsets of a group with no members is allowed, as in Kafka
    status, body = api(console, "api/groups/billing/reset", {"to": "latest"})
    assert status == 200, body
    assert {o["partition"] for o in body["offsets"]} == {0, 1}


def test_through_the_kafka_protocol_alone_the_core_views_work(
        cluster: LocalCluster, guarded: Guarded, tmp_path: Path) -> None:
    """--protocol-only never reads the brokers' HTTP views: what any Kafka gives."""
    with ConsoleProcess(cluster.bootstrap, tmp_path / "protocol", protocol_only=True,
                        interval_s=0.5) as console:
        page = guarded.page
        page.goto(console.url + "#/overview")
        expect(page.get_by_test_id("broker-row")).to_have_count(3, timeout=EXPECT_MS)
        page.goto(console.url + "#/topics")
        expect(page.locator('[data-testid="topic-row"][data-topic="console-orders"]')
               ).to_be_visible(timeout=EXPECT_MS)
        members = [_member(cluster, "audit", "console-orders", "member-c", tmp_path)]
        try:
            def stable() -> bool:
                status, group = api(console, "api/groups/audit")
                return status == 200 and group["state"] == "Stable"
            wait_until("group audit stable with member-c", stable)
            members.append(_member(cluster, "audit", "console-orders", "member-d", tmp_path))
            page.goto(console.url + "#/groups/audit")
            observed = page.get_by_test_id("rebalance").filter(has_text="member-d")
            expect(observed.first).to_contain_text("observed by the console",
                                                   timeout=EXPECT_MS)
            expect(page.get_by_test_id("members")).to_contain_text("member-d",
                                                                   timeout=EXPECT_MS)
            # nothing came from the coordinator's HTTP view, and neither did the timeline
            status, group = api(console, "api/groups/audit")
            assert status == 200 and {e["source"] for e in group["rebalances"]} == {"console"}
            status, topic = api(console, "api/topics/console-orders")
            assert status == 200 and {e["source"] for e in topic["timeline"]} == {"console"}
            # a journey: the client's part, none of the brokers', and a note saying why
            status, started = api(console, "api/journey",
                                  {"topic": "console-orders", "value": "v", "acks": "1"})
            assert status == 202, started
            path = f"api/journey/{started['trace_id']}"

            def traced() -> dict[str, Any] | None:
                status, journey = api(console, path)
                assert status == 200, journey
                return journey if journey["state"] in ("done", "failed") else None
            journey = wait_until("the journey traced", traced)
            assert journey["state"] == "done", journey
            stages = {s["stage"] for s in journey["stages"]}
            assert {"request.sent", "response.received", "consumer.poll"} <= stages
            assert not any(s["stage"].startswith(("broker.", "hw.", "replica."))
                           for s in journey["stages"])
            assert any("--protocol-only" in note for note in journey["notes"])
        finally:
            for member in members:
                _stop(member)


# ---------------------------------------------------------------------- the journey
CLIENT_STAGES = ("producer.interceptors", "producer.serialize", "producer.partition",
                 "accumulator.append", "batch.ready", "sender.drain", "request.sent",
                 "response.received", "producer.callback", "consumer.poll",
                 "consumer.commit")
LEADER_STAGES = ("broker.receive", "broker.append", "hw.advance", "broker.response",
                 "consumer.fetch")
# each pair: the first happened before the second (one clock: every process is on this host)
CAUSAL = [("producer.serialize", "producer.partition"),
          ("producer.partition", "accumulator.append"),
          ("accumulator.append", "sender.drain"), ("sender.drain", "request.sent"),
          ("request.sent", "broker.receive"), ("broker.receive", "broker.append"),
          ("broker.append", "broker.response"), ("broker.response", "response.received"),
          ("response.received", "producer.callback"),
          ("broker.append", "replica.fetch"), ("replica.fetch", "follower.append"),
          ("follower.append", "replica.caught-up"), ("broker.append", "hw.advance"),
          ("hw.advance", "consumer.fetch"), ("consumer.fetch", "consumer.poll"),
          ("consumer.poll", "consumer.commit"), ("consumer.commit", "group.commit")]
# acks=all: the leader answers only once the followers have it and the HW has passed it
ACKS_ALL = [("replica.caught-up", "broker.response"), ("hw.advance", "broker.response")]


def _stage_rows(page: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = page.get_by_test_id("stage-row").evaluate_all(
        "rows => rows.map(r => ({...r.dataset}))")
    return rows


def _out_of_order(by_stage: dict[str, list[dict[str, Any]]],
                  pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (cause, effect) pairs whose every effect is timed before the first cause."""
    return [(before, after) for before, after in pairs
            if min(int(r["t"]) for r in by_stage[before])
            > max(int(r["t"]) for r in by_stage[after])]


@pytest.mark.parametrize("acks", ["1", "all"])
def test_trace_a_record_draws_every_stage_in_order(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded, shots: Path,
        acks: str) -> None:
    topic = f"console-journey-{acks}"
    leader = create_topic(admin(cluster.bootstrap), topic, 2, 3)[1].leader
    page = guarded.page
    page.goto(console.url + "#/journey")
    expect(page.get_by_test_id("view-journey")).to_be_visible(timeout=EXPECT_MS)
    form = page.get_by_test_id("trace-form")
    _choose(form, "topic", topic)
    form.locator('[name="partition"]').fill("1")
    form.locator('[name="acks"]').select_option(acks)
    form.locator('[name="key"]').fill("journey-key")
    form.locator('button[type="submit"]').click()
    expect(page.get_by_test_id("trace-started")).to_be_visible(timeout=EXPECT_MS)
    journey = page.get_by_test_id("journey")
    followers = {b for b in (1, 2, 3) if b != leader}

    def complete() -> list[dict[str, Any]] | None:
        rows = _stage_rows(page)
        names = {r["stage"] for r in rows}
        copied = {int(r["broker"]) for r in rows if r["stage"] == "follower.append"}
        if set(CLIENT_STAGES) | set(LEADER_STAGES) | {"group.commit", "replica.fetch",
                                                      "replica.caught-up"} <= names \
                and copied == followers:
            return rows
        return None
    rows = wait_until("every stage of the journey on the page", complete)
    page.screenshot(path=str(shots / f"journey-acks-{acks}.png"), full_page=True)

    heading = journey.locator("h2").inner_text()
    found = re.search(rf"{topic}-1 @ offset (\d+)", heading)
    assert found is not None, heading
    offset = int(found.group(1))
    by_stage: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_stage.setdefault(row["stage"], []).append(row)
    # the client's stages once each, on the producer's threads or the console's consumer
    for stage in CLIENT_STAGES:
        assert len(by_stage[stage]) == 1, (stage, by_stage[stage])
    assert by_stage["producer.partition"][0]["partition"] == "1"   # explicit
    # the leader's part, on the partition's leader, at the record's offset
    for stage in LEADER_STAGES:
        assert {r["broker"] for r in by_stage[stage]} == {str(leader)}, (stage, leader)
    assert by_stage["broker.append"][0]["offset"] == str(offset)
    assert {int(r["broker"]) for r in by_stage["follower.append"]} == followers
    # once each: per follower, per consumer, per group (a fresh topic: only the console's)
    for stage, count in (("follower.append", 2), ("replica.fetch", 2),
                         ("replica.caught-up", 2), ("consumer.fetch", 1),
                         ("group.commit", 1), ("broker.append", 1), ("hw.advance", 1)):
        assert len(by_stage[stage]) == count, (stage, by_stage[stage])
    assert all(r["offset"] == str(offset) for r in by_stage["follower.append"])
    # in time order on the page, and each cause before its effect
    times = [int(r["t"]) for r in rows]
    assert times == sorted(times)
    pairs = CAUSAL + (ACKS_ALL if acks == "all" else [])
    assert _out_of_order(by_stage, pairs) == []
    # negative control: the check catches a leader said to append after the callback ran
    late = int(by_stage["producer.callback"][0]["t"]) + 1
    tampered = {**by_stage, "broker.append": [{**by_stage["broker.append"][0], "t": late}]}
    assert ("broker.append", "broker.response") in _out_of_order(tampered, pairs)
    # the swim lanes drew each of them
    dots = page.locator('[data-testid="swimlanes"] .stage-dot')
    assert dots.count() == len(rows)

    # "trace offset N of partition P": what the brokers recorded of it, looked up later
    lookup = page.get_by_test_id("lookup-form")
    _choose(lookup, "topic", topic)
    lookup.locator('[name="partition"]').fill("1")
    lookup.locator('[name="offset"]').fill(str(offset))
    lookup.locator('button[type="submit"]').click()
    expect(page.get_by_test_id("journey")).to_have_attribute("data-state", "traced",
                                                             timeout=EXPECT_MS)
    expect(page.locator('[data-testid="stage-row"][data-stage="broker.append"]')
           ).to_have_count(1, timeout=EXPECT_MS)
    expect(page.get_by_test_id("fact").filter(has_text="millrace-console-journey")
           ).to_have_count(1)


def test_with_otlp_the_console_exports_each_journey(cluster: LocalCluster,
                                                   tmp_path: Path) -> None:
    """--otlp: the producer's span (the id the record's traceparent names) with the
    brokers' events as children, and the console consumer's poll span linked to it,
    received by a real OTLP/HTTP endpoint."""
    create_topic(admin(cluster.bootstrap), "console-otlp", 1, 3)
    with OtlpReceiver() as receiver, \
            ConsoleProcess(cluster.bootstrap, tmp_path / "otlp", interval_s=0.5,
                           otlp_endpoint=receiver.endpoint) as console:
        status, started = api(console, "api/journey",
                              {"topic": "console-otlp", "value": "v", "acks": "all"})
        assert status == 202, started
        trace_id = started["trace_id"]

        def exported() -> dict[str, Any] | None:
            status, journey = api(console, f"api/journey/{trace_id}")
            assert status == 200, journey
            return journey if "exported over OTLP" in journey["notes"] else None
        journey = wait_until("the journey exported", exported)
        spans = receiver.spans()
    (send,) = [s for s in spans if s.name == "send console-otlp"]
    assert send.trace_id.hex() == trace_id and send.kind == trace_pb2.Span.SPAN_KIND_PRODUCER
    header = journey["record"]["traceparent"]
    assert header == f"00-{trace_id}-{send.span_id.hex()}-01"
    assert attributes(send)["messaging.kafka.offset"] == journey["record"]["offset"]
    children = {s.name for s in spans if s.parent_span_id == send.span_id}
    assert {"broker broker.append", "broker hw.advance", "broker group.commit"} <= children
    (poll,) = [s for s in spans if s.name == "poll console-otlp"]
    assert poll.kind == trace_pb2.Span.SPAN_KIND_CLIENT
    assert [(link.trace_id.hex(), link.span_id.hex()) for link in poll.links] == \
        [(trace_id, send.span_id.hex())]
    assert attributes(poll)["messaging.consumer.group.name"] == "millrace-console-journey"
    (commit,) = [s for s in spans if s.name == "commit console-otlp"]
    assert commit.parent_span_id == poll.span_id
    # negative control: nothing else claims the journey's trace id
    assert [s.name for s in spans if s.trace_id.hex() == trace_id
            and s.parent_span_id == b""] == ["send console-otlp"]


def test_trace_offset_of_a_record_nobody_traced(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded) -> None:
    create_topic(admin(cluster.bootstrap), "console-untraced", 1, 3)
    _produce(cluster, "console-untraced", 3, 0)
    page = guarded.page
    page.goto(console.url + "#/journey")
    lookup = page.get_by_test_id("lookup-form")
    _choose(lookup, "topic", "console-untraced")
    lookup.locator('[name="partition"]').fill("0")
    lookup.locator('[name="offset"]').fill("2")
    lookup.locator('button[type="submit"]').click()
    journey = page.get_by_test_id("journey")
    expect(journey).to_have_attribute("data-state", "untraced", timeout=EXPECT_MS)
    expect(journey).to_contain_text("it was not traced")
    expect(page.get_by_test_id("fact").filter(has_text="high watermark")).to_have_count(1)
    # no broker stage: only the record's own timestamp
    expect(page.get_by_test_id("stage-row")).to_have_count(1)
    # an offset past the end is an error naming the range, not a page of nothing
    lookup.locator('[name="offset"]').fill("99")
    lookup.locator('button[type="submit"]').click()
    expect(lookup.get_by_test_id("form-error")).to_contain_text("holds 0 to 2",
                                                                timeout=EXPECT_MS)


# ---------------------------------------------------------------------- access
def test_read_only_console_offers_no_writes_and_refuses_them(
        cluster: LocalCluster, guarded: Guarded, tmp_path: Path) -> None:
    with ConsoleProcess(cluster.bootstrap, tmp_path / "ro", read_only=True,
                        interval_s=0.5) as console:
        page = guarded.page
        page.goto(console.url + "#/messages")
        expect(page.get_by_test_id("view-messages")).to_be_visible(timeout=EXPECT_MS)
        expect(page.get_by_test_id("read-only")).to_be_visible(timeout=EXPECT_MS)
        expect(page.get_by_test_id("produce")).to_have_count(0)
        page.goto(console.url + "#/topics")
        expect(page.get_by_test_id("topic-row").first).to_be_visible(timeout=EXPECT_MS)
        expect(page.get_by_test_id("create-topic")).to_have_count(0)
        writes = [("api/produce", {"topic": "console-orders", "value": "x"}, "POST"),
                  ("api/topics", {"name": "ro-made", "partitions": 1}, "POST"),
                  ("api/topics/console-orders", None, "DELETE"),
                  ("api/topics/console-orders/partitions", {"count": 9}, "POST"),
                  ("api/groups/billing/reset", {"to": "earliest"}, "POST"),
                  ("api/journey", {"topic": "console-orders", "value": "x"}, "POST"),
                  ("api/topics/console-orders/configs", {"set": {"retention.ms": "1"}},
                   "POST")]
        for path, body, method in writes:
            status, answer = api(console, path, body, method=method)
            assert status == 403 and "read-only" in answer["error"], (path, status, answer)
        assert "ro-made" not in {t["name"] for t in state(console)["topics"]}


def test_bound_off_loopback_the_console_needs_the_token(
        cluster: LocalCluster, guarded: Guarded, tmp_path: Path) -> None:
    with ConsoleProcess(cluster.bootstrap, tmp_path / "login", host="0.0.0.0",
                        token=TOKEN, interval_s=0.5) as console:
        status, body = api(console, "api/state")
        assert status == 401 and body["error"] == "login required"
        page = guarded.page
        page.goto(console.url)
        expect(page.get_by_test_id("login")).to_be_visible(timeout=EXPECT_MS)
        page.locator('[name="token"]').fill("not-the-token")
        page.locator('button[type="submit"]').click()
        expect(page.get_by_test_id("login")).to_contain_text("wrong token",
                                                             timeout=EXPECT_MS)
        page.locator('[name="token"]').fill(TOKEN)
        page.locator('button[type="submit"]').click()
        expect(page.get_by_test_id("broker-row")).to_have_count(3, timeout=EXPECT_MS)
        assert TOKEN not in console.logs()


def test_bad_requests_get_an_error_naming_the_problem(console: ConsoleProcess) -> None:
    cases: list[tuple[str, Any, str, int, str]] = [
        ("api/messages?topic=console-orders&limit=x", None, "GET", 400,
         "limit must be an integer"),
        ("api/messages?topic=console-orders&limit=100000", None, "GET", 400,
         "limit must be at most"),
        ("api/messages?topic=console-orders&from=sideways", None, "GET", 400, "from must be"),
        ("api/messages?topic=console-orders&from=offset", None, "GET", 400, "needs offset"),
        ("api/messages?topic=no-such-topic", None, "GET", 400, "does not exist"),
        ("api/messages", None, "GET", 400, "topic is required"),
        ("api/produce", {"topic": "console-orders", "partition": -1}, "POST", 400,
         "partition must be"),
        ("api/produce", {"topic": "console-orders", "headers": "x"}, "POST", 400,
         "headers must be"),
        ("api/produce", [1, 2], "POST", 400, "JSON object"),
        ("api/topics", {"name": "", "partitions": 1}, "POST", 400, "name is required"),
        ("api/topics", {"name": "x", "partitions": 0}, "POST", 400,
         "partitions must be a positive integer"),
        ("api/topics", {"name": "console-orders", "partitions": 1}, "POST", 400,
         "TOPIC_ALREADY_EXISTS"),
        ("api/topics/console-orders/partitions", {"count": "many"}, "POST", 400,
         "count must be a positive integer"),
        ("api/groups/billing/reset", {"to": "yesterday"}, "POST", 400, "to must be one of"),
        ("api/groups/billing/reset", {"to": "offset"}, "POST", 400, "needs a non-negative"),
        ("api/topics/no-such-topic", None, "GET", 404, "no topic"),
        ("api/groups/no-such-group", None, "GET", 404, "no group"),
        ("api/journey", {"topic": "console-orders", "acks": "2"}, "POST", 400,
         "acks must be one of"),
        ("api/journey", {"value": "x"}, "POST", 400, "topic is required"),
        ("api/journey?topic=console-orders&partition=0&offset=-1", None, "GET", 400,
         "offset must be a non-negative integer"),
        ("api/journey?topic=console-orders&partition=zero&offset=0", None, "GET", 400,
         "partition must be"),
        ("api/journey?topic=no-such-topic&partition=0&offset=0", None, "GET", 400,
         "does not exist"),
        ("api/journey?topic=console-orders&partition=7&offset=0", None, "GET", 400,
         "has no partition 7"),
        ("api/journey/" + "0" * 32, None, "GET", 404, "no journey"),
        ("api/topics/console-orders/configs", {}, "POST", 400, "nothing to change"),
        ("api/topics/console-orders/configs", {"set": {"retention.ms": 1}}, "POST", 400,
         "set must be an object of strings"),
        ("api/topics/console-orders/configs", {"delete": "retention.ms"}, "POST", 400,
         "delete must be a list"),
        ("api/topics/console-orders/configs",
         {"set": {"retention.ms": "1"}, "delete": ["retention.ms"]}, "POST", 400,
         "both set and deleted: retention.ms"),
        ("api/topics/no-such-topic/configs", {"set": {"retention.ms": "1"}}, "POST", 400,
         "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    for path, body, method, code, text in cases:
        status, answer = api(console, path, body, method=method)
        assert status == code and text in answer["error"], (path, status, answer)
    assert "no-such-topic" not in {t["name"] for t in state(console)["topics"]}

    # not JSON, the wrong content type, another origin, an oversize body
    raw = [(b"{not json", {"Content-Type": "application/json"}, 400, "not JSON"),
           (b"{}", {"Content-Type": "text/plain"}, 415, "JSON body"),
           (b"{}", {"Content-Type": "application/json", "Origin": "http://evil.example"},
            403, "another origin"),
           (b"{" + b" " * (2 << 20) + b"}", {"Content-Type": "application/json"}, 413, "")]
    for data, headers, code, text in raw:
        request = urllib.request.Request(console.url + "api/produce", data=data,
                                         method="POST", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=WAIT)
        assert caught.value.code == code
        assert text in caught.value.read().decode(errors="replace")
    assert state(console)["error"] is None   # the console is still serving


# ---------------------------------------------------------------------- history
def test_a_paused_follower_shows_in_the_isr_timeline_and_alerts_then_clears(
        cluster: LocalCluster, console: ConsoleProcess, guarded: Guarded,
        shots: Path, tmp_path: Path) -> None:
    client = admin(cluster.bootstrap)
    view = create_topic(client, "console-isr", 1, 3)
    follower = next(r for r in view[0].replicas if r != view[0].leader)
    page = guarded.page
    page.goto(console.url + "#/overview")
    expect(page.get_by_test_id("alerts")).to_contain_text("No alerts", timeout=EXPECT_MS)
    cluster.pause_broker(follower)
    try:
        alert = page.locator('[data-testid="alert"][data-alert-name="UnderReplicatedPartitions"]')
        expect(alert).to_be_visible(timeout=EXPECT_MS)
        page.screenshot(path=str(shots / "overview-under-replicated.png"), full_page=True)
        page.goto(console.url + "#/topics/console-isr")
        shrink = page.locator('[data-testid="timeline-entry"][data-kind="isr-shrink"]')
        expect(shrink.first).to_contain_text(str(follower), timeout=EXPECT_MS)
        page.screenshot(path=str(shots / "topic-isr-shrink.png"), full_page=True)
    finally:
        cluster.resume_broker(follower)
    wait_in_sync(client, "console-isr", 1)
    expand = page.locator('[data-testid="timeline-entry"][data-kind="isr-expand"]')
    expect(expand.first).to_be_visible(timeout=EXPECT_MS)
    page.goto(console.url + "#/overview")
    expect(page.get_by_test_id("alerts")).to_contain_text("No alerts", timeout=EXPECT_MS)

    # a console started now never saw the shrink: the leader's own record of it shows,
    # with the reason
    leader = view[0].leader
    with ConsoleProcess(cluster.bootstrap, tmp_path / "later", interval_s=0.5) as later:
        page.goto(later.url + "#/topics/console-isr")
        recorded = page.locator('[data-testid="timeline-entry"][data-kind="isr-shrink"]'
                                f'[data-source="broker {leader}"]')
        # the leader's lag check, or the controller once the follower's session expired
        expect(recorded.first).to_contain_text(
            re.compile("replica.lag.time.max.ms|set by the controller"), timeout=EXPECT_MS)
        expect(recorded.first).to_contain_text(f"[{follower}] left the ISR")
        rejoined = page.locator('[data-testid="timeline-entry"][data-kind="isr-expand"]'
                                f'[data-source="broker {leader}"]')
        expect(rejoined.first).to_contain_text("caught up", timeout=EXPECT_MS)
