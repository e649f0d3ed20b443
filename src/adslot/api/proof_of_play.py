"""The URLs inside the VAST: the inline VAST, the impression and the quartile tracking pixels.

They carry no key: the unguessable ad request uuid is the capability, as the contract's URL shapes imply.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from adslot import __version__
from adslot.api.rate_limited import pixels_limited
from adslot.api.reply import MARKUP_HEADERS, NO_STORE, XML, Reply, error_reply, json_reply
from adslot.decision.model import Creative
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ids import parse_uuid
from adslot.ledger.ivt import HINTS
from adslot.ledger.records import AdRequest, Fire, Verdict
from adslot.telemetry.metrics import Meters
from adslot.vast.buyer import NotVast, with_adslot_pixels, wrapper_to
from adslot.vast.inline import InlineCreative, MediaFile, build_inline
from adslot.vast.urls import EVENTS
from adslot.vast.wrapper import EMPTY_VAST

LAYERS = ("wrapper", "inline")


def uuid_of(raw: str | None) -> uuid.UUID:
    if raw is None or raw == "":
        raise ApiError(400, "missing_ad_request_uuid", "ad_request_uuid is required", "ad_request_uuid")
    parsed = parse_uuid(raw)
    if parsed is None:
        raise ApiError(400, "malformed_ad_request_uuid", "ad_request_uuid is not a UUID", "ad_request_uuid")
    return parsed


UNKNOWN = ApiError(404, "unknown_ad_request", "no ad request with this uuid", "ad_request_uuid")


async def _find(env: Environment, ad_request_id: uuid.UUID) -> AdRequest:
    record = await env.lookup(ad_request_id)
    if record is None:
        raise UNKNOWN
    return record


RELEASED = ApiError(
    410,
    "ad_request_released",
    "the player gave this ad request back; it can no longer play",
    "ad_request_uuid",
)


def _expired(expires_at: int, now: int) -> ApiError:
    return ApiError(
        410, "ad_request_expired", f"the ad request expired {now - expires_at} seconds ago", "ad_request_uuid"
    )


class Pending(NamedTuple):
    """A pixel fire handed to the ledger's group commit: its verdict to come, and what makes the answer."""

    verdict: asyncio.Future[Verdict]
    finish: Callable[[Verdict], Reply]


def begin_event(
    env: Environment,
    *,
    event: str | None,
    ad_request_uuid: str | None,
    layer: str | None = None,
    events: tuple[str, ...] = EVENTS,
    source: int = 0,
) -> Reply | Pending:
    """Check one pixel fire and hand it to the ledger: the answer to an invalid one, else its Pending.

    No coroutine: the protocol lane answers a pixel from its verdict's done-callback, with no task per request
    (a task, its first step and its resumption cost the worker ~3 µs a pixel, measured with uvloop).
    `events` is what the URL accepts: the tracking URL passes QUARTILE_EVENTS (impressions have their own).
    `source`: the client's network (api/sources.py), for the invalid-traffic rules.
    """
    try:
        ad_request_id = uuid_of(ad_request_uuid)
        if event is None or event == "":
            raise ApiError(400, "missing_event", "event is required", "event")
        if event not in events:
            raise ApiError(400, "unknown_event", f"event must be one of {', '.join(events)}", "event")
        layer = layer or "wrapper"
        if layer not in LAYERS:
            raise ApiError(400, "invalid_layer", "layer must be wrapper or inline", "layer")
    except ApiError as error:
        env.meters.pop(event or "", "invalid")  # adslot_pop_events_total (telemetry/metrics.py)
        return error_reply(error, NO_STORE)
    now = int(time.time())
    verdict = env.pixels.enqueue(Fire(ad_request_id, event, layer, now, source))  # limits/pixels.py
    if verdict is None:
        env.meters.pop(event, "limited")
        return pixels_limited()
    # The canonical form the pattern accepted, lowercased, is exactly str(ad_request_id), and cheaper.
    return Pending(verdict, partial(_event_reply, ad_request_uuid.lower(), event, now, env.meters))  # type: ignore[union-attr]


def _event_reply(canonical: str, event: str, now: int, meters: Meters, verdict: Verdict) -> Reply:
    """Counted once, repeats kept as duplicates, late fires kept but not counted: what the ledger said."""
    meters.pop(event, verdict.outcome)  # the ledger's own word (telemetry/metrics.py)
    try:
        if verdict.outcome == "unknown":
            raise UNKNOWN
        if verdict.outcome == "late":
            assert verdict.expires_at is not None
            raise _expired(verdict.expires_at, now)
        if verdict.outcome == "released":
            raise RELEASED
    except ApiError as error:
        return error_reply(error, NO_STORE)
    # A fire the invalid-traffic rules flagged is answered as a counted one in production (ledger/ivt.py): the
    # record and the reports say it was invalid, the player learns nothing it could evade the rules with. The
    # sandbox names the rule: there an integrator learns what their player does wrong. Only a flagged fire
    # pays for the question.
    outcome = verdict.outcome
    if outcome == "invalid":
        if meters.environment == "sandbox":
            return _flagged(canonical, event, verdict)
        outcome = "counted"
    return json_reply(200, {"ad_request_uuid": canonical, "event": event, "result": outcome}, NO_STORE)


def _flagged(canonical: str, event: str, verdict: Verdict) -> Reply:
    """The sandbox's answer to a flagged fire: the rule, and what the player should do instead."""
    reason = str(verdict.reason)
    body = {"ad_request_uuid": canonical, "event": event, "result": "flagged", "rule": reason}
    body["hint"] = HINTS.get(reason, "")
    return json_reply(200, body, NO_STORE)


async def answered(started: Reply | Pending) -> Reply:
    """begin_event's answer, awaited: how the ASGI lanes serve a pixel."""
    if isinstance(started, Pending):
        return started.finish(await started.verdict)
    return started


async def handle_event(
    env: Environment,
    *,
    event: str | None,
    ad_request_uuid: str | None,
    layer: str | None = None,
    events: tuple[str, ...] = EVENTS,
    source: int = 0,
) -> Reply:
    """Record one pixel fire (begin_event), and answer once its batch is committed."""
    return await answered(
        begin_event(
            env, event=event, ad_request_uuid=ad_request_uuid, layer=layer, events=events, source=source
        )
    )


def media_url(env: Environment, url: str) -> str:
    return env.base_url + url if url.startswith("/") else url


def inline_creative(env: Environment, creative: Creative) -> InlineCreative:
    return InlineCreative(
        creative_id=creative.id,
        title=creative.name,
        duration_seconds=creative.duration_seconds,
        media=MediaFile(
            url=media_url(env, creative.media_url),
            mime_type=creative.mime_type,
            width=creative.width,
            height=creative.height,
            bitrate_kbps=creative.bitrate_kbps,
        ),
    )


def _vast_error(error: ApiError) -> Reply:
    """Players parse XML: errors on the VAST URL are an empty VAST 2.0 document plus the error code header."""
    return Reply(error.status, EMPTY_VAST.encode(), XML, [NO_STORE, ("x-adslot-error", error.code)])


async def handle_inline_vast(env: Environment, ad_request_uuid: str) -> Reply:
    try:
        parsed = parse_uuid(ad_request_uuid)
        if parsed is None:
            raise ApiError(400, "malformed_ad_request_uuid", "not a UUID", "ad_request_uuid")
        record = await _find(env, parsed)
        now = int(time.time())
        if record.settle_reason == "released":
            raise RELEASED
        if now > record.expires_at:
            raise _expired(record.expires_at, now)
        if record.creative_id is None:
            return await _buyer_vast(env, record, ad_request_uuid.lower())
        catalog = env.catalog
        assert catalog is not None
        inline = catalog.inline.get(record.creative_id)
        if inline is None:
            creative = catalog.creatives.get(record.creative_id)
            if creative is None:
                raise ApiError(
                    410, "creative_gone", "the creative of this ad request was removed", "ad_request_uuid"
                )
            inline = catalog.inline[creative.id] = inline_creative(env, creative)
    except ApiError as error:
        return _vast_error(error)
    vast = build_inline(
        base_url=env.base_url,
        ad_request_uuid=ad_request_uuid.lower(),  # what parse_uuid accepted, lowercased: str(record.id)
        creative=inline,
        ad_system_name=env.settings.ad_system_name,
        ad_system_version=__version__,
    )
    return Reply(200, vast.encode(), XML, MARKUP_HEADERS)


async def _buyer_vast(env: Environment, record: AdRequest, ad_request_uuid: str) -> Reply:
    """The inline layer of an ad request a demand partner won: the buyer's VAST with adslot's pixels in it,
    or a wrapper to the URL serving it (vast/buyer.py)."""
    markup = await env.exchange.markup(record.id)
    if markup is None:
        raise ApiError(
            410, "creative_gone", "the winning bid of this ad request is not stored", "ad_request_uuid"
        )
    if markup.adm is not None:
        try:
            vast = with_adslot_pixels(markup.adm, base_url=env.base_url, ad_request_uuid=ad_request_uuid)
        except NotVast as error:
            raise ApiError(
                410, "creative_gone", f"the buyer's markup is not VAST: {error}", "ad_request_uuid"
            ) from error
    elif markup.nurl is not None:
        vast = wrapper_to(
            markup.nurl,
            base_url=env.base_url,
            ad_request_uuid=ad_request_uuid,
            ad_system_name=env.settings.ad_system_name,
            ad_system_version=__version__,
        )
    else:
        raise ApiError(410, "creative_gone", "the winning bid carried no markup", "ad_request_uuid")
    return Reply(200, vast.encode(), XML, MARKUP_HEADERS)


def record_view(record: AdRequest, now: int) -> dict[str, object]:
    """The stored Proof-of-Play record as the API shows it."""
    return {
        "ad_request_uuid": str(record.id),
        "venue_id": record.venue_id,
        "screen_id": record.screen_id,
        "play_time": record.play_time,
        "created_at": record.created_at,
        "ad_request_expired_at": record.expires_at,
        "state": record.state(now),
        "campaign_id": record.campaign_id,
        "source": "direct" if record.campaign_id is not None else "programmatic",
        "creative_id": record.creative_id,
        "events": {
            "impression": record.impression_at,
            "start": record.start_at,
            "firstQuartile": record.first_quartile_at,
            "midpoint": record.midpoint_at,
            "thirdQuartile": record.third_quartile_at,
            "complete": record.complete_at,
        },
        "duplicate_count": record.duplicate_count,
        "late_count": record.late_count,
        "plays": 1 if record.impression_at is not None else 0,
        "impressions": round(record.impressions, 3) if record.impression_at is not None else 0,
        "impressions_per_play": round(record.impressions, 3),
        "settled_at": record.settled_at,
        "settle_reason": record.settle_reason,
    }
