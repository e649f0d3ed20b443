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
from adslot.console.roles import ADMIN
from adslot.console.web import ROOT, EnvName, change, console_of, need, render
from adslot.player import links
from adslot.player.status import read_player_states

VenueId = Annotated[str, PathParameter()]
ScreenId = Annotated[str, PathParameter()]
SCREEN = ROOT + "/{env_name:str}/venues/v/{venue_id:str}/screens/{screen_id:str}"


def screen_players(conn: sa.Connection, venue_id: str) -> dict[str, dict[str, Any]]:
    """screen_id -> {"state": "on" | "stopped" | None, "status": the player's last report or None}."""
    players: dict[str, dict[str, Any]] = {}
    for (_, screen_id), state in links.player_states(conn, venue_id).items():
        players.setdefault(screen_id, {"state": None, "status": None})["state"] = state
    for report in read_player_states(conn, venue_id):
        if report["screen_id"] is not None:
            players.setdefault(report["screen_id"], {"state": None, "status": None})["status"] = report
    return players


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


ROUTES = [player_link, player_stop]
