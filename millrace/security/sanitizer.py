"""Entity names as ZooKeeper path segments (Java: ``org.apache.kafka.common.utils.Sanitizer``).

User and client-id names become znode names such as ``/config/users/<sanitized>``, so they are
URL-encoded: the UTF-8 bytes of every character other than ASCII letters, digits and ``. - _`` are
written ``%XX`` (upper-case hex).  This equals Java's ``URLEncoder`` output with its two
leftovers fixed the way Kafka fixes them: ``*`` becomes ``%2A`` and a space ``%20`` (not ``+``).
``~`` is encoded too (``%7E``), unlike Python's ``urllib.parse.quote``.

``desanitize`` is ``URLDecoder``: ``%XX`` sequences are bytes of UTF-8 text and ``+`` is a space;
a ``%`` not followed by two hex digits, or bytes that are not UTF-8, raise ``ValueError``.
"""

from __future__ import annotations

_UNRESERVED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
_HEX = frozenset("0123456789abcdefABCDEF")


def sanitize(name: str) -> str:
    return "".join(
        chr(byte) if byte in _UNRESERVED else f"%{byte:02X}" for byte in name.encode("utf-8")
    )


def desanitize(name: str) -> str:
    out = bytearray()
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%":
            pair = name[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise ValueError(f"Invalid escape at position {i} in sanitized name {name!r}")
            out.append(int(pair, 16))
            i += 3
            continue
        out += b" " if ch == "+" else ch.encode("utf-8")
        i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"Sanitized name {name!r} does not decode to UTF-8") from None
