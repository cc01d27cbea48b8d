"""Declarative configuration with Kafka's dotted names (Java's ``ConfigDef``).

A ``ConfigDef`` is a table of ``ConfigKey``s: name, type, default, validator, doc.
Client configurations are built by ``include``-ing shared tables (Java's
``CommonClientConfigs``) and adding their own keys.  ``ConfigDef.parse(props)`` turns a ``{name: value}`` mapping (strings from a properties
file, or already-typed values) into a typed dict, and raises ``ConfigError`` naming the
key for unknown keys and bad values.  ``parse_properties`` reads Java ``.properties``
text (no file access here: callers read the file).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from millrace.common.errors import ConfigError

NO_DEFAULT: Any = object()
LONG_MAX = (1 << 63) - 1
HIDDEN = "[hidden]"  # how a password-type value prints
INT_MAX = (1 << 31) - 1

Validator = Callable[[str, Any], None]


def at_least(lo: int | float) -> Validator:
    def check(name: str, v: Any) -> None:
        if v < lo:
            raise ConfigError(f"Invalid value {v} for configuration {name}: "
                              f"Value must be at least {lo}")
    return check


def between(lo: int | float, hi: int | float) -> Validator:
    def check(name: str, v: Any) -> None:
        if not lo <= v <= hi:
            raise ConfigError(f"Invalid value {v} for configuration {name}: "
                              f"Value must be in [{lo}, {hi}]")
    return check


def one_of(*choices: str) -> Validator:
    def check(name: str, v: Any) -> None:
        values = v if isinstance(v, list) else [v]
        for x in values:
            if x not in choices:
                raise ConfigError(f"Invalid value {x} for configuration {name}: "
                                  f"String must be one of: {', '.join(choices)}")
    return check


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # int | long | double | boolean | string | list | password
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    doc: str = ""
    nullable: bool = False


def _convert(key: ConfigKey, value: Any) -> Any:
    name, t = key.name, key.type
    if value is None:
        if key.nullable:
            return None
        raise ConfigError(f"Invalid value null for configuration {name}")
    try:
        if t in ("int", "long"):
            v = int(value.strip()) if isinstance(value, str) else value
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError
            limit = INT_MAX if t == "int" else LONG_MAX
            if not -limit - 1 <= v <= limit:
                raise ValueError
            return v
        if t == "double":
            return float(value.strip()) if isinstance(value, str) else float(value)
        if t == "boolean":
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("true", "false"):
                return s == "true"
            raise ValueError
        if t == "list":
            if isinstance(value, list | tuple):
                return [str(x).strip() for x in value]
            s = str(value).strip()
            return [x.strip() for x in s.split(",") if x.strip()] if s else []
        return str(value).strip() if isinstance(value, str) else str(value)
    except (ValueError, TypeError):
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: "
                          f"expected a value of type {t}") from None


@dataclass
class ConfigDef:
    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(self, name: str, type: str, default: Any = NO_DEFAULT,
               validator: Validator | None = None, doc: str = "",
               nullable: bool = False) -> ConfigDef:
        self.keys[name] = ConfigKey(name, type, default, validator, doc, nullable)
        return self

    def include(self, *others: ConfigDef) -> ConfigDef:
        """Add every key of ``others`` (shared tables of keys, e.g. the common client ones)."""
        for other in others:
            self.keys.update(other.keys)
        return self

    def override_default(self, name: str, default: Any) -> ConfigDef:
        """Keep an included key's type, validator and doc, with this table's default."""
        self.keys[name] = replace(self.keys[name], default=default)
        return self

    def parse(self, props: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
        ignored = set(ignore)
        unknown = sorted(k for k in props if k not in self.keys and k not in ignored)
        if unknown:
            raise ConfigError(f"Unknown configuration key(s): {', '.join(unknown)}")
        out: dict[str, Any] = {}
        for name, key in self.keys.items():
            if name in props:
                v = _convert(key, props[name])
            elif key.default is NO_DEFAULT:
                raise ConfigError(f"Missing required configuration {name} which has no default")
            else:
                v = key.default
            if key.validator is not None and v is not None:
                key.validator(name, v)
            out[name] = v
        return out

    def redacted(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` fit to print: every set ``password`` key shows as ``[hidden]``
        (Kafka's ``Password.toString``)."""
        return {k: HIDDEN if v is not None and k in self.keys and
                self.keys[k].type == "password" else v for k, v in values.items()}

    def convert(self, name: str, value: Any) -> Any:
        """Convert and validate one value (for dynamic config changes)."""
        key = self.keys.get(name)
        if key is None:
            raise ConfigError(f"Unknown configuration key: {name}")
        v = _convert(key, value)
        if key.validator is not None and v is not None:
            key.validator(name, v)
        return v


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text -> dict (comments ``#``/``!``, ``=``/``:``, ``\\`` joins)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending = line[:-1]
            continue
        pending = ""
        logical.append(line)
    if pending:
        logical.append(pending)
    for line in logical:
        cut = len(line)
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                cut = i
                break
        key = line[:cut].strip()
        rest = line[cut:].lstrip()
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip()
        props[key] = rest.rstrip()
    return props
