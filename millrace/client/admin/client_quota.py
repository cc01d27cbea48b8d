"""Client quota values for the admin client (Java ``org.apache.kafka.common.quota``,
KIP-546): who a quota is for, which quotas to describe, what to change.

``ClientQuotaEntity({"user": "alice", "client-id": None})`` is the quota of user alice
with the default client id; a None name is the default entity of that type.  The entity
types are ``USER`` (``"user"``), ``CLIENT_ID`` (``"client-id"``) and ``IP`` (``"ip"``).
The quota keys are Kafka's: ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``, ``controller_mutation_rate``.

    ClientQuotaFilter.contains([ClientQuotaFilterComponent.of_entity("user", "alice")])
    ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_default_entity("client-id")])
    ClientQuotaAlteration(ClientQuotaEntity({"user": "alice"}),
                          [ClientQuotaAlteration.Op("producer_byte_rate", 1048576),
                           ClientQuotaAlteration.Op("consumer_byte_rate", None)])  # None removes
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class ClientQuotaEntity(Mapping[str, "str | None"]):
    """Entity type -> name (None: the default entity); immutable and hashable."""

    USER: ClassVar[str] = USER
    CLIENT_ID: ClassVar[str] = CLIENT_ID
    IP: ClassVar[str] = IP

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, str | None]) -> None:
        self._entries = dict(entries)

    def __getitem__(self, entity_type: str) -> str | None:
        return self._entries[entity_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __hash__(self) -> int:
        return hash(frozenset(self._entries.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClientQuotaEntity):
            return self._entries == other._entries
        return NotImplemented

    @property
    def entries(self) -> dict[str, str | None]:
        return dict(self._entries)

    def __repr__(self) -> str:
        return f"ClientQuotaEntity({self._entries!r})"

    def __str__(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else n}"
                         for t, n in self._entries.items())


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """How one entity type is matched: ``of_entity`` (exactly ``match``),
    ``of_default_entity`` (the default), ``of_entity_type`` (any name, the default
    included)."""

    entity_type: str
    match_type: int
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MATCH_EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MATCH_DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MATCH_SPECIFIED)


@dataclass(frozen=True, slots=True)
class ClientQuotaFilter:
    """Components that must all match; ``strict``: leave out entities having a type no
    component names."""

    components: tuple[ClientQuotaFilterComponent, ...] = ()
    strict: bool = False

    @classmethod
    def contains(cls, components: Iterable[ClientQuotaFilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), False)

    @classmethod
    def contains_only(cls, components: Iterable[ClientQuotaFilterComponent]
                      ) -> ClientQuotaFilter:
        return cls(tuple(components), True)

    @classmethod
    def all(cls) -> ClientQuotaFilter:
        return cls((), False)


@dataclass(frozen=True, slots=True)
class ClientQuotaOp:
    """Set ``key`` to ``value``, or remove it (``value`` None)."""

    key: str
    value: float | None


@dataclass(frozen=True, slots=True, init=False)
class ClientQuotaAlteration:
    """The changes to one entity's quotas."""

    Op: ClassVar[type[ClientQuotaOp]] = ClientQuotaOp

    entity: ClientQuotaEntity
    ops: tuple[ClientQuotaOp, ...]

    def __init__(self, entity: ClientQuotaEntity | Mapping[str, str | None],
                 ops: Iterable[ClientQuotaOp]) -> None:
        object.__setattr__(self, "entity", entity if isinstance(entity, ClientQuotaEntity)
                           else ClientQuotaEntity(entity))
        object.__setattr__(self, "ops", tuple(ops))
