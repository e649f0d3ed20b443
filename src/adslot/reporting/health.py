"""Integration health: each API key's go-live criteria (one key, one player integration), for the console.

A player integration is ready for production when the ads it is sent are played and proven: a VAST answer
that is never played, a Proof of Play that arrives hours late or a player that stops after the impression
all cost the advertiser, whatever the ad server did. The criteria and their thresholds live here, in one
place; `assess` judges them from counts alone (pure), and `integration_health` reads those counts for every
key with aggregate queries over a window of days (a management-rate page: it reads the window's ad requests,
through the play_time index, and the window's hours of key_stats, through its primary key).

The window starts at the UTC hour `days` days before the current hour and has no end: the current hour, and
ad requests whose play_time is ahead, count too, so a test an integrator has just run shows at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa

from adslot.auth.keys import SCOPE_AD_REQUEST
from adslot.ledger.records import SETTLE_GRACE_SECONDS
from adslot.storage.tables import accounts, ad_requests, api_keys, invalid_fires, key_stats

HOUR = 3600
DAY = 24 * HOUR
DEFAULT_DAYS = 7

PLAYED_MIN = 0.95
"""Share of decided ad requests (played, released, or expired unplayed) that were played: a player that
takes ads it does not play holds reservations other screens could have sold, and delivers nothing."""
POP_DELAY_MAX_SECONDS = 3600
"""A Proof of Play is on time when its impression was counted at most this long after play_time: players
that queue PoPs offline must send them within the hour, or delivery and pacing run on stale figures."""
POP_ON_TIME_MIN = 0.95
"""Share of played ad requests whose impression arrived within POP_DELAY_MAX_SECONDS of play_time."""
QUARTILES_MIN = 0.90
"""Share of played ad requests with all five video events (start, firstQuartile, midpoint, thirdQuartile,
complete): below it the player does not fire its tracking events, or cuts ads short."""
VOLUME_MIN = 0.5
VOLUME_MAX = 2.0
"""The last complete hour's requests, against the integration's own mean hourly requests over the window:
below half, screens went dark or stopped asking; above double, the player asks more than it plays (retry
storms, one request per screen and loop)."""
MIN_SAMPLE = 100
"""Fewest ad requests a share is judged on: fewer leave its criterion unjudged (met is None), since 3 of 3
played says nothing about a network."""
VOLUME_MIN_HOURS = 24
"""Fewest complete hours of traffic the volume criterion's mean is judged on: a day at least, so one
unusual hour is not the whole baseline."""

FILL = "fill"
PLAYED = "played"
POP_ON_TIME = "pop_on_time"
QUARTILES = "quartiles"
VOLUME = "volume"


@dataclass(frozen=True, slots=True)
class Counts:
    """What the criteria are computed from, for one key over the window."""

    requests: int = 0
    """Ad requests, filled or not (key_stats)."""
    fills: int = 0
    """Of them, answered with a VAST (key_stats)."""
    played: int = 0
    """Filled ad requests with an impression counted."""
    released: int = 0
    """Filled ad requests the player gave back unplayed."""
    expired: int = 0
    """Filled ad requests neither played nor released whose expiry (plus the settle grace, while a fire
    received in time may still be committing) has passed."""
    on_time: int = 0
    """Played ad requests whose impression was counted within POP_DELAY_MAX_SECONDS of play_time."""
    all_quartiles: int = 0
    """Played ad requests with all five video events counted."""
    last_hour_requests: int = 0
    """Requests in the last complete UTC hour."""
    baseline_requests: int = 0
    """Requests in the complete hours of the window from the key's first one with traffic."""
    baseline_hours: int = 0
    """How many complete hours those are (hours without traffic after the first count, as zeros)."""

    @property
    def decided(self) -> int:
        """Filled ad requests whose outcome is final: played, released or expired. The rest may still be
        played, so counting them as unplayed would fail every integration that has just sent traffic."""
        return self.played + self.released + self.expired


@dataclass(frozen=True, slots=True)
class Criterion:
    """One criterion of one key: `value` = numerator / denominator, met when low <= value <= high."""

    name: str
    value: float | None
    """None when the denominator is 0."""
    numerator: int
    denominator: float
    """An ad request count, or for volume the mean hourly requests."""
    low: float | None
    high: float | None
    met: bool | None
    """None when not judged: informational (no threshold), or too little data (MIN_SAMPLE,
    VOLUME_MIN_HOURS)."""


@dataclass(frozen=True, slots=True)
class Criteria:
    fill: Criterion
    """Informational: the share answered with a VAST depends on the campaigns booked, not on the player."""
    played: Criterion
    pop_on_time: Criterion
    quartiles: Criterion
    volume: Criterion

    def __iter__(self) -> Iterator[Criterion]:
        """In page order: fill, played, pop_on_time, quartiles, volume."""
        return iter((self.fill, self.played, self.pop_on_time, self.quartiles, self.volume))

    @property
    def met(self) -> bool | None:
        """False when a judged criterion is not met, else None while one with a threshold is not judged yet,
        else True: the integration meets every go-live criterion."""
        judged = [c.met for c in self if c.low is not None or c.high is not None]
        if False in judged:
            return False
        return None if None in judged else True


def _share(name: str, numerator: int, denominator: int, low: float | None) -> Criterion:
    value = numerator / denominator if denominator else None
    met = None if low is None or value is None or denominator < MIN_SAMPLE else value >= low
    return Criterion(name, value, numerator, denominator, low, None, met)


def _volume(counts: Counts) -> Criterion:
    hours, total, last = counts.baseline_hours, counts.baseline_requests, counts.last_hour_requests
    mean = total / hours if hours else 0.0
    # last / (total / hours), as one division of integers: a ratio exactly at a threshold compares equal.
    value = last * hours / total if total else None
    met = None
    if value is not None and hours >= VOLUME_MIN_HOURS:
        met = VOLUME_MIN <= value <= VOLUME_MAX
    return Criterion(VOLUME, value, last, mean, VOLUME_MIN, VOLUME_MAX, met)


def assess(counts: Counts) -> Criteria:
    """The go-live criteria these counts meet: pure, the whole of the page's judgement."""
    return Criteria(
        fill=_share(FILL, counts.fills, counts.requests, None),
        played=_share(PLAYED, counts.played, counts.decided, PLAYED_MIN),
        pop_on_time=_share(POP_ON_TIME, counts.on_time, counts.played, POP_ON_TIME_MIN),
        quartiles=_share(QUARTILES, counts.all_quartiles, counts.played, QUARTILES_MIN),
        volume=_volume(counts),
    )


@dataclass(frozen=True, slots=True)
class HealthWindow:
    start: int
    """First UTC hour counted (epoch seconds); play_times from it on count, ahead of now included."""
    current_hour: int
    """The UTC hour `now` is in, incomplete: left out of the volume criterion."""
    now: int

    @property
    def last_hour(self) -> int:
        """The last complete UTC hour: the volume criterion's hour."""
        return self.current_hour - HOUR


def health_window(now: int, days: int = DEFAULT_DAYS) -> HealthWindow:
    if days < 1:
        raise ValueError(f"the health window is at least a day, not {days}")
    current = now - now % HOUR
    return HealthWindow(current - days * DAY, current, now)


@dataclass(frozen=True, slots=True)
class IntegrationHealth:
    key_id: int
    prefix: str
    """The key's visible prefix (ssp_live_…), as `adslot keys list` shows it."""
    label: str | None
    account_id: int
    account: str
    revoked_at: int | None
    counts: Counts
    criteria: Criteria
    flagged: dict[str, int]
    """Fires the invalid-traffic rules flagged (ledger/ivt.py), per rule that flagged some: never counted, so
    a rule that catches a player's quartiles lowers its quartiles criterion."""


def _traffic(conn: sa.Connection, window: HealthWindow) -> dict[int, dict[str, int]]:
    """Per key: requests and fills over the window, and the volume criterion's hours, from key_stats."""
    t = key_stats.c
    complete = t.hour < window.current_hour
    statement = (
        sa.select(
            t.key_id,
            sa.func.sum(t.requests).label("requests"),
            sa.func.sum(t.fills).label("fills"),
            sa.func.sum(sa.case((t.hour == window.last_hour, t.requests), else_=0)).label("last_hour"),
            sa.func.sum(sa.case((complete, t.requests), else_=0)).label("baseline"),
            sa.func.min(sa.case((sa.and_(complete, t.requests > 0), t.hour))).label("first_hour"),
        )
        .where(t.hour >= window.start)
        .group_by(t.key_id)
    )
    found = {}
    for row in conn.execute(statement):
        first = row.first_hour
        found[int(row.key_id)] = {
            "requests": int(row.requests),
            "fills": int(row.fills),
            "last_hour_requests": int(row.last_hour),
            "baseline_requests": int(row.baseline),
            "baseline_hours": 0 if first is None else (window.current_hour - int(first)) // HOUR,
        }
    return found


def _outcomes(conn: sa.Connection, window: HealthWindow) -> dict[int, dict[str, int]]:
    """Per key: what became of its filled ad requests over the window, from ad_requests."""
    t = ad_requests.c
    played = t.impression_at.is_not(None)
    unplayed = t.impression_at.is_(None)
    expired = sa.and_(
        unplayed,
        sa.or_(
            t.settle_reason == "expired",
            sa.and_(t.settle_reason.is_(None), t.expires_at < window.now - SETTLE_GRACE_SECONDS),
        ),
    )
    quartiles = (t.start_at, t.first_quartile_at, t.midpoint_at, t.third_quartile_at, t.complete_at)
    statement = (
        sa.select(
            t.key_id,
            sa.func.count(t.impression_at).label("played"),
            sa.func.count(sa.case((sa.and_(unplayed, t.settle_reason == "released"), 1))).label("released"),
            sa.func.count(sa.case((expired, 1))).label("expired"),
            sa.func.count(
                sa.case((sa.and_(played, t.impression_at - t.play_time <= POP_DELAY_MAX_SECONDS), 1))
            ).label("on_time"),
            sa.func.count(
                sa.case((sa.and_(played, *(column.is_not(None) for column in quartiles)), 1))
            ).label("all_quartiles"),
        )
        .where(t.play_time >= window.start, t.key_id.is_not(None))
        .group_by(t.key_id)
    )
    found = {}
    for row in conn.execute(statement).mappings():
        found[int(row["key_id"])] = {str(name): int(value) for name, value in row.items() if name != "key_id"}
    return found


def _flagged(conn: sa.Connection, window: HealthWindow) -> dict[int, dict[str, int]]:
    """Per key: the fires of its ad requests over the window that each invalid-traffic rule flagged."""
    t = ad_requests.c
    reason = invalid_fires.c.reason
    statement = (
        sa.select(t.key_id, reason, sa.func.count().label("fires"))
        .select_from(invalid_fires.join(ad_requests, invalid_fires.c.ad_request_id == t.id))
        .where(t.play_time >= window.start, t.key_id.is_not(None))
        .group_by(t.key_id, reason)
        .order_by(t.key_id, reason)
    )
    found: dict[int, dict[str, int]] = {}
    for row in conn.execute(statement):
        found.setdefault(int(row.key_id), {})[str(row.reason)] = int(row.fires)
    return found


def integration_health(conn: sa.Connection, now: int, days: int = DEFAULT_DAYS) -> list[IntegrationHealth]:
    """Each key's health over the window, by key id: every key that may ask for ads (not revoked, with the
    ad_request scope), and every other key that had traffic in the window (revoked since, say)."""
    window = health_window(now, days)
    traffic = _traffic(conn, window)
    outcomes = _outcomes(conn, window)
    flagged = _flagged(conn, window)
    keys = conn.execute(
        sa.select(
            api_keys.c.id,
            api_keys.c.prefix,
            api_keys.c.label,
            api_keys.c.account_id,
            api_keys.c.scopes,
            api_keys.c.revoked_at,
            accounts.c.name.label("account"),
        )
        .join(accounts, accounts.c.id == api_keys.c.account_id)
        .order_by(api_keys.c.id)
    )
    found = []
    for key in keys:
        key_id = int(key.id)
        asks = key.revoked_at is None and SCOPE_AD_REQUEST in key.scopes.split(",")
        if asks or key_id in traffic or key_id in outcomes:
            counts = Counts(**traffic.get(key_id, {}), **outcomes.get(key_id, {}))
            found.append(
                IntegrationHealth(
                    key_id=key_id,
                    prefix=key.prefix,
                    label=key.label,
                    account_id=key.account_id,
                    account=key.account,
                    revoked_at=key.revoked_at,
                    counts=counts,
                    criteria=assess(counts),
                    flagged=flagged.get(key_id, {}),
                )
            )
    return found
