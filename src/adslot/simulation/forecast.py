"""Forecast: what a proposed campaign would deliver on an environment's real inventory, and what it would cost
the campaigns already live there, before it is sold.

The environment's venues, screens, advertisers, active campaigns with their creatives, and those campaigns'
open delivery counters (what they have already spent of their caps) are copied from its database, which is
only read, into a scratch SQLite database. Stored rows are copied as they are (they were checked when written,
and keep their ids); the proposal goes through the management API's decoding and repository, so it is refused
exactly as the API would refuse it. The simulator's loop (run.drive) then runs twice on one schedule, with and
without the proposal, each decision drawing from its own seeded stream: the two runs differ only where the
proposal takes part, so a live campaign's difference is what the proposal costs it, not noise.

Only the screens the proposal can play on are driven, with every screen of each capped campaign that plays on
one of them (and so on): a cap or pacing goal spans all its campaign's screens, so a campaign that loses slots
here can make them up there. Screens outside that set would run the same with and without the proposal.

Assumed: every screen asks for a slot every `slot_seconds`, a minute ahead; every filled slot plays and is
proven (no lost PoP); delivery between now and the window's start is not simulated.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import shutil
import tempfile
import time
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import msgspec
import sqlalchemy as sa

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.live import all_creatives, live_campaigns
from adslot.campaigns.rules import MICROS, MILLI
from adslot.campaigns.schemas import CampaignIn, CreativeIn
from adslot.catalog import Catalog, load_catalog
from adslot.decision.model import TIERS, CapMetric, CapPeriod, LiveCampaign, Tier
from adslot.decision.targeting import screen_allowed, venue_excluded, venue_matches
from adslot.errors import ApiError, invalid_value
from adslot.ledger.budget import Snapshot
from adslot.serving.fill import SlotRequest, slot_for
from adslot.simulation.memory_ledger import MemoryLedger, Play
from adslot.simulation.run import Drive, Place, drive, drive_in_memory
from adslot.storage.migrate import upgrade
from adslot.storage.tables import (
    ad_requests,
    advertisers,
    campaign_venues,
    campaigns,
    creatives,
    delivery_counters,
    screens,
    venues,
)

MAX_HOURS = 7 * 24
"""The longest window forecast: a longer flight is forecast over its first 7 days, its lifetime caps
projected from them."""
MAX_SLOTS = 200_000
"""Slot decisions per run (screens driven x slots per screen), which bound the time a forecast takes: 200,000
is 99 screens for 7 days at one slot per 5 minutes (2,016 each). A larger ask is refused (400
forecast_too_large)."""
MIN_SLOT_SECONDS = 60
MAX_SLOT_SECONDS = 3600
LOSS_WORTH_A_WARNING = 0.01
"""A live campaign losing at least this share of its plays is named in the warnings."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NewCampaign:
    """A campaign as the management API creates it, with the creatives it would be given."""

    campaign: CampaignIn
    creatives: Sequence[CreativeIn] = ()


@dataclass(frozen=True, slots=True)
class ExistingCampaign:
    """A stored campaign, whatever its status, forecast as if it were active."""

    campaign_id: int


Proposal = NewCampaign | ExistingCampaign


class CapForecast(msgspec.Struct, frozen=True):
    """Expected progress against one cap, in its metric (plays, impressions, or spend in the currency)."""

    period: CapPeriod
    metric: CapMetric
    limit: int | float
    """Per flight (lifetime) or per day of the campaign's time zone (daily)."""
    delivered: int | float
    """By the window's end; a lifetime cap counts what the campaign delivered before the window too, a daily
    cap the sum over the days below."""
    projected: int | float | None
    """Lifetime caps: by the flight's end, `delivered` when the window reaches it, else the window's rate
    carried on to the flight's end (never above the limit). None for daily caps."""
    reached: bool
    """Lifetime: projected reaches the limit. Daily: reached on every day."""
    days: int = 0
    """Daily caps: the flight's days in the window (a partly covered day counts)."""
    days_reached: int = 0


class DayForecast(msgspec.Struct, frozen=True):
    date: str
    """A day of the campaign's time zone, YYYY-MM-DD."""
    slots: int
    """Slots the proposal could have played (its targeting, creatives, flight and dayparts allow it)."""
    plays: int
    impressions: float


class Rival(msgspec.Struct, frozen=True):
    """A campaign that played slots the proposal could have played."""

    campaign_id: int
    name: str
    tier: Tier
    plays: int


class LiveImpact(msgspec.Struct, frozen=True):
    """A live campaign whose delivery the proposal changes, over the screens driven."""

    campaign_id: int
    name: str
    tier: Tier
    plays_without: int
    plays_with: int
    delta: int
    """plays_with - plays_without: negative when the proposal takes plays from it."""
    impressions_without: float
    impressions_with: float


class ForecastReport(msgspec.Struct, frozen=True):
    campaign_id: int | None
    """The forecast campaign's id; None for a new one."""
    name: str
    start: int
    hours: int
    slot_seconds: int
    seed: int
    screens: int
    """Screens driven: those the proposal can play on, and those of the capped campaigns that share them."""
    screens_targeted: int
    """Screens its targeting allows and one of its creatives fits."""
    slots_targeted: int
    """Slots it could have played in the window (targeting, creatives, flight and dayparts)."""
    plays: int
    impressions: float
    spend: float | None
    """impressions x cpm / 1000, in the account currency; None without a cpm."""
    fill_share: float
    """plays / slots_targeted: the share of the slots it targets that it wins."""
    caps: list[CapForecast]
    days: list[DayForecast]
    """By day of the campaign's time zone over the window, for a chart."""
    lost_to: list[Rival]
    """Who played the targeted slots it did not play, most plays first."""
    slots_unfilled: int
    """Targeted slots nobody played: its own limits kept it out, and no other campaign could fill them."""
    frequency_hours_at_limit: int
    """Screen-hours in which it reached its per-hour frequency limit."""
    frequency_days_at_limit: int
    """Screen-days in which it reached its per-day frequency limit."""
    slots_within_separation: int
    """Targeted slots it did not play that fall within its separation of a play of its advertiser's category
    on that screen (its own included); 0 without separation."""
    conflicts: list[LiveImpact]
    """Live campaigns whose plays change, the largest loss first."""
    warnings: list[str]


def forecast(
    source: sa.Connection,
    proposal: Proposal,
    *,
    data_dir: Path,
    start: int | None = None,
    hours: int | None = None,
    slot_seconds: int = 300,
    seed: int = 7,
    now: int | None = None,
    max_slots: int = MAX_SLOTS,
    progress: Callable[[float], None] | None = None,
    on_ledger: bool = False,
) -> ForecastReport:
    """Forecast `proposal` against the environment whose database `source` reads (and never writes).

    The window starts at `start` (default: the flight's start, or `now` if that is later) and lasts `hours`
    (default: to the flight's end, at most MAX_HOURS). The scratch database lives in a directory of its own
    under `data_dir`, removed afterwards. CPU-bound for seconds to minutes and runs its own event loop: call
    it off the serving event loop (a thread or a process).

    Raises the management API's ApiError for an invalid proposal (a creative's field is prefixed with
    `creatives[i].`), 404 campaign_not_found for an unknown campaign id, 400 invalid_field for a window out of
    bounds (`start`, `hours`, `slot_seconds`), and 400 forecast_too_large (field `hours`) beyond `max_slots`.

    `progress(share)` is told the share of the slots decided so far, 0 to 1. Both runs go through the
    ledger's rules in memory (memory_ledger.py); `on_ledger` runs them on the SQLite ledger instead, as the
    simulator does, for tests that hold the two to the same answer.
    """
    if start is not None and start < 0:
        raise ApiError(400, "invalid_field", "start must be an epoch second", "start")
    if hours is not None and not 1 <= hours <= MAX_HOURS:
        raise ApiError(400, "invalid_field", f"hours must be 1 to {MAX_HOURS} (7 days)", "hours")
    if not MIN_SLOT_SECONDS <= slot_seconds <= MAX_SLOT_SECONDS:
        raise ApiError(
            400,
            "invalid_field",
            f"slot_seconds must be {MIN_SLOT_SECONDS} to {MAX_SLOT_SECONDS}",
            "slot_seconds",
        )
    if isinstance(proposal, ExistingCampaign):
        stored = campaigns_repo.get_campaign(source, proposal.campaign_id)
        name, flight = stored.name, (stored.start_at, stored.end_at)
    else:
        proposal = NewCampaign(
            msgspec.structs.replace(_as_the_api_reads(proposal.campaign, CampaignIn, ""), status="active"),
            [_as_the_api_reads(c, CreativeIn, f"creatives[{i}].") for i, c in enumerate(proposal.creatives)],
        )
        name, flight = proposal.campaign.name, (proposal.campaign.start_at, proposal.campaign.end_at)
    window = _window(flight, start, hours, now)
    data_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="forecast-", dir=data_dir))
    try:
        return _forecast(
            source, scratch, proposal, name, window, slot_seconds, seed, max_slots, progress, on_ledger
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class _Window:
    start: int
    hours: int
    clamped_from: int | None
    """The hours the flight asked for, when more than MAX_HOURS."""

    @property
    def end(self) -> int:
        return self.start + self.hours * 3600


def _window(flight: tuple[int, int], start: int | None, hours: int | None, now: int | None) -> _Window:
    first = start if start is not None else max(flight[0], int(time.time()) if now is None else now)
    if hours is not None:
        return _Window(first, hours, None)
    wanted = max(1, math.ceil((flight[1] - first) / 3600))
    return _Window(first, min(wanted, MAX_HOURS), wanted if wanted > MAX_HOURS else None)


def _as_the_api_reads(value: T, kind: type[T], prefix: str) -> T:
    """Decode `value` as the API decodes a request body: a struct built in Python skips msgspec's
    constraints, and a field out of range must be the same 400 invalid_field here."""
    try:
        return msgspec.json.decode(msgspec.json.encode(value), type=kind)
    except msgspec.ValidationError as exc:
        error = invalid_value(exc)
        if error.field is not None:
            error.field = prefix + error.field
        raise error from None


def _forecast(
    source: sa.Connection,
    scratch: Path,
    proposal: Proposal,
    name: str,
    window: _Window,
    slot_seconds: int,
    seed: int,
    max_slots: int,
    progress: Callable[[float], None] | None,
    on_ledger: bool,
) -> ForecastReport:
    with_path, without_path = scratch / "with.sqlite3", scratch / "without.sqlite3"
    picked = proposal.campaign_id if isinstance(proposal, ExistingCampaign) else None
    with _engine(with_path) as engine:
        upgrade(engine, None)
        with engine.begin() as conn:
            _copy_environment(source, conn, picked, window.start)
            if isinstance(proposal, NewCampaign):
                pid = campaigns_repo.create_campaign(conn, proposal.campaign).id
                for item in proposal.creatives:
                    campaigns_repo.add_creative(conn, pid, item)
            else:
                pid = proposal.campaign_id
                conn.execute(sa.update(campaigns).where(campaigns.c.id == pid).values(status="active"))
        with engine.connect() as conn:
            catalog = load_catalog(conn)
            proposed = _compiled(conn, pid)
            counters = _counters(conn)
    spent_before = _spent(counters, f"c{pid}:")
    shutil.copyfile(with_path, without_path)
    with _engine(without_path) as engine:
        with engine.begin() as conn:
            conn.execute(sa.update(campaigns).where(campaigns.c.id == pid).values(status="paused"))
        with engine.connect() as conn:
            catalog_without = load_catalog(conn)

    places = _places(catalog)
    reach = _reach(catalog, places)
    driven = _driven(catalog, reach, pid, window)
    per_place = math.ceil(window.hours * 3600 / slot_seconds)
    if len(driven) * per_place > max_slots:
        raise ApiError(
            400,
            "forecast_too_large",
            f"the forecast would decide {len(driven) * per_place:,} slots ({len(driven):,} screens x "
            f"{per_place:,} slots each), more than {max_slots:,}: shorten hours, lengthen slot_seconds or "
            "narrow the targeting",
            "hours",
        )
    targeted = _Targeted(catalog, proposed, reach.get(pid, set()))
    outcome = outcome_without = _Outcome([], counters)
    if driven:
        # No PoP is lost, so nothing is ever released: counters only grow, a cached one can only understate
        # its use, and trusting the cache for the whole run never turns away a campaign the ledger would
        # take. It keeps the cache as fresh as a busy worker's is, instead of stale at every virtual minute;
        # and the expiry sweep would only move reserved units to delivered.
        config = Drive(
            window.start,
            window.hours,
            slot_seconds,
            seed=seed,
            cache_seconds=math.inf,
            sweep=False,
            draw_per_slot=True,
        )
        if on_ledger:
            asyncio.run(_both(with_path, catalog, without_path, catalog_without, driven, config, targeted))
            outcome, outcome_without = _outcome_of(with_path), _outcome_of(without_path)
        else:
            outcome, outcome_without = _both_in_memory(
                counters, catalog, catalog_without, driven, config, targeted, progress
            )
    report = _Measured(outcome, catalog, pid, proposed, targeted, window).report(
        picked=picked,
        name=name,
        slot_seconds=slot_seconds,
        seed=seed,
        driven=len(driven),
        spent_before=spent_before,
        conflicts=_conflicts(outcome, outcome_without, catalog_without, pid),
    )
    if progress is not None:
        progress(1.0)
    return msgspec.structs.replace(
        report, warnings=_warnings(report, proposed, _matching(catalog, places, proposed), window)
    )


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What a run leaves: the plays, and the delivery counters."""

    plays: list[Play]
    counters: dict[str, Snapshot]


def _both_in_memory(
    counters: dict[str, Snapshot],
    catalog: Catalog,
    catalog_without: Catalog,
    driven: list[Place],
    config: Drive,
    targeted: _Targeted,
    progress: Callable[[float], None] | None,
) -> tuple[_Outcome, _Outcome]:
    """Both runs on the ledger's rules in memory, from the same counters: the with-run is the first half of
    the progress, the without-run the second."""
    outcomes = []
    runs = ((catalog, targeted.observe), (catalog_without, None))
    for half, (run_catalog, observe) in enumerate(runs):
        ledger = MemoryLedger(counters.items(), fires=False)
        told = None if progress is None else _halves(progress, half)
        drive_in_memory(ledger, run_catalog, driven, config, observe, told)
        outcomes.append(_Outcome(ledger.plays(), ledger.counters))
    return outcomes[0], outcomes[1]


def _halves(progress: Callable[[float], None], half: int) -> Callable[[int, int], None]:
    """A run's progress (minutes done of total) as its half of the forecast's."""
    return lambda done, total: progress((half + done / total) / 2)


def _outcome_of(path: Path) -> _Outcome:
    """A run's outcome as the SQLite ledger stored it."""
    a = ad_requests.c
    with _engine(path) as engine, engine.connect() as conn:
        rows = conn.execute(
            sa.select(a.venue_id, a.screen_id, a.play_time, a.campaign_id, a.impressions)
            .where(_PLAYED)
            .order_by(a.play_time, a.venue_id, a.screen_id)
        )
        plays = [Play(str(v), s, int(t), None if c is None else int(c), float(i)) for v, s, t, c, i in rows]
        return _Outcome(plays, _counters(conn))


def _unsynced(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA synchronous=OFF")


@contextmanager
def _engine(path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{path}")
    # A scratch database, removed afterwards: nothing in it has to survive a crash, so no write waits for
    # the disk (its migrations alone took over a second of fsyncs).
    sa.event.listen(engine, "connect", _unsynced)
    try:
        yield engine
    finally:
        engine.dispose()


async def _both(
    with_path: Path,
    catalog: Catalog,
    without_path: Path,
    catalog_without: Catalog,
    driven: list[Place],
    config: Drive,
    targeted: _Targeted,
) -> None:
    """Both runs on one event loop: each decides while the other waits on its ledger."""
    await asyncio.gather(
        drive(with_path, catalog, driven, config, targeted.observe),
        drive(without_path, catalog_without, driven, config),
    )


def _copy_environment(source: sa.Connection, scratch: sa.Connection, picked: int | None, start: int) -> None:
    """Copy the inventory, advertisers, active campaigns (and `picked`) with their creatives, and the delivery
    counters still open at `start`, reserved units counted as delivered (most will be)."""
    for table in (advertisers, venues, screens):
        _insert(scratch, table, source.execute(sa.select(table)).mappings())
    chosen = campaigns.c.status == "active"
    if picked is not None:
        chosen = sa.or_(chosen, campaigns.c.id == picked)
    rows = list(source.execute(sa.select(campaigns).where(chosen)).mappings())
    _insert(scratch, campaigns, rows)
    ids = {int(r["id"]) for r in rows}
    for table in (campaign_venues, creatives):
        owned = sa.select(table).join(campaigns, campaigns.c.id == table.c.campaign_id).where(chosen)
        _insert(scratch, table, source.execute(owned).mappings())
    c = delivery_counters.c
    open_at_start = sa.or_(c.closes_at.is_(None), c.closes_at > start)
    counters = [
        {**r, "reserved": 0, "delivered": int(r["delivered"]) + int(r["reserved"])}
        for r in source.execute(sa.select(delivery_counters).where(open_at_start)).mappings()
        if _counter_kept(str(r["key"]), ids)
    ]
    _insert(scratch, delivery_counters, counters)


def _insert(scratch: sa.Connection, table: sa.Table, rows: Iterable[Mapping[Any, Any]]) -> None:
    batch = [{str(k): v for k, v in row.items()} for row in rows]
    if batch:
        scratch.execute(sa.insert(table), batch)


def _counter_kept(key: str, campaign_ids: set[int]) -> bool:
    """A copied campaign's counter (c{id}:..., f{id}:...) or a screen's separation mark (s:...)."""
    if key.startswith("s:"):
        return True
    owner = key[1:].partition(":")[0]
    return key[:1] in ("c", "f") and owner.isdigit() and int(owner) in campaign_ids


def _compiled(conn: sa.Connection, pid: int) -> LiveCampaign | None:
    """The proposal as the decision reads it, even without creatives (the index leaves those out); None when
    it lists no venue at all."""
    _, active = all_creatives(conn)
    return next((c for c in live_campaigns(conn, active) if c.id == pid), None)


def _counters(conn: sa.Connection) -> dict[str, Snapshot]:
    """Every delivery counter: (cap, reserved, delivered, last_at) by key."""
    c = delivery_counters.c
    rows = conn.execute(sa.select(c.key, c.cap, c.reserved, c.delivered, c.last_at))
    return {
        str(key): (
            None if cap is None else int(cap),
            int(reserved),
            int(delivered),
            None if last_at is None else int(last_at),
        )
        for key, cap, reserved, delivered, last_at in rows
    }


def _spent(counters: Mapping[str, Snapshot], prefix: str) -> dict[str, tuple[int | None, int]]:
    """Counters whose key starts with `prefix`: (cap, delivered + reserved) by key."""
    return {
        key: (cap, delivered + reserved)
        for key, (cap, reserved, delivered, _) in counters.items()
        if key.startswith(prefix)
    }


def _places(catalog: Catalog) -> list[Place]:
    """Every registered screen, and each venue without screens as one place whose requests name none."""
    with_screens = {venue_id for venue_id, _ in catalog.screens}
    places: list[Place] = list(catalog.screens)
    places += [(v, None) for v in catalog.venues if v not in with_screens]
    return sorted(places, key=_order)


def _order(place: Place) -> tuple[str, str]:
    return place[0], place[1] or ""


def _reach(catalog: Catalog, places: list[Place]) -> dict[int, set[Place]]:
    """Where each campaign can play, whatever the time: targeting, exclusions, a creative that fits."""
    reach: dict[int, set[Place]] = defaultdict(set)
    for place in places:
        venue_id, screen_id = place
        screen = catalog.screens.get((venue_id, screen_id)) if screen_id is not None else None
        pools = catalog.index.screen_pools(catalog.venues[venue_id], screen_id, screen)
        for pool in pools.tiers:
            for candidate in pool.all():
                reach[candidate.id].add(place)
    return reach


def _overlaps(campaign: LiveCampaign, window: _Window) -> bool:
    return campaign.start_at < window.end and campaign.end_at > window.start


def _driven(catalog: Catalog, reach: dict[int, set[Place]], pid: int, window: _Window) -> list[Place]:
    """The proposal's places, then every place of a capped campaign found on one of them, until none is
    added: caps and pacing are what tie one screen's delivery to another's. Only campaigns in flight during
    the window count; nothing is driven if the proposal is not."""
    running = {cid for cid, c in catalog.index.campaigns.items() if _overlaps(c, window) and cid in reach}
    if pid not in running:
        return []
    at: dict[Place, set[int]] = defaultdict(set)
    for cid in running:
        if catalog.index.campaigns[cid].caps:
            for place in reach[cid]:
                at[place].add(cid)
    chosen = set(reach[pid])
    frontier = list(chosen)
    seen = {pid}
    while frontier:
        for cid in at.get(frontier.pop(), set()) - seen:
            seen.add(cid)
            added = reach[cid] - chosen
            chosen |= added
            frontier.extend(added)
    return sorted(chosen, key=_order)


@lru_cache(maxsize=4096)
def _local_date(tz_name: str, quarter: int) -> str:
    """The date, in a zone, of a UTC quarter hour (every zone's offset is whole quarter hours)."""
    return dt.datetime.fromtimestamp(quarter * 900, ZoneInfo(tz_name)).date().isoformat()


def _date(tz_name: str, epoch: int) -> str:
    return _local_date(tz_name, epoch // 900)


def _dates(tz_name: str, low: int, high: int) -> list[str]:
    """The days of [low, high) in a zone (a partly covered day counts)."""
    if low >= high:
        return []
    return sorted({_date(tz_name, t) for t in (*range(low, high, 3600), high - 1)})


Slot = tuple[str, str | None, int]
"""(venue id, screen id, play time)"""


class _Targeted:
    """The slots the proposal could have played, seen as the with-run asks for them."""

    def __init__(self, catalog: Catalog, campaign: LiveCampaign | None, places: set[Place]) -> None:
        self._catalog = catalog
        self._campaign = campaign
        self.places = places
        self.slots: set[Slot] = set()
        self.by_day: Counter[str] = Counter()

    def observe(self, request: SlotRequest) -> None:
        campaign = self._campaign
        if campaign is None or (request.venue_id, request.screen_id) not in self.places:
            return
        play_time = request.play_time
        if not campaign.start_at <= play_time < campaign.end_at:
            return
        if not campaign.hours_of_week >> slot_for(self._catalog, request).hour_of_week & 1:
            return
        self.slots.add((request.venue_id, request.screen_id, play_time))
        self.by_day[_date(campaign.timezone, play_time)] += 1


@dataclass(frozen=True, slots=True)
class _Match:
    venues: int
    places: int


def _matching(catalog: Catalog, places: list[Place], campaign: LiveCampaign | None) -> _Match:
    """Venues and places the targeting and exclusions allow, whatever the creatives."""
    if campaign is None:
        return _Match(0, 0)
    allowed = {
        venue_id
        for venue_id, venue in catalog.venues.items()
        if venue_matches(campaign.targeting, venue) and not venue_excluded(campaign.exclusions, venue)
    }
    matched = [p for p in places if p[0] in allowed and screen_allowed(campaign, p[0], p[1])]
    return _Match(len({venue_id for venue_id, _ in matched}), len(matched))


def _wire(metric: CapMetric, units: int) -> int | float:
    """Stored units (plays, milli-impressions, spend micros) in the API's."""
    if metric == "plays":
        return units
    if metric == "impressions":
        return units // MILLI if units % MILLI == 0 else units / MILLI
    return units / MICROS


_PLAYED = ad_requests.c.impression_at.is_not(None)


@dataclass(frozen=True, slots=True)
class _Measured:
    """The with-run's outcome, read for the proposal."""

    outcome: _Outcome
    catalog: Catalog
    pid: int
    campaign: LiveCampaign | None
    targeted: _Targeted
    window: _Window

    def report(
        self,
        *,
        picked: int | None,
        name: str,
        slot_seconds: int,
        seed: int,
        driven: int,
        spent_before: dict[str, tuple[int | None, int]],
        conflicts: list[LiveImpact],
    ) -> ForecastReport:
        own = [
            (p.venue_id, p.screen_id, p.play_time, p.impressions)
            for p in self.outcome.plays
            if p.campaign_id == self.pid
        ]
        played = {(v, s, t) for v, s, t, _ in own}
        impressions = round(math.fsum(i for *_, i in own), 3)
        cpm = self.campaign.cpm_micros if self.campaign else None
        slots_targeted = len(self.targeted.slots)
        rivals = self._rivals()
        frequency = self._frequency_at_limit()
        return ForecastReport(
            campaign_id=picked,
            name=name,
            start=self.window.start,
            hours=self.window.hours,
            slot_seconds=slot_seconds,
            seed=seed,
            screens=driven,
            screens_targeted=len(self.targeted.places),
            slots_targeted=slots_targeted,
            plays=len(own),
            impressions=impressions,
            spend=None if cpm is None else round(impressions * cpm / 1000) / MICROS,
            fill_share=len(own) / slots_targeted if slots_targeted else 0.0,
            caps=self._caps(spent_before),
            days=self._days(own),
            lost_to=[
                Rival(cid, self.catalog.index.campaigns[cid].name, self.catalog.index.campaigns[cid].tier, n)
                for cid, n in sorted(rivals.items(), key=lambda item: (-item[1], item[0]))
            ],
            slots_unfilled=slots_targeted - len(own) - sum(rivals.values()),
            frequency_hours_at_limit=frequency["h"],
            frequency_days_at_limit=frequency["d"],
            slots_within_separation=self._within_separation(self.targeted.slots - played),
            conflicts=conflicts,
            warnings=[],
        )

    def _days(self, own: Sequence[tuple[str, str | None, int, float]]) -> list[DayForecast]:
        tz = self.campaign.timezone if self.campaign else "UTC"
        plays: Counter[str] = Counter()
        impressions: defaultdict[str, list[float]] = defaultdict(list)
        for _, _, play_time, audience in own:
            day = _date(tz, play_time)
            plays[day] += 1
            impressions[day].append(audience)
        return [
            DayForecast(day, self.targeted.by_day[day], plays[day], round(math.fsum(impressions[day]), 3))
            for day in _dates(tz, self.window.start, self.window.end)
        ]

    def _rivals(self) -> Counter[int]:
        """Plays of other campaigns in the slots the proposal could have played."""
        rivals: Counter[int] = Counter()
        slots = self.targeted.slots
        for p in self.outcome.plays:
            cid = p.campaign_id
            if cid is not None and cid != self.pid and (p.venue_id, p.screen_id, p.play_time) in slots:
                rivals[cid] += 1
        return rivals

    def _caps(self, spent_before: dict[str, tuple[int | None, int]]) -> list[CapForecast]:
        campaign, window = self.campaign, self.window
        if campaign is None:
            return []
        spent = _spent(self.outcome.counters, f"c{self.pid}:")
        low, high = max(window.start, campaign.start_at), min(window.end, campaign.end_at)
        out = []
        for cap in campaign.caps:
            if cap.period == "lifetime":
                key = f"c{self.pid}:life:{cap.metric}"
                delivered, before = spent.get(key, (None, 0))[1], spent_before.get(key, (None, 0))[1]
                projected = delivered
                if low < high < campaign.end_at:  # carry the window's rate on to the flight's end
                    rate = (delivered - before) / (high - low)
                    projected = min(cap.limit, before + round(rate * (campaign.end_at - low)))
                limit, so_far = _wire(cap.metric, cap.limit), _wire(cap.metric, delivered)
                out.append(
                    CapForecast(
                        cap.period,
                        cap.metric,
                        limit,
                        so_far,
                        _wire(cap.metric, projected),
                        projected >= cap.limit,
                    )
                )
                continue
            per_day = [
                spent.get(f"c{self.pid}:day:{day}:{cap.metric}", (None, 0))[1]
                for day in _dates(campaign.timezone, low, high)
            ]
            reached = sum(units >= cap.limit for units in per_day)
            out.append(
                CapForecast(
                    cap.period,
                    cap.metric,
                    _wire(cap.metric, cap.limit),
                    _wire(cap.metric, sum(per_day)),
                    None,
                    bool(per_day) and reached == len(per_day),
                    days=len(per_day),
                    days_reached=reached,
                )
            )
        return out

    def _frequency_at_limit(self) -> Counter[str]:
        """Its frequency counters (f{id}:{place}:h:{hour}, f{id}:{place}:d:{date}) that reached their cap, by
        kind ("h", "d")."""
        reached: Counter[str] = Counter()
        for key, (cap, used) in _spent(self.outcome.counters, f"f{self.pid}:").items():
            if cap is not None and used >= cap:
                reached[key.rpartition(":")[0].rpartition(":")[2]] += 1
        return reached

    def _within_separation(self, unplayed: set[Slot]) -> int:
        """Unplayed slots within the separation of a play of the proposal's category on their screen (its own
        plays included): where the ledger's spacing would have refused it."""
        campaign = self.campaign
        if campaign is None or not campaign.separation_minutes or not campaign.category:
            return 0
        gaps = {
            cid: c.separation_minutes * 60
            for cid, c in self.catalog.index.campaigns.items()
            if c.category == campaign.category and c.separation_minutes > 0
        }
        marks: dict[Place, list[tuple[int, int]]] = defaultdict(list)
        for p in self.outcome.plays:
            if p.campaign_id in gaps:
                marks[(p.venue_id, p.screen_id)].append((p.play_time, gaps[p.campaign_id]))
        for found in marks.values():
            found.sort()
        own, widest = campaign.separation_minutes * 60, max(gaps.values())
        count = 0
        for venue_id, screen_id, play_time in unplayed:
            found = marks.get((venue_id, screen_id), [])
            i = bisect_left(found, (play_time - widest + 1, 0))
            while i < len(found) and found[i][0] < play_time + widest:
                if abs(found[i][0] - play_time) < max(own, found[i][1]):
                    count += 1
                    break
                i += 1
        return count


def _totals(outcome: _Outcome) -> dict[int, tuple[int, float]]:
    """Plays and impressions by campaign: summed by UTC hour first, then over the hours (as the simulator's
    report counts them), so the rounded figures do not depend on the order the plays are listed in."""
    by_hour: defaultdict[int, defaultdict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in outcome.plays:
        if p.campaign_id is not None:
            by_hour[p.campaign_id][p.play_time - p.play_time % 3600].append(p.impressions)
    return {
        cid: (sum(len(i) for i in hours.values()), sum(math.fsum(i) for i in hours.values()))
        for cid, hours in by_hour.items()
    }


def _conflicts(
    outcome: _Outcome, outcome_without: _Outcome, catalog_without: Catalog, pid: int
) -> list[LiveImpact]:
    """Live campaigns whose plays differ between the runs, the largest loss first."""
    with_totals, without_totals = _totals(outcome), _totals(outcome_without)
    live = catalog_without.index.campaigns
    out = []
    for cid in (set(with_totals) | set(without_totals)) - {pid}:
        plays_with, impressions_with = with_totals.get(cid, (0, 0.0))
        plays_without, impressions_without = without_totals.get(cid, (0, 0.0))
        if plays_with != plays_without:
            out.append(
                LiveImpact(
                    campaign_id=cid,
                    name=live[cid].name,
                    tier=live[cid].tier,
                    plays_without=plays_without,
                    plays_with=plays_with,
                    delta=plays_with - plays_without,
                    impressions_without=round(impressions_without, 3),
                    impressions_with=round(impressions_with, 3),
                )
            )
    return sorted(out, key=lambda impact: (impact.delta, impact.campaign_id))


def _warnings(
    report: ForecastReport, campaign: LiveCampaign | None, match: _Match, window: _Window
) -> list[str]:
    out = []
    if window.clamped_from is not None:
        out.append(
            f"the flight runs {window.clamped_from} hours: the forecast covers its first {MAX_HOURS} "
            "(7 days) and projects its lifetime caps from them"
        )
    if campaign is None or match.venues == 0:
        out.append("no venue matches the targeting")
        return out
    if match.places == 0:
        out.append("no screen matches the targeting")
    elif not campaign.creatives:
        out.append("it has no active creative, so it cannot play")
    elif report.screens_targeted == 0:
        out.append(f"none of its creatives fits the {match.places} screens its targeting matches")
    elif report.screens_targeted < match.places:
        out.append(
            f"its creatives fit {report.screens_targeted} of the {match.places} screens its targeting matches"
        )
    if not _overlaps(campaign, window):
        out.append("its flight does not overlap the forecast window")
    elif report.screens_targeted and not report.slots_targeted:
        out.append("its dayparts leave no slot in the forecast window")
    for cap in report.caps:
        if cap.period == "lifetime" and not cap.reached and cap.projected is not None:
            out.append(
                f"lifetime {cap.metric} cap not reached: {cap.projected / cap.limit:.0%} expected by the "
                "flight's end"
            )
        elif cap.period == "daily" and cap.days and not cap.reached:
            out.append(
                f"daily {cap.metric} cap not reached on {cap.days - cap.days_reached} of {cap.days} days"
            )
    frequency = campaign.frequency
    if frequency is not None and report.frequency_hours_at_limit:
        out.append(
            f"its frequency limit of {frequency.per_hour} per hour is reached on "
            f"{report.frequency_hours_at_limit:,} screen-hours"
        )
    if frequency is not None and report.frequency_days_at_limit:
        out.append(
            f"its frequency limit of {frequency.per_day} per day is reached on "
            f"{report.frequency_days_at_limit:,} screen-days"
        )
    if report.slots_within_separation:
        out.append(
            f"competitive separation: {report.slots_within_separation:,} of the slots it does not play "
            f"fall within {campaign.separation_minutes} minutes of another {campaign.category} ad on the "
            "same screen"
        )
    if report.slots_targeted:
        rank = TIERS.index(campaign.tier)
        higher = sum(r.plays for r in report.lost_to if TIERS.index(r.tier) < rank)
        if higher:
            out.append(
                f"higher-tier campaigns play {higher:,} of its {report.slots_targeted:,} slots "
                f"({higher / report.slots_targeted:.0%})"
            )
    for impact in report.conflicts:
        if impact.delta < 0 and -impact.delta >= LOSS_WORTH_A_WARNING * impact.plays_without:
            out.append(
                f"{impact.name} (campaign {impact.campaign_id}) loses {-impact.delta:,} plays "
                f"({-impact.delta / impact.plays_without:.1%})"
            )
    return out
