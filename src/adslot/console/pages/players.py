"""A screen's reference player in the console: make its player link, stop it, and read its state (the key's
and the player's own last report) for the venue page."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import sqlalchemy as sa
from litestar import Request, Response, post
from litestar.params import PathParameter
from litestar.response import Redirect

from adslot.auth.keys import LIVE_PREFIX, TEST_PREFIX
from adslot.auth.repository import revoke_key
from adslot.console.forms import words
from adslot.console.roles import ADMIN, TRAFFIC
from adslot.console.web import ROOT, EnvName, change, console_of, form_fields, need, render
from adslot.errors import ApiError
from adslot.player import links, venue_settings
from adslot.player.status import read_player_states

VenueId = Annotated[str, PathParameter()]
ScreenId = Annotated[str, PathParameter()]
VENUE = ROOT + "/{env_name:str}/venues/v/{venue_id:str}"
SCREEN = VENUE + "/screens/{screen_id:str}"


def screen_players(conn: sa.Connection, venue_id: str) -> dict[str, dict[str, Any]]:
    """screen_id -> {"state": "on" | "stopped" | None, "status": the player's last report or None}."""
    players: dict[str, dict[str, Any]] = {}
    for (_, screen_id), state in links.player_states(conn, venue_id).items():
        players.setdefault(screen_id, {"state": None, "status": None})["state"] = state
    for report in read_player_states(conn, venue_id):
        if report["screen_id"] is not None:
            players.setdefault(report["screen_id"], {"state": None, "status": None})["status"] = report
    return players


def _seconds(form: dict[str, str], name: str) -> int:
    raw = form.get(name, "").strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        raise ApiError(400, "invalid_type", f"{name} must be a whole number of seconds", name)
    return int(raw)


@post(VENUE + "/player-settings", include_in_schema=False)
async def player_settings(request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId) -> Redirect:
    """The venue's player settings (slot length, lead time, fallback media), read by its players at start."""
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    settings = venue_settings.check(
        _seconds(form, "slot_seconds"), _seconds(form, "lead_seconds"), words(form, "fallback_urls") or []
    )
    await change(
        request,
        env,
        "venue.player_settings",
        f"venue {venue_id}",
        lambda c: venue_settings.write(c, venue_id, settings),
        before=lambda c: venue_settings.read(c, venue_id).__dict__,
        after=lambda _: settings.__dict__,
    )
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue_id, safe='')}?saved=1", status_code=303)


@post(SCREEN + "/player-link", include_in_schema=False)
async def player_link(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId, screen_id: ScreenId
) -> Response[str]:
    need(request, ADMIN)
    env = console_of(request).env(env_name)
    prefix = LIVE_PREFIX if env.name == "production" else TEST_PREFIX
    made = await change(
        request,
        env,
        "player.link",
        f"player link for {venue_id}/{screen_id}",
        lambda c: links.create_link(
            c, base_url=env.base_url, prefix=prefix, venue_id=venue_id, screen_id=screen_id
        ),
        after=lambda link: {"key_id": link.key_id, "prefix": link.prefix},
    )
    return render(
        request,
        "player_link.html",
        env=env,
        title="Player link",
        link=made.url,
        venue_id=venue_id,
        screen_id=screen_id,
    )


@post(SCREEN + "/player-stop", include_in_schema=False)
async def player_stop(
    request: Request[Any, Any, Any], env_name: EnvName, venue_id: VenueId, screen_id: ScreenId
) -> Redirect:
    need(request, ADMIN)
    env = console_of(request).env(env_name)

    def stop(conn: sa.Connection) -> list[int]:
        stopped = [key_id for key_id, _ in links.active_player_keys(conn, venue_id, screen_id)]
        for key_id in stopped:
            revoke_key(conn, key_id)
        return stopped

    await change(request, env, "player.stop", f"player of {venue_id}/{screen_id}", stop)
    return Redirect(f"{ROOT}/{env.name}/venues/v/{quote(venue_id, safe='')}?saved=1", status_code=303)


ROUTES = [player_settings, player_link, player_stop]
