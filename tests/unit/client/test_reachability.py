"""``Reachability``: how a client tells "no broker ever answered" from a missing topic."""

from __future__ import annotations

from millrace.client.errors import KafkaTimeoutError, NoBrokerAvailableError
from millrace.client.metadata import Metadata, Reachability


def test_failures_are_named_until_a_broker_answers() -> None:
    r = Reachability()
    assert r.error(["a:1"]) is None  # nothing failed yet: no claim either way
    r.connection_failed("a:1", "connection refused")
    r.connection_failed("a:1", "connection refused")
    r.connection_failed("b:2", "name or service not known")
    error = r.error(["a:1", "b:2", "c:3"], waited_ms=3000.4)
    assert isinstance(error, NoBrokerAvailableError)
    assert str(error) == ("no broker reachable at a:1 (connection refused), b:2 (name or "
                          "service not known), c:3 (not tried) after 3000 ms")
    assert r.all_failed(["a:1"], 2) and not r.all_failed(["a:1", "b:2"], 2)
    assert r.failed_attempts() == 1
    r.broker_answered()
    r.connection_failed("a:1", "connection refused")  # a later outage is a plain retry
    assert r.error(["a:1"]) is None and not r.all_failed(["a:1"], 1)


def test_metadata_timeout_error_picks_the_real_cause() -> None:
    m = Metadata()
    m.bootstrap([("h", 9092)])
    plain = m.timeout_error("Topic t not present in metadata after 5 ms.")
    assert type(plain) is KafkaTimeoutError and str(plain).startswith("Topic t")
    m.reachability.connection_failed("h:9092", "connection refused")
    error = m.timeout_error("Topic t not present in metadata after 5 ms.", 5)
    assert isinstance(error, NoBrokerAvailableError) and isinstance(error, KafkaTimeoutError)
    assert str(error) == "no broker reachable at h:9092 (connection refused) after 5 ms"
