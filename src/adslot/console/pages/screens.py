"""Screens (every screen's status, silent first) and Alerts (the history, every delivery attempt, and the
environment's alert settings and webhooks)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.params import PathParameter, QueryParameter
from litestar.response import Redirect

from adslot.api.alerts import AlertSettingsIn, read_settings, write_settings
from adslot.api.screens import StatusFilter, put_hours
from adslot.console.charts import sparkline
from adslot.console.forms import text
from adslot.console.roles import ADMIN, TRAFFIC
from adslot.console.web import (
    ROOT,
    EnvName,
    RowId,
    change,
    console_of,
    form_fields,
    message_page,
    need,
    render,
)
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.fleet import alert_store, webhooks
from adslot.fleet import repository as fleet_repo
from adslot.fleet.status import STATUSES, counts

FILTERS = (*STATUSES, "unregistered")


@get(ROOT + "/{env_name:str}/screens", include_in_schema=False)
async def screens_page(
    request: Request[Any, Any, Any],
    env_name: EnvName,
    venue: Annotated[str | None, QueryParameter()] = None,
    status: Annotated[StatusFilter | None, QueryParameter()] = None,
    tag: Annotated[str | None, QueryParameter()] = None,
) -> Response[str]:
    env = console_of(request).env(env_name)
    now = time.time()
    default = env.settings.screen_silent_seconds

    def read(conn: Any) -> Any:
        silent = fleet_repo.silent_seconds(conn, default)
        listed = fleet_repo.fleet(conn, now, silent, venue_id=venue or None, status=status, tag=tag or None)
        venues = fleet_repo.load_venues(conn)
        return silent, listed, venues

    silent, listed, venues = await env.run_sync(read)
    charts = {
        (s.venue_id, s.screen_id): sparkline(
            [float(h[0]) for h in s.hourly],
            title=f"{s.venue_id} / {s.screen_id or '(no screen id)'}: ad requests per hour, last 24 hours",
        )
        for s in listed
    }
    tags = sorted({t for v in venues.values() for t in v.tags})
    return render(
        request,
        "screens.html",
        env=env,
        title="Screens",
        screens=listed,
        counts=counts(listed),
        charts=charts,
        venues=sorted(venues),
        tags=tags,
        filters=FILTERS,
        chosen={"venue": venue or "", "status": status or "", "tag": tag or ""},
        silent_minutes=silent / 60,
        now=int(now),
    )


async def _alerts_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    error: ApiError | None = None,
    secret: str | None = None,
) -> Response[str]:
    settings = env.settings

    def read(conn: Any) -> Any:
        return (
            alert_store.history(conn),
            alert_store.attempts_of(conn),
            read_settings(conn, settings.screen_silent_seconds, bool(settings.smtp_host)),
            webhooks.active(conn),
        )

    history, attempts, current, hooks = await env.run_sync(read)
    return render(
        request,
        "alerts.html",
        env=env,
        title="Alerts",
        alerts=history,
        attempts=attempts,
        current=current,
        webhooks=hooks,
        error=error,
        secret=secret,
    )


@get(ROOT + "/{env_name:str}/alerts", include_in_schema=False)
async def alerts_page(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    return await _alerts_page(request, console_of(request).env(env_name))


@post(ROOT + "/{env_name:str}/alerts/settings", include_in_schema=False)
async def alert_settings(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, ADMIN)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        minutes = text(form, "silent_minutes")
        share = text(form, "not_playing_percent")
        emails = text(form, "emails")
        try:
            data = AlertSettingsIn(
                silent_minutes=int(minutes) if minutes else None,
                not_playing_share=float(share) / 100 if share else None,
                emails=[e.strip() for e in (emails or "").split(",") if e.strip()],
            )
        except ValueError as exc:
            raise ApiError(400, "invalid_field", "minutes and percent are numbers", "silent_minutes") from exc
        default, email = env.settings.screen_silent_seconds, bool(env.settings.smtp_host)
        await change(
            request,
            env,
            "alerts.settings",
            "alert settings",
            lambda c: write_settings(c, data, default, email),
            catalog=False,
        )
    except ApiError as error:
        return await _alerts_page(request, env, error=error)
    return Redirect(f"{ROOT}/{env.name}/alerts", status_code=303)


@post(ROOT + "/{env_name:str}/alerts/webhooks", include_in_schema=False)
async def webhook_add(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, ADMIN)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        url = webhooks.checked_url(text(form, "url") or "", env.settings.alert_webhooks_allow_private)
        made = await change(
            request,
            env,
            "alerts.webhook.add",
            "alert webhook",
            lambda c: webhooks.create(c, url, int(time.time())),
            catalog=False,
        )
    except ApiError as error:
        return await _alerts_page(request, env, error=error)
    return await _alerts_page(request, env, secret=made.secret)


@post(ROOT + "/{env_name:str}/alerts/webhooks/{webhook_id:int}/remove", include_in_schema=False)
async def webhook_remove(
    request: Request[Any, Any, Any], env_name: EnvName, webhook_id: RowId
) -> Response[Any]:
    need(request, ADMIN)
    env = console_of(request).env(env_name)
    await change(
        request,
        env,
        "alerts.webhook.remove",
        f"alert webhook {webhook_id}",
        lambda c: webhooks.remove(c, webhook_id, int(time.time())),
        catalog=False,
    )
    return Redirect(f"{ROOT}/{env.name}/alerts", status_code=303)


async def venue_fleet(env: Environment, venue_id: str, error: ApiError | None = None) -> dict[str, Any]:
    """The venue page's fleet part: its screens' status and its opening hours (venue_fleet.html)."""
    now = time.time()
    default = env.settings.screen_silent_seconds

    def read(conn: Any) -> Any:
        silent = fleet_repo.silent_seconds(conn, default)
        return (
            fleet_repo.fleet(conn, now, silent, venue_id=venue_id, figures=False),
            fleet_repo.get_hours(conn, venue_id),
        )

    states, hours = await env.run_sync(read)
    text_hours = json.dumps(hours.as_json()) if hours is not None else ""
    return {"screens": states, "hours": text_hours, "error": error}


@post(ROOT + "/{env_name:str}/venues/v/{venue_id:str}/hours", include_in_schema=False)
async def venue_hours(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: Annotated[str, PathParameter()]
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    raw = text(form, "hours")
    try:
        try:
            given = json.loads(raw) if raw else None
        except json.JSONDecodeError as exc:
            raise ApiError(400, "invalid_json", f"the hours are not JSON: {exc.msg}", "hours") from exc
        await change(
            request,
            env,
            "venue.hours",
            f"venue {venue_id}",
            lambda c: put_hours(c, venue_id, given),
            catalog=False,
        )
    except ApiError as error:
        if error.status == 404:
            raise
        return message_page(request, 400, "Opening hours not saved", f"{error.field}: {error.message}")
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue_id, safe='')}?saved=1", status_code=303)


ROUTES = [screens_page, alerts_page, alert_settings, webhook_add, webhook_remove, venue_hours]
