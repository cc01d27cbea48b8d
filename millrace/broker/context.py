"""What a request handler sees: the request, who sent it, and the broker's services --
and whether the sender may do what it asks (the ``authorize*`` helpers, Kafka's
``AuthHelper``).

Every handler asks before it looks at existence, so an unauthorized caller cannot probe
names (reference security.md 5).  Without an authorizer (``services.acls`` is None) every
question is answered yes and the authorized-operations bitfields hold every operation the
resource supports, as Kafka's ``AuthHelper`` does.  Authorization is per request and per
resource name, never per record: ``authorized_names`` asks once per distinct name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millrace.broker.security.authorizer import Action
from millrace.protocol import Api, RequestHeader
from millrace.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
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

    # --- authorization (module docstring) ----------------------------------------------------

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  log_if_allowed: bool = True, log_if_denied: bool = True) -> bool:
        """May this request's principal, from its host, do ``operation`` on the resource?"""
        acls = self.services.acls
        if acls is None:
            return True
        return acls.authorizer.authorize(self.principal, self.client_host, Action(
            operation, resource_type, name, log_if_allowed, log_if_denied))

    def authorize_cluster(self, operation: AclOperation, *, log_if_denied: bool = True
                          ) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME,
                              log_if_denied=log_if_denied)

    def authorized_names(self, operation: AclOperation, resource_type: ResourceType,
                         names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
        """The distinct names among ``names`` the principal may do ``operation`` on (each
        asked once)."""
        if self.services.acls is None:
            return set(names)
        return {n for n in dict.fromkeys(names)
                if self.authorize(operation, resource_type, n, log_if_denied=log_if_denied)}

    def authorize_by_resource_type(self, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal do ``operation`` on *some* resource of the type (KIP-679)?"""
        acls = self.services.acls
        if acls is None:
            return True
        return acls.authorizer.authorize_by_resource_type(
            self.principal, self.client_host, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The int32 bitfield of what the principal may do on the resource (Metadata v8+,
        DescribeGroups v3+, DescribeCluster)."""
        acls = self.services.acls
        if acls is None:
            bits = 0
            for op in SUPPORTED_OPERATIONS[resource_type]:
                bits |= 1 << op
            return bits
        return acls.authorizer.authorized_operations(self.principal, self.client_host,
                                                     resource_type, name)

    def response(self, **fields: Any) -> Any:
        """A new response body of this request's API."""
        return self.api.response.cls(**fields)
