"""Wire shapes of demand partners: the buyers' platforms adslot may ask for bids, a registry per environment.

Shape and range are checked here, by msgspec, so a bad value is a 400 `invalid_field` naming its path; what
msgspec cannot check (an endpoint's host and port, an assigned currency code, a floor's decimals) is checked
by `checked_endpoint` and `checked_currency` below and by the repository, which also needs the database to
know that every venue named exists. In a PATCH body an absent member stays as it is; null clears `max_qps` (no
limit) and `venues` (every venue).
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

import msgspec
from msgspec import UNSET, UnsetType

from adslot.demand.notice_rules import MAX_NOTICE_HOSTS, shown_notice_host
from adslot.errors import ApiError
from adslot.fields import Id

PartnerName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
"""A slug (lower-case letters, digits, `-` and `_`): the partner's name in the CLI, URLs and reports."""
Endpoint = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=2048,
        description="The absolute http(s) URL bid requests are POSTed to.",
        extra_json_schema={"format": "uri"},
    ),
]
"""Checked by `checked_endpoint`, whose refusal says what is wrong (a regex only says it did not match)."""
TimeoutMs = Annotated[int, msgspec.Meta(ge=10, le=2000)]
"""How long adslot waits for the partner's answer (OpenRTB `tmax`): a player waits no longer than that."""
FloorCpm = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
"""The lowest price per 1,000 impressions accepted, in the partner's currency; at most 6 decimals."""
Currency = Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$")]
"""ISO 4217, upper case: the currency of the floor and of the partner's bids (OpenRTB `cur`)."""
Auction = Literal["first", "second"]
"""first: the winner pays its bid; second: the next price or the floor, plus 0.01."""
MaxQps = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]
PartnerStatus = Literal["active", "paused"]
PartnerVenues = Annotated[list[Id], msgspec.Meta(min_length=1, max_length=10_000)]
"""The only venues the partner may bid on; null (never an empty list) means every venue."""

DealId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Seat = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Domain = Annotated[
    str,
    msgspec.Meta(
        min_length=1, max_length=253, pattern=r"^(?!-)[A-Za-z0-9-]{1,63}(\.(?!-)[A-Za-z0-9-]{1,63})*\.?$"
    ),
]
"""An advertiser's domain as bids name it (`adomain`), e.g. `brand.example`; its subdomains are included."""


class DealIn(msgspec.Struct, forbid_unknown_fields=True):
    """A private-marketplace deal offered to the partner in every bid request (`imp.pmp`), open to other
    bids as well (`private_auction` 0)."""

    id: DealId
    floor_cpm: FloorCpm = 0
    """The deal's own floor, in the partner's currency: a bid for the deal below it is dropped."""
    at: Literal[1, 2, 3] | None = None
    """1 first price, 2 second price, 3 the floor is the fixed price; null: the partner's auction."""
    buyer_seats: Annotated[list[Seat], msgspec.Meta(max_length=100)] | None = None
    """The seats allowed to bid on it (`wseat`); null: every seat of the partner."""


NoticeHost = Annotated[str, msgspec.Meta(min_length=1, max_length=262)]
"""A host notices may go to besides the endpoint's: `bid.example`, `bid.example:8080`, `[2001:db8::1]`."""
NoticeHosts = Annotated[list[NoticeHost], msgspec.Meta(max_length=MAX_NOTICE_HOSTS)]
HeaderName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
]
HeaderValue = Annotated[str, msgspec.Meta(min_length=1, max_length=4096, pattern=r"^[\x20-\x7e\t]+$")]
RESERVED_HEADERS = frozenset(
    {
        "accept-encoding",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "host",
        "transfer-encoding",
        "user-agent",
        "x-openrtb-version",
    }
)
"""Headers adslot sets itself on a bid request: a partner's credential may not replace them."""


class AuthHeaderIn(msgspec.Struct, forbid_unknown_fields=True):
    """A header sent with every bid request to the partner's endpoint (and nowhere else), for a partner that
    wants credentials: stored, never shown (answers say only its name), never logged."""

    name: HeaderName
    value: HeaderValue


Deals = Annotated[list[DealIn], msgspec.Meta(max_length=100)]
BlockedDomains = Annotated[list[Domain], msgspec.Meta(max_length=1000)]

DEFAULT_TIMEOUT_MS = 150
DEFAULT_CURRENCY = "USD"

# ISO 4217 currencies in use (no funds, precious metals or testing codes); both codes of a currency being
# replaced (ANG/XCG, SLL/SLE, ZWL/ZWG, VES/VED) while partners may still quote either.
_ISO_4217 = """
AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD
CAD CDF CHF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP
GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD
KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK
NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS
SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST
XAF XCD XCG XOF XPF YER ZAR ZMW ZWG ZWL
"""
CURRENCIES = frozenset(_ISO_4217.split())


class PartnerIn(msgspec.Struct, forbid_unknown_fields=True):
    name: PartnerName
    endpoint: Endpoint
    timeout_ms: TimeoutMs = DEFAULT_TIMEOUT_MS
    floor_cpm: FloorCpm = 0
    currency: Currency = DEFAULT_CURRENCY
    auction: Auction = "first"
    max_qps: MaxQps | None = None
    """Bid requests per second at most, per adslot process; null: no limit."""
    venues: PartnerVenues | None = None
    auto_approve: bool = False
    """Play the partner's new creatives without waiting for the media owner's approval."""
    deals: Deals = []
    blocked_domains: BlockedDomains = []
    """Advertiser domains whose bids are dropped (and sent as `badv`)."""
    status: PartnerStatus = "active"
    """A paused partner is kept, with its settings, but asked for nothing."""
    notice_hosts: NoticeHosts = []
    """Hosts its notices (nurl, lurl, burl) may go to besides the endpoint's host; others are dropped."""
    auth_header: AuthHeaderIn | None = None


class PartnerPatch(msgspec.Struct, forbid_unknown_fields=True):
    """Absent members stay as they are; the name never changes (it is the partner's identity)."""

    endpoint: Endpoint | UnsetType = UNSET
    timeout_ms: TimeoutMs | UnsetType = UNSET
    floor_cpm: FloorCpm | UnsetType = UNSET
    currency: Currency | UnsetType = UNSET
    auction: Auction | UnsetType = UNSET
    max_qps: MaxQps | UnsetType | None = UNSET
    venues: PartnerVenues | UnsetType | None = UNSET
    auto_approve: bool | UnsetType = UNSET
    deals: Deals | UnsetType = UNSET
    """Replaces the list whole ([] for none)."""
    blocked_domains: BlockedDomains | UnsetType = UNSET
    """Replaces the list whole ([] for none)."""
    status: PartnerStatus | UnsetType = UNSET
    notice_hosts: NoticeHosts | UnsetType = UNSET
    """Replaces the list whole ([] for none)."""
    auth_header: AuthHeaderIn | UnsetType | None = UNSET
    """null removes it."""


class Partner(msgspec.Struct):
    id: int
    name: str
    endpoint: str
    timeout_ms: int
    floor_cpm: float
    currency: str
    auction: Auction
    max_qps: int | None
    venues: list[str] | None
    """Sorted, each once; null: every venue."""
    auto_approve: bool
    status: PartnerStatus
    created_at: int
    deals: list[DealIn] = []
    blocked_domains: list[str] = []
    """Lower case, each once, sorted."""
    notice_hosts: list[str] = []
    """Normalised (lower case, no trailing dot), each once, sorted."""
    auth_header: str | None = None
    """The name of the credential header sent with bid requests; its value is never shown. null: none."""


def checked_endpoint(url: str, field: str = "endpoint") -> str:
    """The URL if adslot can POST to it: http(s), a host, a valid port, no fragment (never sent), no user
    info (credentials go in `auth_header`, never in a URL that is shown and logged); else 400."""
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise ApiError(400, "invalid_field", "an endpoint has no spaces or control characters", field)
    try:
        parts = urlsplit(url)
        if "@" in parts.netloc:  # before any message that would quote the URL, credentials and all
            raise ApiError(
                400,
                "invalid_endpoint",
                "an endpoint holds no user name or password: give credentials as auth_header",
                field,
            )
        port_ok = parts.port is None or parts.port > 0
    except ValueError as exc:  # a port that is not a number, or out of range; a malformed IPv6 host
        raise ApiError(400, "invalid_field", f"{url!r} is not a valid URL: {exc}", field) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ApiError(400, "invalid_field", f"{url!r} is not an absolute http(s) URL with a host", field)
    if parts.fragment or url.endswith("#"):
        raise ApiError(400, "invalid_field", "an endpoint has no fragment (#...): it is never sent", field)
    return url


def checked_notice_hosts(entries: list[str], field: str = "notice_hosts") -> list[str]:
    """The declared notice hosts as stored: normalised, each once, sorted; 400 naming the first bad one."""
    shown: set[str] = set()
    for index, entry in enumerate(entries):
        try:
            shown.add(shown_notice_host(entry))
        except ValueError as exc:
            raise ApiError(400, "invalid_field", str(exc), f"{field}[{index}]") from exc
    return sorted(shown)


def checked_auth_header(header: AuthHeaderIn, field: str = "auth_header") -> AuthHeaderIn:
    """The header if adslot may send it: not one adslot sets itself on a bid request; else 400."""
    if header.name.lower() in RESERVED_HEADERS:
        raise ApiError(400, "invalid_field", f"adslot sets {header.name} itself", f"{field}.name")
    return header


def checked_currency(code: str, field: str = "currency") -> str:
    """The code if it is an ISO 4217 currency in use: a typo would drop every bid as in another currency."""
    if code not in CURRENCIES:
        raise ApiError(400, "invalid_field", f"{code!r} is not an ISO 4217 currency code", field)
    return code
