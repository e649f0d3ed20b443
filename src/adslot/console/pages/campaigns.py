"""Campaigns: list with delivery against goal, create and edit with every rule, creatives, pause and
resume, and each campaign's pacing chart."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from litestar import Request, Response, get, post
from litestar.response import Redirect

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import (
    DAYS,
    AdvertiserIn,
    Campaign,
    CampaignIn,
    CampaignPatch,
    CreativeIn,
    CreativePatch,
)
from adslot.console import share_links
from adslot.console.charts import Series, line_chart
from adslot.console.figures import DAY, HOUR, campaign_delivery, delivery, hour_floor
from adslot.console.forms import Form, decode, drop_none, number, text, utc_input, utc_time, words
from adslot.console.pacing import Delivered, cumulative, plan_line
from adslot.console.roles import TRAFFIC
from adslot.console.scope import OPEN_TO_ADVERTISERS
from adslot.console.web import ROOT, EnvName, RowId, change, console_of, form_fields, need, read_scope, render
from adslot.environment import Environment
from adslot.errors import ApiError

BASE = ROOT + "/{env_name:str}/campaigns"
DAYPART_ROWS = 3
CAP_ROWS = 3
RULE_SETS = ("targeting", "exclusions")
CHART_HOURS_MAX = 14 * 24
"""Up to two weeks the pacing chart is hour by hour; a longer flight is shown day by day."""


def _rules(form: Form, prefix: str) -> dict[str, Any] | None:
    radius = []
    for i, line in enumerate(form.get(f"{prefix}.geo.radius", "").splitlines()):
        if line.strip():
            parts = [p.strip() for p in line.split(",")]
            keys = ("latitude", "longitude", "radius_km")
            radius.append(dict(zip(keys, parts, strict=False)) if len(parts) == 3 else {"line": i + 1})
    geo = drop_none(
        {
            "countries": words(form, f"{prefix}.geo.countries"),
            "regions": words(form, f"{prefix}.geo.regions"),
            "cities": words(form, f"{prefix}.geo.cities"),
            "radius": radius or None,
        }
    )
    rules = drop_none(
        {
            "venue_types": words(form, f"{prefix}.venue_types"),
            "venue_tags": words(form, f"{prefix}.venue_tags"),
            "screen_ids": words(form, f"{prefix}.screen_ids"),
            "geo": geo or None,
        }
    )
    return rules or None


def campaign_body(form: Form) -> dict[str, Any]:
    """The form as CampaignIn's members: a blank field is a member not given (its default)."""
    dayparts = []
    for i in range(DAYPART_ROWS):
        days = [d for d in DAYS if form.get(f"dayparts[{i}].days.{d}")]
        start, end = text(form, f"dayparts[{i}].start_hour"), text(form, f"dayparts[{i}].end_hour")
        if days or start or end:
            dayparts.append({"days": days, "start_hour": start, "end_hour": end})
    caps = []
    for i in range(CAP_ROWS):
        limit = number(form, f"caps[{i}].limit")
        if limit is not None:
            caps.append(
                {
                    "period": form.get(f"caps[{i}].period"),
                    "metric": form.get(f"caps[{i}].metric"),
                    "limit": limit,
                }
            )
    frequency = drop_none(
        {"per_hour": number(form, "frequency.per_hour"), "per_day": number(form, "frequency.per_day")}
    )
    advertiser = text(form, "advertiser_id")
    return drop_none(
        {
            "advertiser_id": advertiser,
            "name": text(form, "name"),
            "status": text(form, "status"),
            "start_at": utc_time(form, "start_at"),
            "end_at": utc_time(form, "end_at"),
            "venue_ids": words(form, "venue_ids"),
            "tier": text(form, "tier"),
            "weight": number(form, "weight"),
            "timezone": text(form, "timezone"),
            "targeting": _rules(form, "targeting"),
            "exclusions": _rules(form, "exclusions"),
            "dayparts": dayparts,
            "caps": caps,
            "cpm": number(form, "cpm"),
            "pacing": text(form, "pacing"),
            "frequency": frequency or None,
            "separation_minutes": number(form, "separation_minutes"),
            "share_of_voice": number(form, "share_of_voice"),
        }
    )


CLEARED: dict[str, Any] = {
    "targeting": {},
    "exclusions": None,
    "cpm": None,
    "frequency": None,
    "share_of_voice": None,
}
"""What a blank in the edit form sends: null clears a member, as a PATCH with null does; targeting is
cleared criterion by criterion instead, since a null targeting would also set the venue list (to every
venue), which the form gives apart."""


def campaign_patch(form: Form) -> CampaignPatch:
    """An edit replaces every rule with the form's: a blank rule is cleared, as a PATCH with null does."""
    body = campaign_body(form)
    body.pop("advertiser_id", None)
    venues = body.pop("venue_ids", None)
    body = CLEARED | body
    body["all_venues"] = venues is None
    if venues is not None:
        body["venue_ids"] = venues
    return decode(body, CampaignPatch)


def campaign_form(campaign: Campaign) -> dict[str, Any]:
    """A stored campaign as the form's values (the reverse of campaign_body)."""
    values: dict[str, Any] = {
        "advertiser_id": campaign.advertiser_id,
        "name": campaign.name,
        "status": campaign.status,
        "start_at": utc_input(campaign.start_at),
        "end_at": utc_input(campaign.end_at),
        "venue_ids": ", ".join(campaign.venue_ids) if not campaign.all_venues else "",
        "tier": campaign.tier,
        "weight": campaign.weight,
        "timezone": campaign.timezone,
        "cpm": "" if campaign.cpm is None else f"{campaign.cpm:g}",
        "pacing": campaign.pacing,
        "separation_minutes": campaign.separation_minutes,
        "share_of_voice": "" if campaign.share_of_voice is None else f"{campaign.share_of_voice:g}",
        "frequency.per_hour": campaign.frequency.per_hour if campaign.frequency else "",
        "frequency.per_day": campaign.frequency.per_day if campaign.frequency else "",
    }
    for prefix in RULE_SETS:
        rules = getattr(campaign, prefix)
        values[f"{prefix}.venue_types"] = ", ".join(rules.venue_types or [])
        values[f"{prefix}.venue_tags"] = ", ".join(rules.venue_tags or [])
        values[f"{prefix}.screen_ids"] = ", ".join(rules.screen_ids or [])
        geo = rules.geo
        values[f"{prefix}.geo.countries"] = ", ".join(geo.countries or []) if geo else ""
        values[f"{prefix}.geo.regions"] = ", ".join(geo.regions or []) if geo else ""
        values[f"{prefix}.geo.cities"] = ", ".join(geo.cities or []) if geo else ""
        values[f"{prefix}.geo.radius"] = (
            "\n".join(f"{r.latitude:g}, {r.longitude:g}, {r.radius_km:g}" for r in geo.radius or [])
            if geo
            else ""
        )
    for i, part in enumerate(campaign.dayparts[:DAYPART_ROWS]):
        for day in part.days:
            values[f"dayparts[{i}].days.{day}"] = "on"
        values[f"dayparts[{i}].start_hour"] = part.start_hour
        values[f"dayparts[{i}].end_hour"] = part.end_hour
    for i, cap in enumerate(campaign.caps[:CAP_ROWS]):
        values[f"caps[{i}].period"] = cap.period
        values[f"caps[{i}].metric"] = cap.metric
        values[f"caps[{i}].limit"] = f"{cap.limit:g}"
    return values


async def _list_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    error: ApiError | None = None,
    form: dict[str, Any] | None = None,
) -> Response[str]:
    seen = read_scope(request)
    found = seen.only(await env.run_sync(campaigns_repo.list_campaigns))
    listed = seen.only(await env.run_sync(campaigns_repo.list_advertisers), lambda a: a.id)
    advertisers = {a.id: a for a in listed}
    now = int(time.time())
    return render(
        request,
        "campaigns.html",
        env=env,
        title="Campaigns",
        campaigns=found,
        advertisers=advertisers,
        delivered=await campaign_delivery(env, found, now),
        now=now,
        error=error,
        form=form or {},
    )


@get(BASE, include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def campaign_list(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    return await _list_page(request, console_of(request).env(env_name))


@post(ROOT + "/{env_name:str}/advertisers", include_in_schema=False)
async def advertiser_create(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        data = decode(
            drop_none({"name": text(form, "name"), "category": text(form, "category")}), AdvertiserIn
        )
        await change(
            request,
            env,
            "advertiser.create",
            f"advertiser {data.name}",
            lambda c: campaigns_repo.create_advertiser(c, data),
        )
    except ApiError as error:
        return await _list_page(request, env, error=error, form=form)
    return Redirect(f"{ROOT}/{env.name}/campaigns/new", status_code=303)


async def _edit_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    form: dict[str, Any],
    error: ApiError | None = None,
    campaign: Campaign | None = None,
) -> Response[str]:
    advertisers = await env.run_sync(campaigns_repo.list_advertisers)
    return render(
        request,
        "campaign_form.html",
        env=env,
        title=f"Edit {campaign.name}" if campaign else "New campaign",
        campaign=campaign,
        advertiser_options=[(a.id, a.name) for a in advertisers],
        form=form,
        error=error,
        days=DAYS,
        daypart_rows=range(DAYPART_ROWS),
        cap_rows=range(CAP_ROWS),
        rule_sets=RULE_SETS,
    )


@get(BASE + "/new", include_in_schema=False)
async def campaign_new(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    now = hour_floor(int(time.time()))
    form = {
        "start_at": utc_input(now),
        "end_at": utc_input(now + 30 * DAY),
        "tier": "standard",
        "weight": 100,
        "timezone": "UTC",
        "pacing": "asap",
        "status": "active",
        "separation_minutes": 0,
    }
    return await _edit_page(request, env, form=form)


@post(BASE + "/new", include_in_schema=False)
async def campaign_create(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        data = decode(campaign_body(form), CampaignIn)
        campaign = await change(
            request,
            env,
            "campaign.create",
            f"campaign {data.name}",
            lambda c: campaigns_repo.create_campaign(c, data),
        )
    except ApiError as error:
        return await _edit_page(request, env, form=form, error=error)
    return Redirect(f"{ROOT}/{env.name}/campaigns/{campaign.id}", status_code=303)


@get(BASE + "/{campaign_id:int}/edit", include_in_schema=False)
async def campaign_edit(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[str]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    campaign = await env.run_sync(lambda c: campaigns_repo.get_campaign(c, campaign_id))
    return await _edit_page(request, env, form=campaign_form(campaign), campaign=campaign)


@post(BASE + "/{campaign_id:int}/edit", include_in_schema=False)
async def campaign_update(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        patch = campaign_patch(form)
        await change(
            request,
            env,
            "campaign.update",
            f"campaign {campaign_id}",
            lambda c: campaigns_repo.update_campaign(c, campaign_id, patch),
            before=lambda c: campaigns_repo.get_campaign(c, campaign_id),
        )
    except ApiError as error:
        campaign = await env.run_sync(lambda c: campaigns_repo.get_campaign(c, campaign_id))
        return await _edit_page(request, env, form=form, error=error, campaign=campaign)
    return Redirect(f"{ROOT}/{env.name}/campaigns/{campaign_id}", status_code=303)


@post(BASE + "/{campaign_id:int}/status", include_in_schema=False)
async def campaign_status(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    patch = decode({"status": (await form_fields(request)).get("status")}, CampaignPatch)
    await change(
        request,
        env,
        f"campaign.{patch.status}",
        f"campaign {campaign_id}",
        lambda c: campaigns_repo.update_campaign(c, campaign_id, patch),
        before=lambda c: campaigns_repo.get_campaign(c, campaign_id),
    )
    return Redirect(f"{ROOT}/{env.name}/campaigns/{campaign_id}", status_code=303)


def pacing_chart(campaign: Campaign, hourly: dict[int, float], now: int, metric: str) -> Any:
    """Plan against delivery, cumulative, hour by hour over the flight so far (day by day if long)."""
    start = hour_floor(campaign.start_at)
    stop = min(campaign.end_at, max(hour_floor(now) + HOUR, start + DAY))
    if stop <= start:
        return None
    step = HOUR if stop - start <= CHART_HOURS_MAX * HOUR else DAY
    buckets = list(range(start - start % step, stop, step))
    per_bucket = [0.0] * len(buckets)
    for at, value in hourly.items():
        index = (at - buckets[0]) // step
        if 0 <= index < len(per_bucket):
            per_bucket[index] += value
    delivered: list[float | None] = list(cumulative(per_bucket))
    for i, bucket in enumerate(buckets):
        if bucket > now:
            delivered[i] = None  # the future has no delivery yet
    series = [Series(f"delivered {metric}", delivered)]
    plan = plan_line(campaign, [b + step - HOUR for b in buckets])
    if plan is not None:
        series.append(Series("plan (even)", plan, dashed=True))
    fmt = "%d %Hh" if step == HOUR else "%d %b"
    labels = [time.strftime(fmt, time.gmtime(b)) for b in buckets]
    return line_chart(
        labels, series, title=f"Pacing of {campaign.name}: plan against delivery", counts=metric == "plays"
    )


@get(BASE + "/{campaign_id:int}", include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def campaign_detail(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[str]:
    env = console_of(request).env(env_name)
    return await campaign_page(request, env, campaign_id)


async def campaign_page(
    request: Request[Any, Any, Any],
    env: Environment,
    campaign_id: int,
    *,
    creative_form: dict[str, Any] | None = None,
    error: ApiError | None = None,
    share_form: dict[str, Any] | None = None,
    share_error: ApiError | None = None,
    new_link: str | None = None,
) -> Response[str]:
    """The campaign's page; its share links for staff (an advertiser user never sees them)."""
    now = int(time.time())
    campaign = await env.run_sync(lambda c: campaigns_repo.get_campaign(c, campaign_id))
    read_scope(request).check_campaign(campaign.id, campaign.advertiser_id)
    goal = next((c for c in campaign.caps if c.period == "lifetime"), None)
    metric = goal.metric if goal else "plays"

    def read(conn: Any) -> Any:
        return delivery(
            conn,
            campaign.start_at,
            campaign.end_at,  # play times ahead of now count: an ad request is made before it plays
            now,
            group_by=("hour",),
            campaign_id=campaign.id,
        )

    report = await env.run_sync(read)
    hourly: dict[int, float] = {}
    for row in report.rows:
        at = int(dt.datetime.fromisoformat(str(row.hour)).timestamp())
        hourly[at] = Delivered(row.plays, row.impressions).of(metric, campaign.cpm)
    goals = (await campaign_delivery(env, [campaign], now))[campaign.id].goals
    staff = read_scope(request).everything
    links = await env.run_sync(lambda c: share_links.list_links(c, campaign.id)) if staff else []
    mount = env.config.mount_path
    return render(
        request,
        "campaign.html",
        env=env,
        title=campaign.name,
        campaign=campaign,
        goals=goals,
        totals=report.totals,
        chart=pacing_chart(campaign, hourly, now, metric),
        preview_base=mount,
        creative_form=creative_form or {"weight": 100, "mime_type": "video/mp4"},
        error=error,
        share_links=links,
        share_form=share_form or {"days": share_links.DEFAULT_DAYS},
        share_error=share_error,
        new_link=new_link,
        now=now,
    )


def creative_body(form: Form) -> dict[str, Any]:
    return drop_none(
        {
            "name": text(form, "name"),
            "media_url": text(form, "media_url"),
            "mime_type": text(form, "mime_type"),
            "width": number(form, "width"),
            "height": number(form, "height"),
            "duration_seconds": number(form, "duration_seconds"),
            "bitrate_kbps": number(form, "bitrate_kbps"),
            "weight": number(form, "weight"),
            "size_bytes": number(form, "size_bytes"),
            "sha256": text(form, "sha256"),
        }
    )


@post(BASE + "/{campaign_id:int}/creatives", include_in_schema=False)
async def creative_create(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        data = decode(creative_body(form), CreativeIn)
        await change(
            request,
            env,
            "creative.create",
            f"campaign {campaign_id} creative {data.name}",
            lambda c: campaigns_repo.add_creative(c, campaign_id, data),
        )
    except ApiError as error:
        return await campaign_page(request, env, campaign_id, creative_form=form, error=error)
    return Redirect(f"{ROOT}/{env.name}/campaigns/{campaign_id}", status_code=303)


@post(BASE + "/{campaign_id:int}/creatives/{creative_id:int}", include_in_schema=False)
async def creative_update(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId, creative_id: RowId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        patch = decode(
            drop_none({"status": text(form, "status"), "weight": number(form, "weight")}), CreativePatch
        )
        await change(
            request,
            env,
            "creative.update",
            f"campaign {campaign_id} creative {creative_id}",
            lambda c: campaigns_repo.update_creative(c, campaign_id, creative_id, patch),
            before=lambda c: next(
                (x for x in campaigns_repo.get_campaign(c, campaign_id).creatives if x.id == creative_id),
                None,
            ),
        )
    except ApiError as error:
        return await campaign_page(request, env, campaign_id, error=error)
    return Redirect(f"{ROOT}/{env.name}/campaigns/{campaign_id}", status_code=303)


ROUTES = [
    campaign_list,
    advertiser_create,
    campaign_new,
    campaign_create,
    campaign_edit,
    campaign_update,
    campaign_status,
    campaign_detail,
    creative_create,
    creative_update,
]
