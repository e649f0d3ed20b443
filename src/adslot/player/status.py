"""Each screen's player self-report (POST {base}/api/v1/player/status): one row per (venue, screen), replaced
by every report, so a report is one upsert and reading every screen's state one scan of a small table."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.storage.tables import player_status

MAX_ERROR = 512


def check_report(body: object, max_id: int) -> dict[str, Any]:
    """The report's columns, or the ApiError naming its first bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object", "body")
    values: dict[str, Any] = {}
    for name, required in (("venue_id", True), ("screen_id", False), ("version", True)):
        value = body.get(name)
        if value is None or value == "":
            if required:
                raise ApiError(400, "missing_field", f"{name} is required", name)
            value = ""
        if not isinstance(value, str):
            raise ApiError(400, "invalid_type", f"{name} must be a string", name)
        if len(value) > (32 if name == "version" else max_id) or not value.isprintable():
            raise ApiError(400, "invalid_value", f"{name} is too long or holds control characters", name)
        values[name] = value
    for name in ("fires_queued", "cache_bytes", "errors", "last_ad_request_at"):
        value = body.get(name, 0 if name != "last_ad_request_at" else None)
        if value is None and name == "last_ad_request_at":
            values[name] = None
            continue
        if type(value) is not int or not 0 <= value < 1 << 53:
            raise ApiError(400, "invalid_type", f"{name} must be a non-negative integer", name)
        values[name] = value
    last_error = body.get("last_error")
    if last_error is not None and not isinstance(last_error, str):
        raise ApiError(400, "invalid_type", "last_error must be a string", "last_error")
    values["last_error"] = last_error[:MAX_ERROR] if last_error else None
    return values


def record_report(conn: sa.Connection, values: dict[str, Any], now: int) -> None:
    """Replace the screen's row: an UPDATE by primary key, an INSERT the first time."""
    row = {**values, "reported_at": now}
    key = (player_status.c.venue_id == row["venue_id"], player_status.c.screen_id == row["screen_id"])
    if conn.execute(sa.update(player_status).where(*key).values(row)).rowcount:
        return
    try:
        with conn.begin_nested():  # a savepoint: PostgreSQL's transaction stays usable after a lost race
            conn.execute(sa.insert(player_status).values(row))
    except sa.exc.IntegrityError:  # the same screen's concurrent first report inserted it meanwhile
        conn.execute(sa.update(player_status).where(*key).values(row))


def read_player_states(conn: sa.Connection, venue_id: str | None = None) -> list[dict[str, Any]]:
    """Every screen's last report (or one venue's), as dicts of the player_status columns; screen_id is None
    for a player that named no screen."""
    query = sa.select(player_status).order_by(player_status.c.venue_id, player_status.c.screen_id)
    if venue_id is not None:
        query = query.where(player_status.c.venue_id == venue_id)
    states = []
    for row in conn.execute(query).mappings():
        state = dict(row)
        state["screen_id"] = state["screen_id"] or None
        states.append(state)
    return states
