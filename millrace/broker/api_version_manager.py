"""``ApiVersionManager``: which versions of which APIs this broker serves and advertises.

An API is served when a handler is registered for it, from its lowest declared version
up to the declared maximum or the cap below.  The advertised range (ApiVersions) may
start lower than the served one: librdkafka before 2.11.1 turns compression on only if
Produce v0 is advertised, so Produce is advertised from 0 while v0-2 requests are
refused (as Kafka 4 does).
"""

from __future__ import annotations

from collections.abc import Iterable

from millrace.protocol import API, ApiKey

# The highest version of each API this broker serves (None = the declared maximum).
# InitProducerId v6 is marked unstable upstream and not advertised by Kafka either.
VERSION_CAPS: dict[int, int] = {
    ApiKey.PRODUCE: 12, ApiKey.FETCH: 17, ApiKey.LIST_OFFSETS: 10, ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9, ApiKey.INIT_PRODUCER_ID: 5, ApiKey.WRITE_TXN_MARKERS: 1,
    # v5 means KIP-890 part 2 (transaction.version 2), which we do not offer.
    ApiKey.TXN_OFFSET_COMMIT: 4,
    # v4+ is KIP-890's broker-to-broker verification; EndTxn v5 is transaction.version 2,
    # which we never advertise (the classic protocol, "TV1").
    ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.END_TXN: 4,
}
# Advertised minimum below what we accept (librdkafka < 2.11.1 feature detection).
ADVERTISED_MIN: dict[int, int] = {ApiKey.PRODUCE: 0}


class ApiVersionManager:
    def __init__(self, handled: Iterable[int]) -> None:
        handled = set(handled)
        self.enabled: dict[int, tuple[int, int]] = {}
        self.advertised: dict[int, tuple[int, int]] = {}
        for key, api in API.items():
            if key not in handled:
                continue
            hi = min(api.versions.high, VERSION_CAPS.get(key, api.versions.high))
            self.enabled[key] = (api.versions.low, hi)
            self.advertised[key] = (ADVERTISED_MIN.get(key, api.versions.low), hi)
