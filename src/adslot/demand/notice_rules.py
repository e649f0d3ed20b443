"""Where a partner's notices (`nurl`, `lurl`, `burl`) may go: only to the hosts declared for the partner.

A bid is written by the buyer, so its notice URLs are too: unchecked, a bidder could make adslot send GETs to
any address adslot can reach (its database, its cache, an internal admin page). A notice therefore goes out
only over http(s), at most MAX_NOTICE_BYTES long (after macro substitution too), without user info, to the
host and port of the partner's endpoint or to one of its declared `notice_hosts`; any other is dropped and
counted with its `NoticeFault`. Pure: the URL is parsed by yarl, the parser aiohttp sends it with, so the host
checked is the host connected to.

A declared host without a port admits the default port of the notice's scheme (80 for http, 443 for https);
`host:port` admits that port only. The endpoint's host admits the endpoint's port, or both default ports when
the endpoint names none. Hosts compare in lower case, without a trailing dot; IPv6 literals in compressed
form. A declared name is trusted as the media owner declared it: what it resolves to is the partner's DNS.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

from yarl import URL

NoticeFault = Literal[
    "notice_scheme", "notice_host", "notice_too_long", "notice_userinfo", "notice_malformed"
]
"""Why a notice is not sent: not http(s); a host (or port) the partner did not declare; over MAX_NOTICE_BYTES
(UTF-8, before or after its macros are substituted); user info in it (`user:pass@`); not a URL with a host."""
NOTICE_FAULTS: tuple[NoticeFault, ...] = get_args(NoticeFault)
MAX_NOTICE_BYTES = 8 * 1024
"""A notice URL carries an id, a price and a few macros: a longer one is not a notice."""
MAX_NOTICE_HOSTS = 32
DEFAULT_PORTS = {"http": 80, "https": 443}
_DOMAIN = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)(\.(?!-)[a-z0-9_-]{1,63}(?<!-))*$")

Origin = tuple[str, int | None]
"""(host, port); port None: the default port of the notice's scheme."""


@dataclass(frozen=True, slots=True)
class NoticeRule:
    """The origins one partner's notices may go to; the empty rule admits none."""

    origins: frozenset[Origin] = frozenset()


NOTHING = NoticeRule()


@lru_cache(maxsize=1024)
def normal_host(host: str) -> str:
    """Lower case, no trailing dot; an IP literal in its canonical form (so `[0:0::1]` is `::1`). Memoized:
    a partner's notices name the same few hosts notice after notice, and a name is not an IP address only
    once ipaddress has raised, which costs more than the rest of the check."""
    host = host.lower().rstrip(".").removeprefix("[").removesuffix("]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def parse_notice_host(entry: str) -> Origin:
    """A declared notice host (`bid.example`, `bid.example:8080`, `10.0.0.7`, `[2001:db8::1]:443`) as an
    origin; ValueError saying what is wrong."""
    if not entry or not entry.isascii() or any(ch in entry for ch in "/\\@?#%") or not entry.isprintable():
        raise ValueError(f"{entry!r} is not a host name or address, with an optional :port")
    if any(ch.isspace() for ch in entry):
        raise ValueError(f"{entry!r} has spaces")
    try:
        url = URL("http://" + entry)
        port = url.explicit_port
    except ValueError as exc:
        raise ValueError(f"{entry!r} is not a host with an optional :port: {exc}") from exc
    raw = url.raw_host
    if not raw or port == 0:
        raise ValueError(f"{entry!r} is not a host with an optional port from 1 to 65535")
    host = normal_host(raw)
    if not _is_ip(host) and not _DOMAIN.match(host):
        raise ValueError(f"{entry!r} is not a host name or an IP address")
    return host, port


def shown_notice_host(entry: str) -> str:
    """A declared host as stored and shown: normalised, its port kept, an IPv6 literal in brackets."""
    host, port = parse_notice_host(entry)
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


@lru_cache(maxsize=1024)
def notice_rule(endpoint: str, notice_hosts: tuple[str, ...] = ()) -> NoticeRule:
    """The rule of a partner with this endpoint and these declared hosts (stored ones: already checked)."""
    origins: set[Origin] = set()
    try:
        url = URL(endpoint)
        if url.raw_host:
            origins.add((normal_host(url.raw_host), url.explicit_port))
    except ValueError:
        pass  # an endpoint adslot refused to store cannot be met here; it admits no host
    for entry in notice_hosts:
        try:
            origins.add(parse_notice_host(entry))
        except ValueError:
            continue
    return NoticeRule(frozenset(origins))


def notice_fault(url: str, rule: NoticeRule) -> NoticeFault | None:
    """None if the notice may be sent under `rule`, else why not. Cheap checks first: a 200 KB URL is
    refused by its length before it is parsed."""
    if len(url) > MAX_NOTICE_BYTES or len(url.encode()) > MAX_NOTICE_BYTES:
        return "notice_too_long"
    try:
        parsed = URL(url)
        scheme = parsed.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            return "notice_scheme"
        raw = parsed.raw_host
        port = parsed.explicit_port
    except ValueError:
        return "notice_malformed"
    if not parsed.absolute or not raw:
        return "notice_malformed"
    if parsed.raw_user is not None or parsed.raw_password is not None:
        return "notice_userinfo"
    host, default = normal_host(raw), DEFAULT_PORTS[scheme]
    port = default if port is None else port
    origins = rule.origins
    if (host, port) in origins or (port == default and (host, None) in origins):
        return None
    return "notice_host"


def template_fault(template: str, rule: NoticeRule) -> NoticeFault | None:
    """`notice_fault` of a notice template (a URL before its macros are substituted), memoized: a partner's
    bids carry the same `nurl` and `lurl` templates bid after bid. Only for templates: a substituted URL is
    new every time, and would only push the templates out. One over the limit is refused unremembered, so
    the memo holds at most 1,024 x MAX_NOTICE_BYTES."""
    if len(template) > MAX_NOTICE_BYTES:
        return "notice_too_long"
    return _template_fault(template, rule)


@lru_cache(maxsize=1024)
def _template_fault(template: str, rule: NoticeRule) -> NoticeFault | None:
    return notice_fault(template, rule)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
