"""What a report asks for, checked once for the API and the CLI alike.

Parameters arrive as the strings of a query string (or of command-line options), so each is parsed by hand:
that way every bad input gets the error envelope's stable code and the field's own name (`from`, not the
Python name behind it), whichever door it came through.
"""

from __future__ import annotations

import re
import uuid
import zoneinfo
from dataclasses import dataclass

from adslot.errors import ApiError
from adslot.fields import MAX_ID

DIMENSIONS = ("campaign", "creative", "venue", "screen", "day", "hour")
TIME_DIMENSIONS = frozenset({"day", "hour"})
FORMATS = ("json", "csv")
# Up to 9999-12-30: a bucket start plus the largest UTC offset (+14 h) still has a calendar date.
MAX_EPOCH = 253_402_214_399
MAX_ID_LENGTH = 128
DELIVERY_MAX_DAYS = 366
DEMAND_MAX_DAYS = 366
PLAYLOG_MAX_DAYS = 31
PLAYLOG_DEFAULT_LIMIT = 10_000
PLAYLOG_MAX_LIMIT = 100_000
TIMEZONE_PATTERN = r"^[A-Za-z0-9_+\-]{1,64}(/[A-Za-z0-9_+\-]{1,64}){0,3}$"
GROUP_BY_PATTERN = r"^[a-z]+(,[a-z]+){0,5}$"
CURSOR_PATTERN = r"^[0-9]{1,12}\.[0-9a-f]{32}$"

_INTEGER = re.compile(r"^-?[0-9]{1,20}$")
_TIMEZONE = re.compile(TIMEZONE_PATTERN)
_CURSOR = re.compile(CURSOR_PATTERN)
_CONTROL = frozenset(chr(c) for c in (*range(0x20), 0x7F))


@dataclass(frozen=True, slots=True)
class DeliveryQuery:
    start: int
    """First play_time included (UTC epoch seconds)."""
    end: int
    """First play_time excluded."""
    group_by: tuple[str, ...]
    timezone: str
    zone: zoneinfo.ZoneInfo
    campaign_id: int | None = None
    venue_id: str | None = None
    screen_id: str | None = None
    fmt: str = "json"

    @property
    def by_time(self) -> bool:
        return not TIME_DIMENSIONS.isdisjoint(self.group_by)

    @property
    def requests_by_campaign(self) -> bool:
        """request_stats counts requests per venue, screen and hour, before any campaign is chosen: a group
        or filter by campaign or creative has no request count to divide by."""
        return self.campaign_id is not None or not {"campaign", "creative"}.isdisjoint(self.group_by)


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a play log page ended: rows are ordered by (play_time, id), so the next page starts after it."""

    play_time: int
    id: uuid.UUID

    def encode(self) -> str:
        return f"{self.play_time}.{self.id.hex}"


@dataclass(frozen=True, slots=True)
class PlaylogQuery:
    venue_id: str
    start: int
    end: int
    screen_id: str | None = None
    fmt: str = "json"
    limit: int = PLAYLOG_DEFAULT_LIMIT
    after: Cursor | None = None


def _present(value: str | None, name: str) -> str:
    if value is None:
        raise ApiError(400, "missing_field", f"{name} is required", name)
    if not value.strip():
        raise ApiError(400, "empty_value", f"{name} must not be empty", name)
    return value


def integer(value: str | None, name: str, low: int, high: int, what: str = "an integer") -> int:
    """A required integer parameter within [low, high]."""
    text = _present(value, name)
    if not _INTEGER.match(text):
        raise ApiError(400, "invalid_type", f"{name} must be {what}", name)
    number = int(text)
    if not low <= number <= high:
        raise ApiError(400, "invalid_field", f"{name} must be between {low} and {high}", name)
    return number


def identifier(value: str | None, name: str) -> str | None:
    """An optional venue or screen id: the ad request's rules (non-blank, at most 128 characters, no
    control characters), so a filter can name anything a player could have sent."""
    if value is None:
        return None
    text = _present(value, name)
    if len(text) > MAX_ID_LENGTH:
        raise ApiError(400, "too_long", f"{name} must be at most {MAX_ID_LENGTH} characters", name)
    if not _CONTROL.isdisjoint(text):
        raise ApiError(400, "invalid_characters", f"{name} must not contain control characters", name)
    return text


def time_range(start: str | None, end: str | None, max_days: int | None) -> tuple[int, int]:
    """[from, to) in UTC epoch seconds, from before to, at most max_days long (None: any length)."""
    what = "UTC epoch seconds"
    first = integer(start, "from", 0, MAX_EPOCH, what)
    last = integer(end, "to", 0, MAX_EPOCH, what)
    if last <= first:
        raise ApiError(400, "invalid_field", "to must be after from", "to")
    if max_days is not None and last - first > max_days * 86_400:
        raise ApiError(400, "invalid_field", f"from and to may be at most {max_days} days apart", "to")
    return first, last


def output_format(value: str | None) -> str:
    if value is None:
        return "json"
    if value not in FORMATS:
        raise ApiError(400, "invalid_format", "format must be json or csv", "format")
    return value


def time_zone(value: str | None) -> tuple[str, zoneinfo.ZoneInfo]:
    """An IANA time zone (default UTC). The pattern check comes first so that no odd string reaches the
    time zone database's file lookup."""
    name = "UTC" if value is None else value
    try:
        if len(name) > 64 or not _TIMEZONE.match(name):
            raise ValueError(name)
        return name, zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ApiError(422, "invalid_timezone", f"{name!r} is not an IANA time zone", "timezone") from exc


def dimensions(value: str | None) -> tuple[str, ...]:
    """The comma list of group_by (default campaign), each dimension once, in the order given."""
    if value is None:
        return ("campaign",)
    names = value.split(",")
    unknown = [name for name in names if name not in DIMENSIONS]
    if unknown:
        raise ApiError(
            400,
            "invalid_field",
            f"group_by: unknown dimension {unknown[0]!r}; use a comma list of {', '.join(DIMENSIONS)}",
            "group_by",
        )
    if len(set(names)) != len(names):
        raise ApiError(400, "invalid_field", "group_by names a dimension twice", "group_by")
    return tuple(names)


def parse_delivery(
    *,
    start: str | None,
    end: str | None,
    group_by: str | None = None,
    timezone: str | None = None,
    campaign_id: str | None = None,
    venue_id: str | None = None,
    screen_id: str | None = None,
    fmt: str | None = None,
    max_days: int | None = DELIVERY_MAX_DAYS,
) -> DeliveryQuery:
    """The API's and the CLI's delivery query, at most DELIVERY_MAX_DAYS long; the console asks with
    max_days None for a whole flight (repository.delivery_report reads any range window by window)."""
    first, last = time_range(start, end, max_days)
    name, zone = time_zone(timezone)
    return DeliveryQuery(
        start=first,
        end=last,
        group_by=dimensions(group_by),
        timezone=name,
        zone=zone,
        campaign_id=None if campaign_id is None else integer(campaign_id, "campaign_id", 1, MAX_ID),
        venue_id=identifier(venue_id, "venue_id"),
        screen_id=identifier(screen_id, "screen_id"),
        fmt=output_format(fmt),
    )


@dataclass(frozen=True, slots=True)
class DemandQuery:
    start: int
    """The first UTC hour included is the first to start at or after it (UTC epoch seconds)."""
    end: int
    """Hours starting at or after it are excluded."""
    timezone: str
    zone: zoneinfo.ZoneInfo
    fmt: str = "json"


def parse_demand(
    *, start: str | None, end: str | None, timezone: str | None = None, fmt: str | None = None
) -> DemandQuery:
    """The demand report's query: from, to, timezone and format, checked as the delivery report's are."""
    first, last = time_range(start, end, DEMAND_MAX_DAYS)
    name, zone = time_zone(timezone)
    return DemandQuery(start=first, end=last, timezone=name, zone=zone, fmt=output_format(fmt))


def cursor(value: str | None) -> Cursor | None:
    if value is None:
        return None
    if not _CURSOR.match(value):
        raise ApiError(
            400, "invalid_field", "cursor must be the next_cursor of a previous play log page", "cursor"
        )
    play_time, hex_id = value.split(".")
    return Cursor(int(play_time), uuid.UUID(hex=hex_id))


def parse_playlog(
    *,
    venue_id: str | None,
    start: str | None,
    end: str | None,
    screen_id: str | None = None,
    fmt: str | None = None,
    limit: str | None = None,
    after: str | None = None,
) -> PlaylogQuery:
    venue = identifier(_present(venue_id, "venue_id"), "venue_id")
    assert venue is not None
    first, last = time_range(start, end, PLAYLOG_MAX_DAYS)
    return PlaylogQuery(
        venue_id=venue,
        start=first,
        end=last,
        screen_id=identifier(screen_id, "screen_id"),
        fmt=output_format(fmt),
        limit=PLAYLOG_DEFAULT_LIMIT if limit is None else integer(limit, "limit", 1, PLAYLOG_MAX_LIMIT),
        after=cursor(after),
    )
