"""Venues and screens: list and search, add, edit, screen fit, CSV import with its problems line by line."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.params import PathParameter
from litestar.response import Redirect

from adslot.console.forms import Form, decode, drop_none, number, text, words
from adslot.console.pages.players import screen_players
from adslot.console.pages.screens import venue_fleet
from adslot.console.roles import TRAFFIC
from adslot.console.web import ROOT, EnvName, change, console_of, form_fields, need, render
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.inventory import repository as inventory
from adslot.inventory.csv_import import MAX_CSV_BYTES, CsvError, import_venues
from adslot.inventory.schemas import Screen, ScreenIn, ScreenPatch, Venue, VenueIn, VenuePatch
from adslot.player import venue_settings

VenueId = Annotated[str, PathParameter()]
ScreenId = Annotated[str, PathParameter()]
BASE = ROOT + "/{env_name:str}/venues"
VENUE_FIELDS = ("name", "timezone", "latitude", "longitude", "venue_type", "country", "region", "city")
SCREEN_FIELDS = ("name", "width", "height", "orientation", "mime_types", "max_duration_seconds")


def venue_body(form: Form) -> dict[str, Any]:
    hourly = words(form, "hourly_impressions")
    return {
        "name": text(form, "name"),
        "timezone": text(form, "timezone"),
        "latitude": number(form, "latitude"),
        "longitude": number(form, "longitude"),
        "venue_type": text(form, "venue_type"),
        "tags": words(form, "tags") or [],
        "country": text(form, "country"),
        "region": text(form, "region"),
        "city": text(form, "city"),
        "impressions_per_play": number(form, "impressions_per_play"),
        "hourly_impressions": hourly,
    }


def screen_body(form: Form) -> dict[str, Any]:
    return {
        "name": text(form, "name"),
        "width": number(form, "width"),
        "height": number(form, "height"),
        "orientation": text(form, "orientation"),
        "mime_types": words(form, "mime_types"),
        "max_duration_seconds": number(form, "max_duration_seconds"),
    }


def matches(venue: Venue, query: str) -> bool:
    needle = query.casefold()
    haystack = [venue.venue_id, venue.name, venue.city or "", venue.region or "", venue.country or ""]
    haystack += venue.tags + [s.screen_id for s in venue.screens]
    return any(needle in item.casefold() for item in haystack)


@get(BASE, include_in_schema=False)
async def venue_list(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    query = (request.query_params.get("q") or "").strip()[:128]
    venues = await env.run_sync(inventory.list_venues)
    shown = [v for v in venues if matches(v, query)] if query else venues
    return render(request, "venues.html", env=env, title="Venues", venues=shown, total=len(venues), q=query)


def _venue_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    form: dict[str, Any],
    error: ApiError | None = None,
    venue: Venue | None = None,
    screen_form: dict[str, Any] | None = None,
    screen_error: ApiError | None = None,
    players: dict[str, Any] | None = None,
    player: venue_settings.PlayerSettings | None = None,
    fleet: dict[str, Any] | None = None,
) -> Response[str]:
    return render(
        request,
        "venue_form.html",
        env=env,
        title=f"Venue {venue.venue_id}" if venue else "Add a venue",
        venue=venue,
        form=form,
        error=error,
        screen_form=screen_form or {},
        screen_error=screen_error,
        players=players or {},
        player=player,
        fleet=fleet,
    )


def _as_form(venue: Venue) -> dict[str, Any]:
    values = {name: getattr(venue, name) for name in VENUE_FIELDS}
    values["tags"] = ", ".join(venue.tags)
    values["impressions_per_play"] = venue.impressions_per_play
    values["hourly_impressions"] = ", ".join(f"{v:g}" for v in venue.hourly_impressions or [])
    return values


@get(BASE + "/new", include_in_schema=False)
async def venue_new(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    return _venue_page(request, env, form={"timezone": "UTC", "impressions_per_play": 1})


@post(BASE + "/new", include_in_schema=False)
async def venue_create(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        data = decode(drop_none({"venue_id": text(form, "venue_id"), **venue_body(form)}), VenueIn)
        venue = await change(
            request, env, "venue.create", f"venue {data.venue_id}", lambda c: inventory.create_venue(c, data)
        )
    except ApiError as error:
        return _venue_page(request, env, form=form, error=error)
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue.venue_id, safe='')}", status_code=303)


@get(BASE + "/v/{venue_id:str}", include_in_schema=False)
async def venue_edit(request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId) -> Response[str]:
    env = console_of(request).env(env_name)
    venue = await env.run_sync(lambda c: inventory.get_venue(c, venue_id))
    players = await env.run_sync(lambda c: screen_players(c, venue_id))
    player = await env.run_sync(lambda c: venue_settings.read(c, venue_id))
    fleet = await venue_fleet(env, venue_id)  # its screens' status and opening hours (pages/screens.py)
    return _venue_page(
        request, env, form=_as_form(venue), venue=venue, players=players, player=player, fleet=fleet
    )


@post(BASE + "/v/{venue_id:str}", include_in_schema=False)
async def venue_update(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    body = venue_body(form)
    body["impressions_per_play"] = body["impressions_per_play"] or 1.0
    try:
        patch = decode(body, VenuePatch)
        await change(
            request,
            env,
            "venue.update",
            f"venue {venue_id}",
            lambda c: inventory.update_venue(c, venue_id, patch),
            before=lambda c: inventory.get_venue(c, venue_id),
        )
    except ApiError as error:
        venue = await env.run_sync(lambda c: inventory.get_venue(c, venue_id))
        return _venue_page(request, env, form=form, error=error, venue=venue)
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue_id, safe='')}?saved=1", status_code=303)


@post(BASE + "/v/{venue_id:str}/screens", include_in_schema=False)
async def screen_create(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        data = decode(drop_none({"screen_id": text(form, "screen_id"), **screen_body(form)}), ScreenIn)
        await change(
            request,
            env,
            "screen.create",
            f"screen {venue_id}/{data.screen_id}",
            lambda c: inventory.add_screen(c, venue_id, data),
        )
    except ApiError as error:
        venue = await env.run_sync(lambda c: inventory.get_venue(c, venue_id))
        return _venue_page(
            request, env, form=_as_form(venue), venue=venue, screen_form=form, screen_error=error
        )
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue_id, safe='')}?saved=1", status_code=303)


@get(BASE + "/v/{venue_id:str}/screens/{screen_id:str}", include_in_schema=False)
async def screen_edit(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId, screen_id: ScreenId
) -> Response[str]:
    env = console_of(request).env(env_name)
    screen = await env.run_sync(lambda c: inventory.get_screen(c, venue_id, screen_id))
    form = {name: getattr(screen, name) for name in SCREEN_FIELDS}
    form["mime_types"] = ", ".join(screen.mime_types or [])
    return await _screen_page(request, env, screen, form)


async def _screen_page(
    request: Request[Any, Any, Any],
    env: Environment,
    screen: Screen,
    form: dict[str, Any],
    error: ApiError | None = None,
) -> Response[str]:
    venue = await env.run_sync(lambda c: inventory.get_venue(c, screen.venue_id))
    return render(
        request,
        "screen_form.html",
        env=env,
        title=f"Screen {screen.screen_id}",
        venue=venue,
        screen=screen,
        form=form,
        error=error,
    )


@post(BASE + "/v/{venue_id:str}/screens/{screen_id:str}", include_in_schema=False)
async def screen_update(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId, screen_id: ScreenId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        patch = decode(screen_body(form), ScreenPatch)
        await change(
            request,
            env,
            "screen.update",
            f"screen {venue_id}/{screen_id}",
            lambda c: inventory.update_screen(c, venue_id, screen_id, patch),
            before=lambda c: inventory.get_screen(c, venue_id, screen_id),
        )
    except ApiError as error:
        screen = await env.run_sync(lambda c: inventory.get_screen(c, venue_id, screen_id))
        return await _screen_page(request, env, screen, form, error)
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue_id, safe='')}?saved=1", status_code=303)


@get(BASE + "/import", include_in_schema=False)
async def import_form(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    return render(request, "venue_import.html", env=env, title="Import venues")


@post(BASE + "/import", include_in_schema=False, request_max_body_size=MAX_CSV_BYTES + 64 * 1024)
async def import_upload(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    upload = (await request.form()).get("file")
    problems: list[Any] = []
    error: ApiError | None = None
    result = None
    if not isinstance(upload, UploadFile):
        error = ApiError(400, "invalid_field", "choose a CSV file to import", "file")
    else:
        body = await upload.read()
        try:
            result = await change(
                request,
                env,
                "venues.import",
                f"CSV {upload.filename or 'upload'} ({len(body)} bytes)",
                lambda c: import_venues(c, body),
            )
        except CsvError as exc:
            error, problems = exc, [msgspec.to_builtins(p) for p in exc.details]
        except ApiError as exc:
            error = exc
    return render(
        request,
        "venue_import.html",
        env=env,
        title="Import venues",
        result=result,
        error=error,
        problems=problems,
    )


ROUTES = [
    venue_list,
    venue_new,
    venue_create,
    import_form,
    import_upload,
    venue_edit,
    venue_update,
    screen_create,
    screen_edit,
    screen_update,
]
