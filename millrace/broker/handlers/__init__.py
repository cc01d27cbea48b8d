"""Request handlers: one module per API (or per small family), each registering itself.

A handler is ``async def handle(ctx: RequestContext, body) -> response body | None``
(None = send no response, only Produce with acks=0).  Handlers are registered with
``@handles(ApiKey.X)`` and looked up by ``HANDLERS[api_key]``; every module in this
package is imported by ``load_all`` so registration happens at broker start.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from millrace.broker.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[Any]]
HANDLERS: dict[int, Handler] = {}


def handles(*api_keys: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for key in api_keys:
            HANDLERS[int(key)] = fn
        return fn
    return register


def load_all() -> dict[int, Handler]:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return HANDLERS
