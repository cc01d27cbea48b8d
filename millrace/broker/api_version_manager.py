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
    # v5 means KIP-890 part 2 (transaction.version 2): see TRANSACTION_V2_CAPS.
    ApiKey.TXN_OFFSET_COMMIT: 4, ApiKey.END_TXN: 4,
    # v4+ is KIP-890's batched broker-to-broker form (verification, implicit adds);
    # clients send v0-3.
    ApiKey.ADD_PARTITIONS_TO_TXN: 5,
}
# With transaction.version 2 (KIP-890 part 2): EndTxn v5 bumps the epoch every
# transaction, TxnOffsetCommit v5 adds the offsets partition implicitly.
TRANSACTION_V2_CAPS: dict[int, int] = {ApiKey.TXN_OFFSET_COMMIT: 5, ApiKey.END_TXN: 5}
# Advertised minimum below what we accept (librdkafka < 2.11.1 feature detection).
ADVERTISED_MIN: dict[int, int] = {ApiKey.PRODUCE: 0}


class ApiVersionManager:
    def __init__(self, handled: Iterable[int], transaction_version: int = 1) -> None:
        handled = set(handled)
        self.transaction_version = transaction_version
        caps = VERSION_CAPS | TRANSACTION_V2_CAPS if transaction_version >= 2 \
            else VERSION_CAPS
        self.enabled: dict[int, tuple[int, int]] = {}
        self.advertised: dict[int, tuple[int, int]] = {}
        for key, api in API.items():
            if key not in handled:
                continue
            hi = min(api.versions.high, caps.get(key, api.versions.high))
            self.enabled[key] = (api.versions.low, hi)
            self.advertised[key] = (ADVERTISED_MIN.get(key, api.versions.low), hi)
