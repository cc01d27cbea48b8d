"""What a request handler sees: the request, who sent it, and the broker's services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millrace.protocol import Api, RequestHeader
from millrace.security.kafka_principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from millrace.broker.services import BrokerServices


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    api: Api
    client_host: str
    client_port: int
    services: BrokerServices
    listener: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    security_protocol: str = "PLAINTEXT"

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def response(self, **fields: Any) -> Any:
        """A new response body of this request's API."""
        return self.api.response.cls(**fields)
