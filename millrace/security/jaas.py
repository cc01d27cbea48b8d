"""The ``sasl.jaas.config`` value: one JAAS login-module entry (Java: ``JaasConfig``).

Syntax, as Kafka accepts it for the per-listener/per-client property::

    <LoginModuleClass> <flag> [<key>=<value> ...] ;

* ``<flag>`` is ``required``, ``requisite``, ``sufficient`` or ``optional`` (case-insensitive;
  stored lower-case).
* ``<value>`` is a double- or single-quoted string, in which a backslash escapes the next
  character (``\\"``, ``\\\\``; ``\\n``, ``\\t``, ``\\r`` are newline, tab, carriage return), or a
  bare word (letters, digits and ``_ - . $``).
* ``//`` line comments and ``/* */`` block comments count as white space.
* Exactly one module per value; the closing ``;`` is required.

The login module is only a label here: millrace never loads code named by configuration
(CVE-2023-25194).  The options carry the credentials:

* PLAIN broker side: ``user_<name>="<password>"`` per user (``plain_users``);
* the broker's / client's own identity: ``username`` and ``password`` (``login_credentials``).

Errors are ``ConfigError`` naming the config key and the character position; they never echo the
value (it holds passwords).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.common.errors import ConfigError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-.$"


class _Parser:
    def __init__(self, text: str, key: str) -> None:
        self.text = text
        self.key = key
        self.pos = 0

    def fail(self, what: str, pos: int | None = None) -> ConfigError:
        at = self.pos if pos is None else pos
        return ConfigError(f"Invalid value for {self.key}: {what} at position {at}")

    def skip_blank(self) -> None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and _is_word_char(self.text[self.pos]):
            self.pos += 1
        return self.text[start : self.pos]

    def quoted(self) -> str:
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            if ch == quote:
                return "".join(out)
            if ch == "\\":
                if self.pos >= len(self.text):
                    break
                nxt = self.text[self.pos]
                self.pos += 1
                out.append(_ESCAPES.get(nxt, nxt))
            else:
                out.append(ch)
        raise self.fail("unterminated quoted value", start)

    def parse(self) -> JaasConfig:
        self.skip_blank()
        if self.pos >= len(self.text):
            raise self.fail("no login module")
        module = self.word()
        if not module:
            raise self.fail("expected a login module class name")
        self.skip_blank()
        flag_pos = self.pos
        flag = self.word()
        if flag.lower() not in CONTROL_FLAGS:
            raise self.fail(
                "expected a control flag (required, requisite, sufficient or optional)", flag_pos
            )
        options: dict[str, str] = {}
        while True:
            self.skip_blank()
            ch = self.peek()
            if ch == ";":
                self.pos += 1
                break
            if not ch:
                raise self.fail("missing ';' at the end of the login module")
            key_pos = self.pos
            name = self.word()
            if not name:
                raise self.fail(f"unexpected character {ch!r}, expected an option name or ';'")
            self.skip_blank()
            if self.peek() != "=":
                raise self.fail(f"expected '=' after option name {name!r}")
            self.pos += 1
            self.skip_blank()
            if self.peek() in ("'", '"'):
                value = self.quoted()
            else:
                value_pos = self.pos
                value = self.word()
                if not value:
                    raise self.fail(f"expected a value for option {name!r}", value_pos)
            if name in options:
                raise self.fail(f"duplicate option {name!r}", key_pos)
            options[name] = value
        self.skip_blank()
        if self.pos < len(self.text):
            raise self.fail(
                "expected exactly one login module, found more text after ';'"
            )
        return JaasConfig(module, flag.lower(), options)


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasConfig:
    """Parse one ``sasl.jaas.config`` value; ``key`` names the property in error messages."""
    return _Parser(text, key).parse()


USER_PREFIX = "user_"


def plain_users(jaas: JaasConfig) -> dict[str, str]:
    """PLAIN's user table from ``user_<name>=<password>`` options: ``{name: password}``."""
    return {
        name[len(USER_PREFIX) :]: value
        for name, value in jaas.options.items()
        if name.startswith(USER_PREFIX) and len(name) > len(USER_PREFIX)
    }


def login_credentials(jaas: JaasConfig) -> tuple[str, str] | None:
    """The ``username``/``password`` options (a client's or the broker's identity) if both set."""
    username = jaas.options.get("username")
    password = jaas.options.get("password")
    if username is None or password is None:
        return None
    return username, password
