"""No log line holds a secret: keys, cookies, passwords and credentials are replaced before a line is written.

Keys and sessions are stored only as hashes, so a log line must never hold them either, whatever failed and
whatever the failure's message quotes. Two nets, both pure: a value whose name says it is secret (`password`,
`ssp_key`, `cookie`, ...) is replaced wherever it sits in an event's dict, and a value shaped like a secret
(an `ssp_live_`/`ssp_test_` key, a console session or CSRF token, a `name=value` or `'name': 'value'` pair
with a secret name, the credentials of a URL) is replaced anywhere in any string, the rendered line included.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from structlog.typing import EventDict, WrappedLogger

REDACTED = "[redacted]"

SECRET_NAME = re.compile(
    r"(?:password|passwd|secret|token|api[_-]?key|ssp[_-]?key|(?:^|[_-])key$|authorization|cookie|session|"
    r"credential|csrf|adslot_console)",
    re.IGNORECASE,
)
"""A name (an event dict's key, a header's, a form field's, a cookie's) whose value is never written."""

_NAMES = (
    r"password|passwd|secret|[a-z_-]*token|api[_-]?key|ssp[_-]?key|authorization|set-cookie|cookie|"
    r"adslot_console(?:_csrf)?|session|csrf[a-z_-]*|credentials?"
)
_HEADER = r"(?:(?<=authorization)|(?<=cookie)|(?<=ssp-key))"
"""After the name of a header that carries a secret: `Name: value` (a header written as HTTP writes it)."""
_Q = r"\\?['\"]"
"""A quote, JSON-escaped or not."""
_SHAPES = re.compile(
    # an adslot API key
    r"ssp_(?:live|test)_[A-Za-z0-9]+"
    # a secret name and its value: `name=value` (a query, a form, a cookie), `'name': 'value'` and
    # `name = 'value'` (a repr, a JSON line), `Name: value` (a header)
    rf"|(?P<name>(?:{_NAMES}))(?P<sep>={_Q}?|{_Q}?\s*[:=]\s*b?{_Q}|{_HEADER}:[ \t]*)"
    r"(?!\[redacted\])(?P<value>(?:Bearer |Basic )?[^\s'\",;&)}\]\\]+)"
    # a `(b'name', b'value')` pair with a secret name (ASGI and httpx headers)
    rf"|(?P<pair>\(b?{_Q}(?:{_NAMES}){_Q},\s*b?{_Q})[^'\"\\]+"
    # the credentials of a URL (a partner's endpoint)
    r"|(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s@'\"]+@"
    # a console session (secrets.token_urlsafe(32)) or CSRF token (token_urlsafe(24)) standing alone
    r"|(?<![A-Za-z0-9_-])(?:[A-Za-z0-9_-]{43}|[A-Za-z0-9_-]{32})(?![A-Za-z0-9_-])",
    re.IGNORECASE,
)
_HEX = re.compile(r"[0-9a-f]{32}")
"""A uuid written without hyphens (or an MD5) has the CSRF token's length: it is an id, not a secret."""


def _replace(match: re.Match[str]) -> str:
    if match.group("pair") is not None:
        return match.group("pair") + REDACTED
    if match.group("name") is not None:
        return match.group("name") + match.group("sep") + REDACTED
    if match.group("scheme") is not None:
        return match.group("scheme") + REDACTED + "@"
    if _HEX.fullmatch(match.group(0)):
        return match.group(0)
    return REDACTED


def redact_text(text: str) -> str:
    """`text` with every secret-shaped value in it replaced."""
    return _SHAPES.sub(_replace, text)


def redact_value(value: Any) -> Any:
    """`value` with every secret replaced: a secret name's value whole, secret shapes in every string."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and SECRET_NAME.search(k) else redact_value(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(v) for v in value) if not _is_pair(value) else _redact_pair(value)
    return value


def _is_pair(value: list[Any] | tuple[Any, ...]) -> bool:
    return len(value) == 2 and isinstance(value[0], (str, bytes))


def _redact_pair(pair: list[Any] | tuple[Any, ...]) -> Any:
    """A (name, value) pair, as headers and cookies travel: the value goes when the name is secret."""
    name = pair[0].decode("latin-1") if isinstance(pair[0], bytes) else pair[0]
    if SECRET_NAME.search(name):
        return type(pair)((pair[0], REDACTED))
    return type(pair)(redact_value(v) for v in pair)


def redact_secrets(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """The processor: every member of the event, by name and by shape (the event's text itself included)."""
    redacted: EventDict = redact_value(event_dict)
    return redacted


class RedactingRenderer:
    """A renderer whose line is searched once more for secret shapes: whatever the renderer made of values
    that are not strings (an exception object, bytes, a repr) is written only through this."""

    def __init__(self, renderer: Callable[[WrappedLogger, str, EventDict], str | bytes]) -> None:
        self._renderer = renderer

    def __call__(self, logger: WrappedLogger, name: str, event_dict: EventDict) -> str:
        line = self._renderer(logger, name, event_dict)
        return redact_text(line.decode("utf-8", "replace") if isinstance(line, bytes) else line)
