"""``start_tls_server``: a server-side TLS upgrade of an accepted connection that tells
the client why its handshake failed.

``loop.start_tls`` drops the TLS alert of a failed handshake: asyncio's ``SSLProtocol``
force-closes the socket with the alert still in its outgoing buffer, so a client without
the certificate ``ssl.client.auth=required`` asks for sees only "connection closed" where
Kafka's clients expect "certificate required".  This module does what ``start_tls`` does
(pause, swap in an ``SSLProtocol``, resume, await the handshake) with an ``SSLProtocol``
that first writes whatever the TLS engine has to say -- the alert -- and only then fails.
It leans on asyncio internals of Python 3.11+ (``_process_outgoing``, ``_app_transport``);
where they are missing it falls back to ``loop.start_tls`` (alert dropped, nothing else
lost).

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from asyncio import sslproto
from typing import Any


class _AlertingSSLProtocol(sslproto.SSLProtocol):
    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        if handshake_exc is not None:
            with contextlib.suppress(Exception):
                self._process_outgoing()  # type: ignore[attr-defined]  # the alert
        super()._on_handshake_complete(handshake_exc)


_SUPPORTED = hasattr(sslproto.SSLProtocol, "_process_outgoing")


async def start_tls_server(transport: asyncio.Transport, protocol: asyncio.BaseProtocol,
                           context: ssl.SSLContext, *, handshake_timeout: float
                           ) -> asyncio.Transport:
    """Upgrade an accepted ``transport`` to TLS for ``protocol``; the TLS transport, or
    the handshake's exception (after the client got its alert)."""
    loop = asyncio.get_running_loop()
    if not _SUPPORTED:
        upgraded = await loop.start_tls(transport, protocol, context, server_side=True,
                                        ssl_handshake_timeout=handshake_timeout)
        assert upgraded is not None
        return upgraded
    waiter: asyncio.Future[Any] = loop.create_future()
    ssl_protocol = _AlertingSSLProtocol(loop, protocol, context, waiter, server_side=True,
                                        ssl_handshake_timeout=handshake_timeout,  # type: ignore[arg-type]
                                        call_connection_made=False)
    transport.pause_reading()  # nothing reaches the SSLProtocol before connection_made
    transport.set_protocol(ssl_protocol)
    made = loop.call_soon(ssl_protocol.connection_made, transport)
    resumed = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resumed.cancel()
        raise
    tls: asyncio.Transport = ssl_protocol._app_transport
    return tls
