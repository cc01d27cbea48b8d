"""``AclService``: the broker's authorizer as a service -- the decisions (``AclAuthorizer``)
over the ACLs of an ``AclStore``, kept current by the store's change watcher, plus the
writes the ACL APIs make (Kafka's ``AclAuthorizer.createAcls`` / ``deleteAcls``).

Built at start-up when ``authorizer.class.name`` names the ACL authorizer (``build``):
the store's ACLs are loaded into the authorizer, then the watcher is started, so every
change made through any broker (or written by Kafka's own tools into the same ZooKeeper
layout) reaches this broker's copy within the watcher's round.  A write made here updates
the copy at once as well (Kafka's ``updateCache`` after ``updateResourceAcls``), so a
request after CreateAcls on the same broker sees the new ACL.

Threads: ``ZkAclStore`` blocks, so ``create_acls``/``delete_acls`` run its calls in the
loop's executor; the watcher calls back on its own thread, where re-reading the changed
patterns may block, and ``AclAuthorizer.update_resource`` is thread-safe.  With the
``LocalAclStore`` everything happens on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from millrace.broker.security.acl_store import AclStore, AclWatch
from millrace.broker.security.authorizer import (
    AUTHORIZER_CLASS_NAME_CONFIG,
    AUTHORIZER_CLASS_NAMES,
    AclAuthorizer,
)
from millrace.common.errors import ConfigError, Errors
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    validate_binding,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error: int = Errors.NONE
    message: str | None = None


@dataclass(slots=True)
class AclDeletionResult:
    """One DeleteAcls filter's outcome: the bindings it removed, or why it failed."""

    error: int = Errors.NONE
    message: str | None = None
    deleted: list[AclBinding] = field(default_factory=list)


def authorizer_enabled(config: object) -> bool:
    """Whether ``authorizer.class.name`` turns the ACL authorizer on ("" = off).  Any other
    value is refused when the config is read (``KafkaConfig``)."""
    name = config[AUTHORIZER_CLASS_NAME_CONFIG]  # type: ignore[index]
    return bool(name) and name in AUTHORIZER_CLASS_NAMES


class AclService:
    def __init__(self, store: AclStore, authorizer: AclAuthorizer) -> None:
        self.store = store
        self.authorizer = authorizer
        self._watch: AclWatch | None = None

    @classmethod
    def build(cls, config: object, store: AclStore) -> AclService:
        """The authorizer of ``super.users`` / ``allow.everyone.if.no.acl.found`` over
        ``store``, loaded and watching (blocking with a ZooKeeper store: call it off the
        loop).  A malformed ``super.users`` principal is a ``ConfigError``."""
        try:
            authorizer = AclAuthorizer(config["super.users"] or "",  # type: ignore[index]
                                       config["allow.everyone.if.no.acl.found"])  # type: ignore[index]
        except ConfigError as e:
            raise ConfigError(f"Invalid value for configuration super.users: {e}") from None
        service = cls(store, authorizer)
        service.start()
        return service

    def start(self) -> None:
        create_paths = getattr(self.store, "create_paths", None)
        if create_paths is not None:
            create_paths()
        acls = self.store.load()
        self.authorizer.load_acls(acls)
        self._watch = self.store.watch(self._changed)
        self._watch.start()
        log.info("ACL authorizer started: %d resource patterns, super.users=%s", len(acls),
                 ";".join(sorted(self.authorizer.super_users)) or "(none)")

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _changed(self, patterns: list[ResourcePattern]) -> None:
        """The watcher's callback: re-read what changed (a notification names, never says)."""
        for pattern in patterns:
            self.authorizer.update_resource(pattern, self.store.get(pattern))

    async def _call(self, fn: Callable[[], T]) -> T:
        if self.store.blocking:
            return await asyncio.get_running_loop().run_in_executor(None, fn)
        return fn()

    # --- writes (CreateAcls / DeleteAcls) ----------------------------------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreationResult]:
        """Add each valid binding; one result per binding, in order.  Invalid ones get
        INVALID_REQUEST with the reason; the valid ones of one pattern are written in one
        read-modify-write."""
        results: list[AclCreationResult | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            why = validate_binding(binding)
            if why is not None:
                results[i] = AclCreationResult(Errors.INVALID_REQUEST, why)
            else:
                by_pattern.setdefault(binding.pattern, []).append(i)

        def write() -> dict[ResourcePattern, BaseException | None]:
            outcome: dict[ResourcePattern, BaseException | None] = {}
            for pattern, indexes in by_pattern.items():
                new = {bindings[i].entry for i in indexes}

                def add(cur: set[AccessControlEntry], new: set[AccessControlEntry] = new
                        ) -> set[AccessControlEntry]:
                    return cur | new
                try:
                    written = self.store.update(pattern, add)
                except Exception as e:
                    log.error("Failed to create ACLs for %s: %s", pattern, e)
                    outcome[pattern] = e
                    continue
                self.authorizer.update_resource(pattern, written)
                outcome[pattern] = None
            return outcome

        outcome = await self._call(write) if by_pattern else {}
        for pattern, indexes in by_pattern.items():
            error = outcome[pattern]
            for i in indexes:
                results[i] = (AclCreationResult() if error is None else
                              AclCreationResult(Errors.UNKNOWN_SERVER_ERROR, str(error)))
        return [r if r is not None else AclCreationResult() for r in results]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]
                          ) -> list[AclDeletionResult]:
        """Remove what each filter matches among the ACLs this broker knows (a MATCH filter
        sees what has reached it, as Kafka documents); one result per filter listing the
        bindings it removed."""
        results = [AclDeletionResult() for _ in filters]
        patterns = {b.pattern for f in filters for b in self.authorizer.acls(f)}

        def remove() -> dict[ResourcePattern, tuple[set[AccessControlEntry], Exception | None]]:
            outcome: dict[ResourcePattern, tuple[set[AccessControlEntry], Exception | None]] = {}
            for pattern in sorted(patterns, key=str):
                removed: set[AccessControlEntry] = set()

                def fn(cur: set[AccessControlEntry], pattern: ResourcePattern = pattern,
                       removed: set[AccessControlEntry] = removed) -> set[AccessControlEntry]:
                    removed.clear()
                    removed.update(e for e in cur if any(
                        f.matches(AclBinding(pattern, e)) for f in filters))
                    return cur - removed
                try:
                    written = self.store.update(pattern, fn)
                except Exception as e:
                    log.error("Failed to delete ACLs for %s: %s", pattern, e)
                    outcome[pattern] = (set(), e)
                    continue
                self.authorizer.update_resource(pattern, written)
                outcome[pattern] = (removed, None)
            return outcome

        outcome = await self._call(remove) if patterns else {}
        for pattern, (removed, error) in outcome.items():
            for f, result in zip(filters, results):
                if error is not None and f.pattern_filter.matches(pattern):
                    result.error, result.message = Errors.UNKNOWN_SERVER_ERROR, str(error)
                for entry in removed:
                    binding = AclBinding(pattern, entry)
                    if f.matches(binding):
                        result.deleted.append(binding)
        for result in results:
            result.deleted.sort(key=lambda b: (str(b.pattern), b.entry.principal, b.entry.host,
                                               b.entry.operation, b.entry.permission_type))
        return results

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.acls(flt)
