"""SaslHandshake (key 17) and SaslAuthenticate (key 36) as ordinary requests.

On a SASL listener these requests are consumed by the connection's
``SaslServerAuthenticator`` while it authenticates (and when a SaslHandshake starts a
re-authentication); what reaches a handler is a SASL request where none is expected --
on a PLAINTEXT or SSL listener, or after authentication completed -- and Kafka answers
those ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)


@handles(ApiKey.SASL_HANDSHAKE)
async def handle_sasl_handshake(ctx: RequestContext,
                                body: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(ApiKey.SASL_AUTHENTICATE)
async def handle_sasl_authenticate(ctx: RequestContext, body: SaslAuthenticateRequest
                                   ) -> SaslAuthenticateResponse:
    uses_sasl = ctx.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    message = ("SaslAuthenticate request received after successful authentication"
               if uses_sasl else
               f"Unexpected SASL request on a {ctx.security_protocol} listener")
    return SaslAuthenticateResponse(error_code=Errors.ILLEGAL_SASL_STATE,
                                    error_message=message, auth_bytes=b"")
