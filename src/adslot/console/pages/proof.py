"""Each campaign's proof-of-play report: a page made to be printed (and saved as PDF), and its CSV, for the
signed-in user whose scope holds the campaign, or for anyone with a live share link (share.py)."""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from litestar import Request, Response, get
from litestar.response import Stream

from adslot.api.reports import CSV, attachment
from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import Campaign
from adslot.console import proof
from adslot.console.figures import DAY
from adslot.console.scope import OPEN_TO_ADVERTISERS
from adslot.console.web import ROOT, EnvName, RowId, console_of, read_scope, render
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.reporting.formats import delivery_csv, playlog_csv_header, playlog_csv_rows
from adslot.reporting.query import Cursor, parse_delivery
from adslot.reporting.repository import PLAYLOG_BATCH, cursor_after, delivery_report
from adslot.reporting.schemas import PLAY_COLUMNS, DeliveryReport, PlayRow
from adslot.storage.tables import ad_requests, advertisers, screens, venues

BASE = ROOT + "/{env_name:str}/campaigns/{campaign_id:int}"
CSV_GROUPS = "day,venue,screen"


@dataclass(frozen=True, slots=True)
class Proof:
    campaign: Campaign
    advertiser: str
    start: int
    end: int
    days: DeliveryReport
    hours: DeliveryReport
    places: DeliveryReport
    venues: dict[str, dict[str, Any]]
    screens: dict[tuple[str, str], str | None]
    sample: list[PlayRow]


def report(conn: sa.Connection, campaign: Campaign, start: int, end: int, now: int, **params: str) -> Any:
    """The API's delivery report of the campaign over [start, end): the same query the API parses."""
    query = parse_delivery(
        start=str(start), end=str(end), campaign_id=str(campaign.id), max_days=None, **params
    )
    return delivery_report(conn, query, now)


def _plays(campaign_id: int, start: int, end: int) -> sa.Select[Any]:
    """The campaign's played ad requests over [start, end), as the API's play log rows."""
    t = ad_requests.c
    return sa.select(*(t.id.label(n) if n == "ad_request_uuid" else t[n] for n in PLAY_COLUMNS)).where(
        t.play_time >= start,
        t.play_time < end,
        t.campaign_id == campaign_id,
        t.impression_at.is_not(None),
    )


def _rows(conn: sa.Connection, statement: sa.Select[Any]) -> list[PlayRow]:
    out = []
    for row in conn.execute(statement).mappings():
        values = dict(row) | {"ad_request_uuid": str(row["ad_request_uuid"])}
        out.append(PlayRow(**values | {"impressions": float(values["impressions"])}))
    return out


def sample_plays(conn: sa.Connection, campaign_id: int, start: int, end: int) -> list[PlayRow]:
    """The period's most recent plays of the campaign."""
    t = ad_requests.c
    statement = _plays(campaign_id, start, end).order_by(t.play_time.desc(), t.id.desc())
    return _rows(conn, statement.limit(proof.SAMPLE_PLAYS))


def campaign_plays(
    conn: sa.Connection, campaign_id: int, start: int, end: int, after: Cursor | None, limit: int
) -> list[PlayRow]:
    """Up to `limit` plays of the campaign by (play_time, id), after the cursor: the play log's order."""
    t = ad_requests.c
    statement = _plays(campaign_id, start, end).order_by(t.play_time, t.id).limit(limit)
    if after is not None:
        statement = statement.where(
            sa.or_(t.play_time > after.play_time, sa.and_(t.play_time == after.play_time, t.id > after.id))
        )
    return _rows(conn, statement)


async def stream_plays(env: Environment, campaign_id: int, start: int, end: int) -> AsyncIterator[bytes]:
    """Every play of the campaign in the API's play log CSV, PLAYLOG_BATCH rows per short read."""
    yield playlog_csv_header()
    after = None
    while True:
        rows = await env.run_sync(
            functools.partial(
                campaign_plays,
                campaign_id=campaign_id,
                start=start,
                end=end,
                after=after,
                limit=PLAYLOG_BATCH,
            )
        )
        if rows:
            yield playlog_csv_rows(rows)
        if len(rows) < PLAYLOG_BATCH:
            return
        after = cursor_after(rows[-1])


def plays_csv(env: Environment, campaign: Campaign, start: int, end: int) -> Stream:
    name = f"play-log-campaign-{campaign.id}-{start}-{end}.csv"
    return Stream(stream_plays(env, campaign.id, start, end), media_type=CSV, headers=attachment(name))


def read_proof(conn: sa.Connection, campaign: Campaign, start: int, end: int, now: int) -> Proof:
    zone = campaign.timezone
    places = report(conn, campaign, start, end, now, group_by="venue,screen")
    played = sample_plays(conn, campaign.id, start, end)
    venue_ids = {str(r.venue_id) for r in places.rows} | {p.venue_id for p in played}
    found_venues = {
        r["venue_id"]: dict(r)
        for r in conn.execute(sa.select(venues).where(venues.c.venue_id.in_(venue_ids))).mappings()
    }
    found_screens = {
        (r["venue_id"], r["screen_id"]): r["name"]
        for r in conn.execute(sa.select(screens).where(screens.c.venue_id.in_(venue_ids))).mappings()
    }
    name = conn.execute(
        sa.select(advertisers.c.name).where(advertisers.c.id == campaign.advertiser_id)
    ).scalar_one()
    return Proof(
        campaign=campaign,
        advertiser=str(name),
        start=start,
        end=end,
        days=report(conn, campaign, start, end, now, group_by="day", timezone=zone),
        hours=report(conn, campaign, start, end, now, group_by="hour", timezone=zone),
        places=places,
        venues=found_venues,
        screens=found_screens,
        sample=played,
    )


def utc_day(value: str, name: str) -> int:
    try:
        return int(dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC).timestamp())
    except ValueError:
        raise ApiError(400, "invalid_field", "a date such as 2026-12-04", name) from None


def period(params: Any, campaign: Campaign) -> tuple[int, int]:
    """[from, to) of the report: the UTC dates asked (`to` included), else the campaign's flight."""
    start = utc_day(params["from"], "from") if params.get("from") else None
    end = utc_day(params["to"], "to") + DAY if params.get("to") else None
    return proof.report_period((campaign.start_at, campaign.end_at), start, end, int(time.time()))


async def campaign_in_scope(request: Request[Any, Any, Any], env: Environment, campaign_id: int) -> Campaign:
    campaign = await env.run_sync(lambda c: campaigns_repo.get_campaign(c, campaign_id))
    read_scope(request).check_campaign(campaign.id, campaign.advertiser_id)
    return campaign


def proof_page(
    request: Request[Any, Any, Any],
    env: Environment | None,
    found: Proof,
    *,
    csv_link: str,
    plays_link: str,
    shared: Any = None,
    error: ApiError | None = None,
    asked: dict[str, str] | None = None,
) -> Response[str]:
    """The report; `env` None for a shared link's page (no console around it)."""
    venues_shown = proof.places(found.places.rows, found.venues, found.screens, by_screen=False)
    screens_shown = proof.places(found.places.rows, found.venues, found.screens, by_screen=True)
    creatives = {c.id: c.name for c in found.campaign.creatives}
    return render(
        request,
        "proof.html",
        env=env,
        title=f"Proof of play: {found.campaign.name}",
        proof=found,
        totals=found.days.totals,
        invalid=proof.invalid_of(found.days.totals),
        days_chart=proof.days_chart(found.days),
        hours_chart=proof.hours_chart(found.hours),
        venues=venues_shown,
        screens=screens_shown,
        sample=proof.sample(found.sample, found.venues, found.screens, creatives),
        sample_size=proof.SAMPLE_PLAYS,
        methodology=proof.METHODOLOGY,
        generated_at=int(time.time()),
        csv_link=csv_link,
        plays_link=plays_link,
        shared=shared,
        error=error,
        form=asked
        or {
            "from": time.strftime("%Y-%m-%d", time.gmtime(found.start)),
            "to": time.strftime("%Y-%m-%d", time.gmtime(found.end - 1)),
        },
    )


def proof_csv(
    found_campaign: Campaign, places_by_day: DeliveryReport, start: int, end: int
) -> Response[bytes]:
    name = f"proof-of-play-campaign-{found_campaign.id}-{start}-{end}.csv"
    return Response(delivery_csv(places_by_day), media_type=CSV, headers=attachment(name))


def csv_report(conn: sa.Connection, campaign: Campaign, start: int, end: int, now: int) -> DeliveryReport:
    """The CSV's figures: by day (in the campaign's time zone), venue and screen, as the API groups them."""
    result: DeliveryReport = report(
        conn, campaign, start, end, now, group_by=CSV_GROUPS, timezone=campaign.timezone
    )
    return result


@get(BASE + "/proof", include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def campaign_proof(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[str]:
    env = console_of(request).env(env_name)
    campaign = await campaign_in_scope(request, env, campaign_id)
    query = f"?{request.url.query}" if request.url.query else ""
    error = None
    try:
        start, end = period(request.query_params, campaign)
    except ApiError as exc:  # the dates are shown again with the error by them, over the flight
        error, query = exc, ""
        start, end = period({}, campaign)
    now = int(time.time())
    found = await env.run_sync(lambda c: read_proof(c, campaign, start, end, now))
    base = f"{ROOT}/{env.name}/campaigns/{campaign.id}"
    return proof_page(
        request,
        env,
        found,
        csv_link=f"{base}/proof.csv{query}",
        plays_link=f"{base}/play-log.csv{query}",
        error=error,
        asked=dict(request.query_params) if error else None,
    )


@get(BASE + "/proof.csv", include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def campaign_proof_csv(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[bytes]:
    env = console_of(request).env(env_name)
    campaign = await campaign_in_scope(request, env, campaign_id)
    start, end = period(request.query_params, campaign)
    now = int(time.time())
    figures = await env.run_sync(lambda c: csv_report(c, campaign, start, end, now))
    return proof_csv(campaign, figures, start, end)


@get(BASE + "/play-log.csv", include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def campaign_play_log_csv(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Stream:
    env = console_of(request).env(env_name)
    campaign = await campaign_in_scope(request, env, campaign_id)
    start, end = period(request.query_params, campaign)
    return plays_csv(env, campaign, start, end)


ROUTES = [campaign_proof, campaign_proof_csv, campaign_play_log_csv]
