"""API keys and the codec of every request and response.

``ApiKey`` names each API; ``API[key]`` holds its request and response codecs and value
classes.  The classes are importable by name from ``millrace.protocol``, e.g.
``ProduceRequest``, ``FetchResponse`` (nested structs hang off them:
``ProduceRequest.TopicProduceData``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from millrace.protocol.codec import MessageCodec
from millrace.protocol.messages import ALL
from millrace.protocol.schema import Versions


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


@dataclass(frozen=True)
class Api:
    key: ApiKey
    name: str
    request: MessageCodec
    response: MessageCodec

    @property
    def versions(self) -> Versions:
        return self.request.message.versions

    @property
    def flexible(self) -> Versions:
        return self.request.message.flexible

    def is_flexible(self, version: int) -> bool:
        return version in self.request.message.flexible


API: dict[int, Api] = {}
CLASSES: dict[str, Any] = {}

for _key, (_req, _resp) in ALL.items():
    _api = Api(ApiKey(_key), _req.name[: -len("Request")], MessageCodec(_req),
               MessageCodec(_resp))
    API[_key] = _api
    CLASSES[_req.name] = _api.request.cls
    CLASSES[_resp.name] = _api.response.cls

REQUEST_CLASS_TO_API: dict[type, Api] = {a.request.cls: a for a in API.values()}
RESPONSE_CLASS_TO_API: dict[type, Api] = {a.response.cls: a for a in API.values()}


def api_for(key: int) -> Api:
    try:
        return API[key]
    except KeyError:
        raise KeyError(f"unknown api key {key}") from None
