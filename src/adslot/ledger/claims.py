"""Pure claim planning: what one play of a campaign in a slot would reserve, before anything is reserved.

A claim names a delivery counter (a row of delivery_counters) and the units one play adds to it; the ledger
admits all of an ad request's claims or none, under its write lock (budget.admit). Units are integers so the
database adds them exactly: plays count 1, impressions count in thousandths (milli), spend in micros of the
account currency. Keys are readable and stable, because reports and operators read the counters too:

    c{id}:life:{metric}                 lifetime cap                (cap = the limit)
    c{id}:day:{YYYY-MM-DD}:{metric}     daily cap, campaign's day   (cap = the limit)
    c{id}:hour:{epoch hour}             even pacing                 (cap fixed when the hour's row is created)
    f{id}:{venue}/{screen}:h:{epoch hour}       frequency per clock hour and screen
    f{id}:{venue}/{screen}:d:{YYYY-MM-DD}       frequency per venue-local day and screen
    s:{venue}/{screen}:{category}       competitive separation (a Spacing, not a count)

A request without a screen counts its venue as one screen (screen part empty). A venue id containing "/" or a
screen id containing ":" would make two different places print the same key, and a key must fit the 255
characters of its column, so such places are written as "#" and a SHA-256 prefix instead (which has neither
"/" nor ":", so it can collide with no readable place).

Campaigns without caps, frequency or separation plan the shared empty Claims without allocating anything, so
the ordinary campaign costs nothing here.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo

import msgspec

from adslot.decision.model import HOURS_PER_WEEK, Cap, CapMetric, LiveCampaign, VenueProfile

MAX_KEY_LENGTH = 255
HOUR = 3600
QUARTER_HOUR = 900
_HASHED_PLACE_CHARS = 40


@dataclass(frozen=True, slots=True)
class PacePlan:
    """How to size an even-pacing hour when its counter row is first created.

    The hour's cap becomes ceil((goal - used of total_key) / remaining_active_hours): what is left of the
    goal, spread evenly over the active hours left (this one included), so an hour that starts behind or
    ahead of plan corrects itself instead of compounding.
    """

    total_key: str
    goal: int
    remaining_active_hours: int


@dataclass(frozen=True, slots=True)
class Claim:
    """`units` to reserve on counter `key`, whose limit is `cap` (None: counted, not limited).

    A pacing claim carries its PacePlan instead: its cap is fixed by the ledger when the hour's row is
    created, so every worker paces the hour against one figure.
    """

    key: str
    units: int
    cap: int | None
    pace: PacePlan | None = None


@dataclass(frozen=True, slots=True)
class Spacing:
    """Competitive separation: no two plays on one counter `key` closer than the larger of their gaps."""

    key: str
    play_time: int
    gap_seconds: int


@dataclass(frozen=True, slots=True)
class Claims:
    counts: tuple[Claim, ...] = ()
    spacings: tuple[Spacing, ...] = ()

    def __bool__(self) -> bool:
        """True when admission has anything to check: an empty Claims needs no counter and no lock."""
        return bool(self.counts or self.spacings)


NO_CLAIMS = Claims()


class SlotLike(Protocol):
    """What planning reads of adslot.decision.slot.Slot (read-only, so the frozen Slot satisfies it)."""

    @property
    def venue(self) -> VenueProfile: ...

    @property
    def screen_id(self) -> str | None: ...

    @property
    def play_time(self) -> int: ...

    @property
    def hour_of_week(self) -> int: ...

    @property
    def local_date(self) -> datetime.date: ...


def claims_json(claims: Claims | None) -> str | None:
    """The ad request's claims column: exactly the units to deliver or release later; None if it holds none.

    Spacings are not stored: a separation mark is not given back when an ad request is released (see
    budget.admit), so there is nothing to undo.
    """
    if claims is None or not claims.counts:
        return None
    return _encode_json([(c.key, c.units) for c in claims.counts]).decode()


_encode_json = msgspec.json.Encoder().encode
"""msgspec's compact JSON, the text json.dumps gave with separators (",", ":") except that it writes UTF-8
where json.dumps escaped (json.loads reads both): 0.3 µs against 2.9 for every capped ad request's write."""


@lru_cache(maxsize=4096)
def parse_claims(text: str | None) -> tuple[tuple[str, int], ...]:
    """The stored claims column back as (key, units) pairs.

    Cached (an immutable answer): the ledger writer parses an ad request's claims twice for each counted
    impression of a capped campaign (the counters to lock, then the delivery), and the ad requests of a
    campaign's day share one text, so a batch of them parsed 1.2 µs of JSON per parse."""
    if not text:
        return ()
    return tuple((str(key), int(units)) for key, units in json.loads(text))


def impressions_for(venue: VenueProfile, hour_of_week: int) -> float:
    """Audience of one play: the venue's hour-of-week multiplier when it has one, else its flat figure."""
    hourly = venue.hourly_impressions
    if hourly is not None:
        return hourly[hour_of_week % HOURS_PER_WEEK]
    return venue.impressions_per_play


def units_of(metric: CapMetric, impressions: float, cpm_micros: int | None) -> int:
    """Integer units of one play in a cap's metric (a spend cap without a price spends nothing)."""
    if metric == "plays":
        return 1
    if metric == "impressions":
        return round(impressions * 1000)
    return round(impressions * (cpm_micros or 0) / 1000)


@dataclass(frozen=True, slots=True)
class _Local:
    date: str
    hour_of_week: int
    next_midnight: int


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=8192)
def _local(tz_name: str, quarter: int) -> _Local:
    """The campaign's wall clock for a UTC quarter hour.

    Every zone in use today is offset from UTC by a whole number of quarter hours, so the local date and hour
    are the same for the whole quarter: one conversion serves all the requests of a quarter hour.
    """
    zone = _zone(tz_name)
    local = datetime.datetime.fromtimestamp(quarter * QUARTER_HOUR, zone)
    tomorrow = local.date() + datetime.timedelta(days=1)
    midnight = datetime.datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=zone)
    return _Local(local.date().isoformat(), local.weekday() * 24 + local.hour, int(midnight.timestamp()))


def campaign_clock(tz_name: str, play_time: int) -> tuple[str, int]:
    """A campaign's local date and hour of the week at play_time, as plan_claims reads them: a plan for one
    place changes only with these, the UTC hour and the venue's local date (the forecast keys its remembered
    plans on them)."""
    local = _local(tz_name, play_time // QUARTER_HOUR)
    return local.date, local.hour_of_week


def active_hours(mask: int, first_hour_of_week: int, hours: int) -> int:
    """How many of `hours` consecutive hours, starting at `first_hour_of_week`, the 168-bit mask allows.

    Arithmetic per week (whole weeks times the mask's population, plus one rotated window), so a flight of
    years costs the same as a day. It assumes a constant UTC offset; across a DST change the count may be off
    by an hour, which moves a pacing target by a fraction of an hour's share, never a hard cap.
    """
    if hours <= 0:
        return 0
    weeks, rest = divmod(hours, HOURS_PER_WEEK)
    total = weeks * mask.bit_count()
    if rest:
        start = first_hour_of_week % HOURS_PER_WEEK
        doubled = mask | (mask << HOURS_PER_WEEK)
        total += ((doubled >> start) & ((1 << rest) - 1)).bit_count()
    return total


def remaining_active_hours(mask: int, hour_of_week: int, play_hour: int, until: int) -> int:
    """Active hours from the play's hour (always counted: it is being served) to `until` (exclusive)."""
    later = max(0, (until - 1 - play_hour) // HOUR)
    return 1 + active_hours(mask, hour_of_week + 1, later)


def _place(venue_id: str, screen_id: str | None, room: int) -> str:
    """`venue/screen`, or a hash of both when it would be ambiguous or longer than `room` characters."""
    screen = screen_id or ""
    place = f"{venue_id}/{screen}"
    if "/" in venue_id or ":" in screen or len(place) > room:
        digest = hashlib.sha256(f"{len(venue_id)}:{venue_id}/{screen}".encode()).hexdigest()
        return "#" + digest[:_HASHED_PLACE_CHARS]
    return place


def _bounded(key: str) -> str:
    """A key over the column's length (only an absurd category can make one): keep a prefix, hash the rest."""
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:_HASHED_PLACE_CHARS]
    return f"{key[: MAX_KEY_LENGTH - len(digest) - 1]}#{digest}"


DAY = 24 * HOUR
LATEST_MIDNIGHT = 12 * HOUR
"""How long after a UTC midnight the same date ends anywhere (UTC-12 is the last zone to leave it)."""


def closes_at(key: str) -> int | None:
    """When no ad request can claim this counter any more (epoch seconds), or None if it never closes.

    An hour's counters (pacing, frequency per hour) close at the end of that hour; a day's (daily caps in the
    campaign's zone, frequency per venue-local day) at the latest moment that date ends in any zone, since
    the key keeps the date, not the zone. Lifetime caps and competitive separation never close. Counters
    that have closed are kept for a retention period, then dropped by the expiry sweep (store.py).
    """
    try:
        # c{id}:hour:{epoch hour}, c{id}:day:{date}:{metric}, c{id}:life:{metric}
        if key.startswith("c"):
            _, kind, when = key.split(":")[:3]
        # f{id}:{place}:h:{epoch hour}, f{id}:{place}:d:{date}, where the place itself may hold ":"
        elif key.startswith("f"):
            head, _, when = key.rpartition(":")
            kind = head.rpartition(":")[2]
        else:
            return None
        if kind in ("hour", "h"):
            return int(when) + HOUR
        if kind not in ("day", "d"):
            return None
        day = datetime.date.fromisoformat(when)
    except ValueError:
        return None  # not a key this module writes: keep it
    midnight = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)
    return int(midnight.timestamp()) + DAY + LATEST_MIDNIGHT


def _cap_key(campaign_id: int, cap: Cap, day: str) -> str:
    if cap.period == "lifetime":
        return f"c{campaign_id}:life:{cap.metric}"
    return f"c{campaign_id}:day:{day}:{cap.metric}"


def plan_claims(campaign: LiveCampaign, slot: SlotLike, impressions: float) -> Claims:
    """Everything one play of `campaign` in `slot` would reserve; NO_CLAIMS when nothing limits it."""
    frequency = campaign.frequency
    separated = campaign.separation_minutes > 0 and bool(campaign.category)
    if not campaign.caps and frequency is None and not separated:
        return NO_CLAIMS
    play_time = slot.play_time
    play_hour = play_time - play_time % HOUR
    counts: dict[str, Claim] = {}
    if campaign.caps:
        local = _local(campaign.timezone, play_time // QUARTER_HOUR)
        lifetime: tuple[str, Cap, int] | None = None
        daily: tuple[str, Cap, int] | None = None
        for cap in campaign.caps:
            key = _cap_key(campaign.id, cap, local.date)
            units = units_of(cap.metric, impressions, campaign.cpm_micros)
            # The first lifetime cap is the pacing goal (else the first daily one), as reports assume.
            if cap.period == "lifetime":
                lifetime = lifetime or (key, cap, units)
            else:
                daily = daily or (key, cap, units)
            if units <= 0:
                continue  # a play worth nothing in this metric cannot approach its cap
            known = counts.get(key)
            if known is None or (known.cap is not None and cap.limit < known.cap):
                counts[key] = Claim(key, units, cap.limit)  # two caps on one counter: the tighter rules
        if campaign.pacing == "even":
            goal = lifetime or daily
            if goal is not None and goal[2] > 0:
                total_key, cap, units = goal
                until = campaign.end_at if goal is lifetime else min(campaign.end_at, local.next_midnight)
                remaining = remaining_active_hours(
                    campaign.hours_of_week, local.hour_of_week, play_hour, until
                )
                key = f"c{campaign.id}:hour:{play_hour}"
                counts[key] = Claim(key, units, None, PacePlan(total_key, cap.limit, remaining))
    if frequency is not None:
        prefix = f"f{campaign.id}:"
        place = _place(slot.venue.venue_id, slot.screen_id, MAX_KEY_LENGTH - len(prefix) - 14)
        if frequency.per_hour is not None:
            key = f"{prefix}{place}:h:{play_hour}"
            counts[key] = Claim(key, 1, frequency.per_hour)
        if frequency.per_day is not None:
            key = f"{prefix}{place}:d:{slot.local_date.isoformat()}"
            counts[key] = Claim(key, 1, frequency.per_day)
    spacings: tuple[Spacing, ...] = ()
    if separated:
        place = _place(slot.venue.venue_id, slot.screen_id, MAX_KEY_LENGTH - 3 - len(campaign.category or ""))
        key = _bounded(f"s:{place}:{campaign.category}")
        spacings = (Spacing(key, play_time, campaign.separation_minutes * 60),)
    return Claims(tuple(counts.values()), spacings)
