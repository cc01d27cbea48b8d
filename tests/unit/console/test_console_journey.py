"""The console's journey bookkeeping without a cluster: the request's checks, merging the
client's stages and each broker's events (each kept once, in time order, the seeds' order
for a tie), the version that tells the SSE streams what changed, and the bound on kept
journeys."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.console.journey import (
    MAX_JOURNEYS,
    JourneyRequest,
    JourneyTracker,
)
from millrace.console.messages import BadRequest


def tracker(notified: list[int]) -> JourneyTracker:
    return JourneyTracker({"bootstrap.servers": "127.0.0.1:1"}, admin=None,  # type: ignore[arg-type]
                          broker_http=None, notify=lambda: notified.append(1))


def request(**body: Any) -> JourneyRequest:
    return JourneyRequest.from_json({"topic": "t", "value": "v", **body})


@pytest.mark.parametrize(("body", "acks"), [({}, "all"), ({"acks": "-1"}, "all"),
                                            ({"acks": 1}, "1"), ({"acks": "0"}, "0")])
def test_acks_default_to_all_and_take_kafka_spellings(body: dict[str, Any], acks: str
                                                      ) -> None:
    assert request(**body).acks == acks


@pytest.mark.parametrize(("body", "text"), [({"acks": "2"}, "acks must be one of"),
                                            ({"topic": ""}, "topic is required"),
                                            ({"partition": -1}, "partition must be")])
def test_a_bad_request_names_the_field(body: dict[str, Any], text: str) -> None:
    with pytest.raises(BadRequest, match=text):
        request(**body)


def stage(name: str, t_us: int, lane: str = "producer") -> dict[str, Any]:
    return {"stage": name, "t_us": t_us, "lane": lane}


def event(name: str, t_us: int, broker: int) -> dict[str, Any]:
    """As a broker records it: no lane of its own."""
    return {"stage": name, "t_us": t_us, "broker": broker}


def test_stages_merge_once_each_in_time_order_and_bump_the_version() -> None:
    notified: list[int] = []
    journeys = tracker(notified)
    journey = journeys.begin(request())
    assert journeys.get(journey.trace_id) is journey
    journeys._change(journey, client=[stage("request.sent", 30, lane="sender"),
                                      stage("producer.serialize", 10)])
    leader = [event("broker.append", 50, 2), event("broker.receive", 40, 2)]
    journeys._change(journey, broker=(2, leader))
    # the same events read again (the console follows the brokers): nothing changes
    version = journey.version
    journeys._change(journey, client=[stage("request.sent", 30, lane="sender")])
    journeys._change(journey, broker=(2, leader))
    assert journey.version == version
    # a tie: the seeds' order (the follower's append before the high watermark's move)
    journeys._change(journey, broker=(3, [event("follower.append", 60, 3)]))
    journeys._change(journey, broker=(2, [*leader, event("hw.advance", 60, 2)]))
    view = journey.to_json()
    assert [s["stage"] for s in view["stages"]] == [
        "producer.serialize", "request.sent", "broker.receive", "broker.append",
        "follower.append", "hw.advance"]
    assert [s["lane"] for s in view["stages"]][2:] == ["broker 2", "broker 2", "broker 3",
                                                       "broker 2"]
    assert view["version"] == journey.version == len(notified) == 4
    # negative control: a new note is a change
    journeys._change(journey, note="a note")
    assert journey.version == 5 and view["version"] == 4


def test_only_the_newest_journeys_are_kept() -> None:
    journeys = tracker([])
    first = journeys.begin(request())
    made = [journeys.begin(request()) for _ in range(MAX_JOURNEYS)]
    assert journeys.get(first.trace_id) is None
    assert [j.trace_id for j in journeys.recent()] == [j.trace_id for j in made]
