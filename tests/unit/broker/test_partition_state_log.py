"""PartitionStateLog: the leader and ISR changes a broker records with their reasons, and
the reasons Partition gives its ISR proposals."""

from __future__ import annotations

from millrace.broker.partition_state_log import PartitionStateLog


def test_a_shrink_an_expansion_and_a_swap_are_told_apart() -> None:
    log = PartitionStateLog(1, lambda: 42)
    log.isr_changed("t", 0, 1, (1, 2, 3), (1, 2), "lagged")
    log.isr_changed("t", 0, 1, (1, 2), (1, 2, 3), "caught up")
    log.isr_changed("t", 1, 1, (1, 2), (1, 3), "swap")
    log.isr_changed("t", 2, 1, (1, 2), (1, 2), "nothing")       # no change: no entry
    assert [(e["partition"], e["kind"]) for e in log.for_topic("t")] == [
        (0, "isr-shrink"), (0, "isr-expand"), (1, "isr-shrink"), (1, "isr-expand")]
    first = log.for_topic("t")[0]
    assert first == {"t": 42, "topic": "t", "partition": 0, "kind": "isr-shrink",
                     "leader": 1, "isr": [1, 2], "broker": 1,
                     "detail": "[3] left the ISR [1, 2, 3] -> [1, 2]: lagged"}


def test_the_record_is_bounded_and_filtered_by_topic() -> None:
    log = PartitionStateLog(2, lambda: 0, capacity=5)
    for i in range(8):
        log.record("a" if i % 2 else "b", i, "leader", 2, (2,), f"term {i}")
    assert [e["partition"] for e in log.for_topic("a")] == [3, 5, 7]
    assert [e["partition"] for e in log.for_topic("b")] == [4, 6]
    assert log.for_topic("c") == []
