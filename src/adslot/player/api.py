"""The player's two calls beside the ad request: its settings (once at start) and its status report.

Both take the screen's key (ad_request scope). Neither is on the hot lane: a player asks for its config when
it starts and reports every minute, each one small read or one upsert.
"""

from __future__ import annotations

import mimetypes
import time
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.openapi.datastructures import ResponseSpec

from adslot.api.ad_request import check_content_type
from adslot.api.adapters import env_of, reply_response
from adslot.api.auth import authenticate
from adslot.api.docs import error_spec
from adslot.api.hot_routes import SCREEN_ERRORS, SspKey, query
from adslot.api.json_body import decode_json
from adslot.api.reply import NO_STORE, Reply, error_reply, json_reply
from adslot.auth.keys import SCOPE_AD_REQUEST, check_screen
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.player import VERSION, status, venue_settings

CONFIG_PATH = "/api/v1/player/config"
STATUS_PATH = "/api/v1/player/status"
MAX_STATUS_BYTES = 4096
HOUSE = "/player/house.svg"


class Fallback(msgspec.Struct):
    url: str
    mime_type: str


class PlayerConfig(msgspec.Struct):
    venue_id: str
    slot_seconds: int
    lead_seconds: int
    fallback: list[Fallback]
    player_version: str


class ConfigEnvelope(msgspec.Struct):
    status: int
    data: PlayerConfig


def _absolute(env: Environment, url: str) -> str:
    return env.base_url + url if url.startswith("/") else url


def _fallback(env: Environment, urls: list[str]) -> list[dict[str, str]]:
    chosen = urls or [HOUSE]
    return [
        {
            "url": _absolute(env, url),
            "mime_type": mimetypes.guess_type(url.partition("?")[0])[0] or "application/octet-stream",
        }
        for url in chosen
    ]


async def handle_config(env: Environment, *, key: str | None, venue_id: str | None) -> Reply:
    try:
        record = await authenticate(env, key, SCOPE_AD_REQUEST)
        if not venue_id:
            raise ApiError(400, "missing_field", "venue_id is required", "venue_id")
        if len(venue_id) > env.settings.max_id_length or not venue_id.isprintable():
            raise ApiError(
                400, "invalid_value", "venue_id is too long or holds control characters", "venue_id"
            )
        if record.screen is not None:  # the config is per venue: only the venue is checked
            check_screen(record, venue_id, record.screen[1])
        catalog = env.catalog
        assert catalog is not None
        if venue_id not in catalog.venues and env.name != "sandbox":
            raise ApiError(422, "unknown_venue", f"venue {venue_id!r} is not registered", "venue_id")
        name = venue_id
        settings = await env.run_sync(lambda conn: venue_settings.read(conn, name))
    except ApiError as error:
        return error_reply(error, NO_STORE)
    data = {
        "venue_id": venue_id,
        "slot_seconds": settings.slot_seconds,
        "lead_seconds": settings.lead_seconds,
        "fallback": _fallback(env, settings.fallback_urls),
        "player_version": VERSION,
    }
    return json_reply(200, data, NO_STORE)


async def handle_status(env: Environment, *, key: str | None, content_type: str | None, body: bytes) -> Reply:
    try:
        record = await authenticate(env, key, SCOPE_AD_REQUEST)
        check_content_type(content_type)
        if len(body) > MAX_STATUS_BYTES:
            raise ApiError(
                413, "payload_too_large", f"the body may be at most {MAX_STATUS_BYTES} bytes", "body"
            )
        values = status.check_report(decode_json(body), env.settings.max_id_length)
        check_screen(record, values["venue_id"], values["screen_id"] or None)
    except ApiError as error:
        return error_reply(error, NO_STORE)
    now = int(time.time())
    await env.run_sync(lambda conn: status.record_report(conn, values, now), write=True, catalog=False)
    return json_reply(200, {"reported_at": now}, NO_STORE)


@get(
    CONFIG_PATH,
    operation_id="getPlayerConfig",
    summary="The reference player's settings for a venue: slot length, lead time, fallback media",
    tags=["player"],
    security=[{"SspKey": []}],
    responses={
        200: ResponseSpec(ConfigEnvelope, generate_examples=False, description="The settings."),
        422: error_spec("unknown_venue: the venue is not registered (production)."),
        **SCREEN_ERRORS,
    },
)
async def player_config(
    request: Request[Any, Any, Any],
    venue_id: Annotated[str | None, query("Your identifier of the venue")] = None,
    ssp_key: SspKey = None,
) -> Response[bytes]:
    return reply_response(await handle_config(env_of(request), key=ssp_key, venue_id=venue_id))


@post(
    STATUS_PATH,
    operation_id="reportPlayerStatus",
    summary="A player's report of what it is doing: version, fires queued, cache size, errors",
    description=(
        "JSON body: venue_id (required), screen_id, version (required), fires_queued, cache_bytes, errors, "
        "last_error, last_ad_request_at. The screen's last report replaces the one before."
    ),
    tags=["player"],
    security=[{"SspKey": []}],
    status_code=200,
    responses={
        413: error_spec("A body past 4 KiB."),
        415: error_spec("The body is not application/json."),
        **SCREEN_ERRORS,
    },
)
async def player_status(request: Request[Any, Any, Any], ssp_key: SspKey = None) -> Response[bytes]:
    return reply_response(
        await handle_status(
            env_of(request),
            key=ssp_key,
            content_type=request.headers.get("content-type"),
            body=await request.body(),
        )
    )


PLAYER_API = [player_config, player_status]
