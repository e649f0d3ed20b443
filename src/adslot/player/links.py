"""Player links: a key made for one screen (the ad_request scope only) and the URL that starts its player.

The key travels in the URL's fragment (`#key=...`), which browsers never send to a server, so neither adslot's
nor a proxy's access log holds it. Revoking the key stops the screen: its player shows that the link was
revoked, and the console shows the screen as stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import quote

import sqlalchemy as sa

from adslot.auth.keys import SCOPE_AD_REQUEST
from adslot.auth.repository import create_key
from adslot.errors import ApiError
from adslot.storage.tables import api_keys, player_keys, screens

ACCOUNT = "players"
"""The account player-link keys belong to unless another is named: its ad requests are the players'."""


@dataclass(frozen=True)
class PlayerLink:
    url: str
    key_id: int
    prefix: str


def link_url(base_url: str, key: str, venue_id: str, screen_id: str) -> str:
    fragment = (
        f"key={quote(key, safe='')}&venue={quote(venue_id, safe='')}&screen={quote(screen_id, safe='')}"
    )
    return f"{base_url}/player/#{fragment}"


def create_link(
    conn: sa.Connection, *, base_url: str, prefix: str, venue_id: str, screen_id: str, account: str = ACCOUNT
) -> PlayerLink:
    """A new key for the screen and its link; the plaintext key is in the URL only, shown once."""
    known = conn.execute(
        sa.select(screens.c.screen_id).where(screens.c.venue_id == venue_id, screens.c.screen_id == screen_id)
    ).first()
    if known is None:
        raise ApiError(404, "unknown_screen", f"no screen {screen_id!r} in venue {venue_id!r}", "screen_id")
    key, info = create_key(
        conn, account=account, prefix=prefix, scopes=SCOPE_AD_REQUEST, label=f"player {venue_id}/{screen_id}"
    )
    conn.execute(
        sa.insert(player_keys).values(
            key_id=info.id, venue_id=venue_id, screen_id=screen_id, created_at=int(time.time())
        )
    )
    return PlayerLink(link_url(base_url, key, venue_id, screen_id), info.id, info.prefix)


def player_states(conn: sa.Connection, venue_id: str | None = None) -> dict[tuple[str, str], str]:
    """(venue_id, screen_id) -> "on" (a player key is active) or "stopped" (every player key made for the
    screen is revoked); screens that never had a player link are absent."""
    query = sa.select(player_keys.c.venue_id, player_keys.c.screen_id, api_keys.c.revoked_at).join(
        api_keys, api_keys.c.id == player_keys.c.key_id
    )
    if venue_id is not None:
        query = query.where(player_keys.c.venue_id == venue_id)
    states: dict[tuple[str, str], str] = {}
    for row in conn.execute(query):
        where = (row.venue_id, row.screen_id)
        if row.revoked_at is None:
            states[where] = "on"
        else:
            states.setdefault(where, "stopped")
    return states


def active_player_keys(conn: sa.Connection, venue_id: str, screen_id: str) -> list[tuple[int, str]]:
    """(key id, display prefix) of the screen's player keys not revoked."""
    rows = conn.execute(
        sa.select(api_keys.c.id, api_keys.c.prefix)
        .join(player_keys, player_keys.c.key_id == api_keys.c.id)
        .where(
            player_keys.c.venue_id == venue_id,
            player_keys.c.screen_id == screen_id,
            api_keys.c.revoked_at.is_(None),
        )
        .order_by(api_keys.c.id)
    )
    return [(int(r.id), str(r.prefix)) for r in rows]
