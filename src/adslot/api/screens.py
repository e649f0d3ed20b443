"""The fleet API (admin permission): every screen's status, and each venue's opening hours."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import msgspec
import sqlalchemy as sa
from litestar import Controller, Request, get, post
from litestar.params import Body, QueryParameter

from adslot.api.adapters import env_of
from adslot.api.alerts import AlertController
from adslot.api.management import ERRORS, READ_ERRORS, WRITE_ERRORS, VenueId, admin_guard, change
from adslot.api.strict_body import strict_body
from adslot.errors import ApiError
from adslot.fleet import repository as fleet_repo
from adslot.fleet.hours import HoursError, Schedule, parse_schedule
from adslot.fleet.status import ScreenState, counts
from adslot.inventory import repository as inventory_repo

StatusFilter = Literal["online", "silent", "never_seen", "closed", "unregistered"]


class ScreenOut(msgspec.Struct):
    venue_id: str
    screen_id: str
    """"" for the ad requests that named no screen."""
    name: str | None
    registered: bool
    status: str
    """online, silent (since `silent_since`), never_seen, or closed (its venue is, per its opening hours)."""
    silent_since: int | None
    last_request_at: int | None
    last_play_at: int | None
    requests_today: int
    fills_today: int
    plays_today: int
    fill_rate: float | None
    hourly: list[list[int]]
    """The last 24 UTC hours, oldest first: [requests, fills, plays] each."""
    tags: list[str]
    player: dict[str, Any] | None = None


class ScreensOut(msgspec.Struct):
    counts: dict[str, int]
    """Screens per status (and how many are unregistered), over every screen the filters keep."""
    silent_seconds: int
    screens: list[ScreenOut]


class HoursOut(msgspec.Struct):
    venue_id: str
    hours: dict[str, list[str]] | None
    """mon .. sun, each a list of "HH:MM-HH:MM" ranges in the venue's time zone; null: always open."""


def screen_out(state: ScreenState) -> ScreenOut:
    return ScreenOut(
        venue_id=state.venue_id,
        screen_id=state.screen_id,
        name=state.name,
        registered=state.registered,
        status=state.status,
        silent_since=state.silent_since,
        last_request_at=state.last_request_at,
        last_play_at=state.last_play_at,
        requests_today=state.requests_today,
        fills_today=state.fills_today,
        plays_today=state.plays_today,
        fill_rate=state.fill_rate,
        hourly=[list(h) for h in state.hourly],
        tags=list(state.tags),
        player=dict(state.player) if state.player is not None else None,
    )


def read_screens(
    conn: sa.Connection, default_silent: int, venue_id: str | None, status: str | None, tag: str | None
) -> ScreensOut:
    silent = fleet_repo.silent_seconds(conn, default_silent)
    now = time.time()
    states = fleet_repo.fleet(conn, now, silent, venue_id=venue_id, status=status, tag=tag)
    return ScreensOut(counts(states), silent, [screen_out(s) for s in states])


class ScreenController(Controller):
    path = "/api/v1/screens"
    tags = ("fleet",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(
        operation_id="listScreens",
        summary="Every screen's status: silent ones first, with counts and each screen's day",
        responses=ERRORS,
    )
    async def list(
        self,
        request: Request[Any, Any, Any],
        venue_id: Annotated[str | None, QueryParameter(description="Only this venue's screens")] = None,
        status: Annotated[
            StatusFilter | None, QueryParameter(description="Only screens in this status")
        ] = None,
        tag: Annotated[str | None, QueryParameter(description="Only screens of venues with this tag")] = None,
    ) -> ScreensOut:
        env = env_of(request)
        default = env.settings.screen_silent_seconds
        return await env.run_sync(lambda c: read_screens(c, default, venue_id, status, tag))


def checked_hours(data: object) -> Schedule | None:
    if data is None:
        return None
    try:
        return parse_schedule(data)
    except HoursError as exc:
        raise ApiError(400, "invalid_field", str(exc), exc.field) from exc


def put_hours(conn: sa.Connection, venue_id: str, data: object) -> HoursOut:
    inventory_repo.get_venue(conn, venue_id)  # 404 for an unknown venue
    schedule = checked_hours(data)
    fleet_repo.set_hours(conn, venue_id, schedule)
    return HoursOut(venue_id, schedule.as_json() if schedule else None)


def get_hours(conn: sa.Connection, venue_id: str) -> HoursOut:
    inventory_repo.get_venue(conn, venue_id)
    schedule = fleet_repo.get_hours(conn, venue_id)
    return HoursOut(venue_id, schedule.as_json() if schedule else None)


class HoursIn(msgspec.Struct, forbid_unknown_fields=True):
    hours: dict[str, list[str]] | None
    """mon .. sun, each a list of "HH:MM-HH:MM" ranges in the venue's time zone (a day left out is closed);
    null: always open."""


class VenueHoursController(Controller):
    path = "/api/v1/venues/{venue_id:str}/hours"
    tags = ("fleet",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(operation_id="getVenueHours", summary="A venue's opening hours", responses=READ_ERRORS)
    async def get(self, request: Request[Any, Any, Any], venue_id: VenueId) -> HoursOut:
        return await env_of(request).run_sync(lambda c: get_hours(c, venue_id))

    @post(
        operation_id="setVenueHours",
        summary="Set a venue's opening hours (silence while closed raises no alert)",
        responses=WRITE_ERRORS,
        status_code=200,
    )
    async def set(
        self, request: Request[Any, Any, Any], venue_id: VenueId, data: Annotated[HoursIn, Body()]
    ) -> HoursOut:
        return await change(
            request, "venue.hours", f"venue {venue_id}", lambda c: put_hours(c, venue_id, data.hours)
        )


FLEET_CONTROLLERS = [ScreenController, VenueHoursController, AlertController]
