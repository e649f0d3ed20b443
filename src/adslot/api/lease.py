"""The player's side of an ad request's lease: give an unplayed slot back, and list what may play soon.

Release is keyed (the account that asked for the ad), unlike the pixels: giving a slot back frees budget for
other screens, so nobody but its owner may do it, and a player-link key only for its own screen's ad requests.
The manifest lets players download creatives ahead of play time; it over-approximates (caps and pacing are
ignored), never misses a creative that can play.
"""

from __future__ import annotations

import time

from adslot.api.auth import authenticate
from adslot.api.proof_of_play import UNKNOWN, media_url, uuid_of
from adslot.api.reply import NO_STORE, Reply, error_reply, json_reply
from adslot.auth.keys import SCOPE_AD_REQUEST, check_ad_request_screen, check_screen
from adslot.decision.manifest import upcoming
from adslot.decision.model import VenueProfile
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ledger.records import Release

MANIFEST_HOURS_DEFAULT = 24
MANIFEST_HOURS_MAX = 72


async def handle_release(env: Environment, *, key: str | None, ad_request_uuid: str | None) -> Reply:
    try:
        account = await authenticate(env, key, SCOPE_AD_REQUEST)
        ad_request_id = uuid_of(ad_request_uuid)
        if account.screen is not None:
            # A player-link key: the ledger's Release checks the account only, so its screen is checked on
            # the row read here (the batched point read the record and the VAST use); other keys read nothing.
            record = await env.lookup(ad_request_id)
            if record is not None:
                check_ad_request_screen(
                    account, record.account_id, record.venue_id, record.screen_id, "ad_request_uuid"
                )
        now = int(time.time())
        verdict = await env.writer.submit(Release(ad_request_id, account.account_id, now))
        if verdict.counters:
            env.delivery_cache.update(verdict.counters)
        outcome = verdict.outcome
        if outcome == "unknown":
            raise UNKNOWN
        if outcome == "played":
            raise ApiError(
                409,
                "ad_request_played",
                "the ad request was played; a play cannot be given back",
                "ad_request_uuid",
            )
        if outcome == "late":
            assert verdict.expires_at is not None
            raise ApiError(
                410,
                "ad_request_expired",
                f"the ad request expired {now - verdict.expires_at} seconds ago; its slot is already free",
                "ad_request_uuid",
            )
    except ApiError as error:
        return error_reply(error, NO_STORE)
    return json_reply(200, {"ad_request_uuid": str(ad_request_id), "result": outcome}, NO_STORE)


def _manifest_hours(raw: str | None) -> int:
    if raw is None or raw == "":
        return MANIFEST_HOURS_DEFAULT
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MANIFEST_HOURS_MAX:
        raise ApiError(
            400, "invalid_hours", f"hours must be an integer from 1 to {MANIFEST_HOURS_MAX}", "hours"
        )
    return int(raw)


def _identifier(env: Environment, raw: str | None, name: str, required: bool) -> str | None:
    if raw is None or raw == "":
        if required:
            raise ApiError(400, "missing_field", f"{name} is required", name)
        return None
    if len(raw) > env.settings.max_id_length:
        raise ApiError(
            400, "too_long", f"{name} must be at most {env.settings.max_id_length} characters", name
        )
    if not raw.isprintable():
        raise ApiError(400, "invalid_characters", f"{name} must not contain control characters", name)
    return raw


async def handle_manifest(
    env: Environment, *, key: str | None, venue_id: str | None, screen_id: str | None, hours: str | None
) -> Reply:
    try:
        account = await authenticate(env, key, SCOPE_AD_REQUEST)
        venue_name = _identifier(env, venue_id, "venue_id", True)
        screen_name = _identifier(env, screen_id, "screen_id", False)
        assert venue_name is not None
        check_screen(account, venue_name, screen_name)
        window = _manifest_hours(hours)
        assert venue_name is not None
        catalog = env.catalog
        assert catalog is not None
        venue = catalog.venues.get(venue_name)
        if venue is None:
            if env.name != "sandbox":
                raise ApiError(422, "unknown_venue", f"venue {venue_name!r} is not registered", "venue_id")
            venue = VenueProfile(venue_name)
        screen = catalog.screens.get((venue_name, screen_name)) if screen_name else None
    except ApiError as error:
        return error_reply(error, NO_STORE)
    now = int(time.time())
    start, end = now, now + window * 3600
    seen: set[int] = set()
    items: list[dict[str, object]] = []
    for choice in upcoming(catalog.index, venue, screen_name, screen, start, end):
        creative = choice.creative
        if creative.id in seen:
            continue
        seen.add(creative.id)
        items.append(
            {
                "creative_id": creative.id,
                "campaign_id": choice.campaign.id,
                "name": creative.name,
                "media_url": media_url(env, creative.media_url),
                "mime_type": creative.mime_type,
                "width": creative.width,
                "height": creative.height,
                "duration_seconds": creative.duration_seconds,
                "bitrate_kbps": creative.bitrate_kbps,
                "size_bytes": creative.size_bytes,
                "sha256": creative.sha256,
            }
        )
    data = {"venue_id": venue_name, "screen_id": screen_name, "from": start, "to": end, "creatives": items}
    return json_reply(200, data, ("cache-control", "private, max-age=300"))
