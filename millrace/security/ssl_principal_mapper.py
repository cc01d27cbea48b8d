"""``ssl.principal.mapping.rules``: client-certificate DN -> principal name.

Java: ``org.apache.kafka.common.security.ssl.SslPrincipalMapper``.

The input is the peer certificate's subject as an RFC 2253 string, most specific RDN first
(``CN=alice,OU=Eng,O=Org,C=US``).  The config value is a list of rules separated by ``,`` or a
newline, each either::

    DEFAULT                                  the DN itself
    RULE:<regex>/<replacement>/[L|U]         regex must match the WHOLE DN; L/U lower/upper-case

Inside ``<regex>`` and ``<replacement>`` a backslash escapes the next character, so ``\\/`` is a
slash that does not end the part (a ``,`` needs no escape: the part runs to the next unescaped
``/``).  Rules are tried in order and the first whose regex matches the whole DN decides; if none
does, ``get_name`` raises ``NoMatchingRule`` and the TLS authentication fails.

Java semantics kept on purpose: the regex is a Java regex (Python's ``re`` accepts the common
subset; ``(?<name>...)`` is translated to ``(?P<name>...)``); the replacement is Java's
``Matcher.replaceAll`` string -- ``$n`` and ``${name}`` are groups, ``\\x`` is a literal ``x`` --
and, as in Java, it is applied with replace-all over the DN once the whole-DN match succeeded
(for an anchored or greedy pattern that is one replacement of the whole DN).  As in Kafka,
``$n`` naming a group the regex does not have is literal text when the regex has groups at all
(``$1@$4`` with three groups keeps ``$4``).  A regex that does not compile, text after the flag,
``$`` not followed by a group, or ``$n`` in a regex without groups is a ``ConfigError`` naming
the rule, raised when the rules are parsed (Java would fail only at the first matching
connection).  Empty items (``,,``) are ignored; a value with no rule at all is a ``ConfigError``
(Kafka would accept it and then refuse every certificate).  A newline separates rules like a
comma.

The docs' example ``RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`` maps
``CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown`` to ``adminuser@admin``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from millrace.common.errors import ConfigError
from millrace.security.errors import SslAuthenticationException

CONFIG_KEY = "ssl.principal.mapping.rules"
DEFAULT_RULES = "DEFAULT"

_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?=[A-Za-z])")


class NoMatchingRule(SslAuthenticationException):
    """No rule of ``ssl.principal.mapping.rules`` matches the peer's DN."""


# A replacement compiled to parts: literal text, or a group reference (number or name).
_Part = tuple[bool, str | int]


@dataclass(frozen=True)
class Rule:
    """One rule; ``pattern`` is None for DEFAULT."""

    text: str
    pattern: re.Pattern[str] | None = None
    replacement: tuple[_Part, ...] = ()
    to_lower: bool = False
    to_upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self._expand, dn)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        out: list[str] = []
        for is_group, value in self.replacement:
            if is_group:
                out.append(match.group(value) or "")
            else:
                assert isinstance(value, str)
                out.append(value)
        return "".join(out)

    def __str__(self) -> str:
        return self.text


def _bad(rule_text: str, what: str) -> ConfigError:
    return ConfigError(f"Invalid rule in {CONFIG_KEY}: {what}: {rule_text!r}")


def _compile_replacement(
    text: str, pattern: re.Pattern[str], rule_text: str
) -> tuple[_Part, ...]:
    parts: list[_Part] = []
    literal: list[str] = []

    def flush() -> None:
        if literal:
            parts.append((False, "".join(literal)))
            literal.clear()

    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text):
                raise _bad(rule_text, "replacement ends with a lone backslash")
            literal.append(text[i + 1])
            i += 2
        elif ch == "$":
            i += 1
            if i < len(text) and text[i] == "{":
                end = text.find("}", i)
                name = text[i + 1 : end] if end > 0 else ""
                if not name or name not in pattern.groupindex:
                    raise _bad(rule_text, "replacement names a group the regex does not have")
                flush()
                parts.append((True, name))
                i = end + 1
            elif i < len(text) and text[i].isdigit():
                number = int(text[i])
                if number > pattern.groups:
                    if pattern.groups == 0:  # Java would fail on every DN the regex matches
                        raise _bad(rule_text, f"replacement uses ${number}, regex has no groups")
                    # Kafka keeps a reference to a group that cannot exist as literal text ("$4").
                    literal.append("$")
                    continue
                i += 1
                # Java reads further digits while the longer number is still a group.
                while i < len(text) and text[i].isdigit():
                    longer = number * 10 + int(text[i])
                    if longer > pattern.groups:
                        break
                    number = longer
                    i += 1
                flush()
                parts.append((True, number))
            else:
                raise _bad(rule_text, "'$' in the replacement must be followed by a group")
        else:
            literal.append(ch)
            i += 1
    flush()
    return tuple(parts)


def _read_part(rules: str, pos: int) -> tuple[str, int] | None:
    """Read up to the next unescaped '/'; returns (raw text, position after the '/')."""
    start = pos
    while pos < len(rules):
        ch = rules[pos]
        if ch == "\\":
            pos += 2
        elif ch == "/":
            return rules[start:pos], pos + 1
        else:
            pos += 1
    return None


def _item_text(rules: str, start: int) -> str:
    end = len(rules)
    for sep in (",", "\n"):
        found = rules.find(sep, start)
        if found >= 0:
            end = min(end, found)
    return rules[start:end].strip()


def parse_rules(rules: str) -> list[Rule]:
    result: list[Rule] = []
    pos = 0
    n = len(rules)
    while True:
        while pos < n and rules[pos].isspace():
            pos += 1
        if pos >= n:
            break
        start = pos
        if rules[pos] in ",\n":  # an empty item
            pos += 1
            continue
        if rules.startswith("DEFAULT", pos):
            pos += len("DEFAULT")
            rule = Rule(text="DEFAULT")
        elif rules.startswith("RULE:", pos):
            pattern_part = _read_part(rules, pos + len("RULE:"))
            if pattern_part is None:
                raise _bad(_item_text(rules, start), "expected RULE:<regex>/<replacement>/[L|U]")
            pattern_text, pos = pattern_part
            replacement_part = _read_part(rules, pos)
            if replacement_part is None:
                raise _bad(rules[start:].strip(), "expected RULE:<regex>/<replacement>/[L|U]")
            replacement_text, pos = replacement_part
            flag = rules[pos] if pos < n and rules[pos] in "LU" else ""
            pos += len(flag)
            text = rules[start:pos]
            try:
                pattern = re.compile(_NAMED_GROUP.sub("(?P<", pattern_text))
            except re.error as exc:
                raise _bad(text, f"regex does not compile ({exc})") from None
            rule = Rule(
                text=text,
                pattern=pattern,
                replacement=_compile_replacement(replacement_text, pattern, text),
                to_lower=flag == "L",
                to_upper=flag == "U",
            )
        else:
            raise _bad(
                _item_text(rules, start), "expected DEFAULT or RULE:<regex>/<replacement>/[L|U]"
            )
        while pos < n and rules[pos] in " \t\r":
            pos += 1
        if pos < n and rules[pos] not in ",\n":
            raise _bad(_item_text(rules, start), "unexpected text after the rule")
        pos += 1  # the separator (or past the end)
        result.append(rule)
    if not result:
        raise ConfigError(f"{CONFIG_KEY} must contain at least one rule (e.g. {DEFAULT_RULES})")
    return result


class SslPrincipalMapper:
    """Immutable; safe to share between connections."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def from_rules(cls, rules: str | None) -> SslPrincipalMapper:
        """Parse a ``ssl.principal.mapping.rules`` value (None -> ``DEFAULT``)."""
        return cls(parse_rules(DEFAULT_RULES if rules is None else rules))

    def get_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self}")

    def __str__(self) -> str:
        return "[" + ", ".join(str(rule) for rule in self.rules) + "]"
