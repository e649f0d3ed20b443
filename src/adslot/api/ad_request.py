"""POST /api/v1/ad/request: authenticate, validate, decide, record durably, answer a VAST wrapper."""

from __future__ import annotations

import time
from dataclasses import dataclass

from adslot import __version__
from adslot.api.auth import authenticate, known_key
from adslot.api.json_body import decode_json
from adslot.api.rate_limited import ad_requests_limited
from adslot.api.reply import NO_STORE, XML, Reply, error_reply, json_reply
from adslot.auth.keys import SCOPE_AD_REQUEST, check_screen
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ids import uuid7
from adslot.ledger.records import NoFill
from adslot.sandbox.seed import NO_FILL_VENUE
from adslot.serving.fill import SlotRequest, Timing, fill_slot
from adslot.vast.wrapper import build_wrapper

FORMATS = ("json", "xml")
_CONTROL = frozenset(chr(c) for c in (*range(0x20), 0x7F))


@dataclass(frozen=True, slots=True)
class AdRequestBody:
    venue_id: str
    screen_id: str | None
    play_time: int


def _identifier(body: dict[str, object], name: str, required: bool, max_length: int) -> str | None:
    if name not in body or (not required and body[name] is None):
        if required:
            raise ApiError(400, "missing_field", f"{name} is required", name)
        return None
    value = body[name]
    if not isinstance(value, str):
        raise ApiError(400, "invalid_type", f"{name} must be a string", name)
    if not value.strip():
        raise ApiError(400, "empty_value", f"{name} must not be empty", name)
    if len(value) > max_length:
        raise ApiError(400, "too_long", f"{name} must be at most {max_length} characters", name)
    if not _CONTROL.isdisjoint(value):
        raise ApiError(400, "invalid_characters", f"{name} must not contain control characters", name)
    return value


def parse_body(raw: bytes, env: Environment, now: int) -> AdRequestBody:
    """Turn the raw body into a valid ad request or raise the ApiError that names what is wrong."""
    settings = env.settings
    body = decode_json(raw)
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object", "body")
    venue_id = _identifier(body, "venue_id", True, settings.max_id_length)
    screen_id = _identifier(body, "screen_id", False, settings.max_id_length)
    if "play_time" not in body:
        raise ApiError(400, "missing_field", "play_time is required", "play_time")
    play_time = body["play_time"]
    if type(play_time) is not int:
        raise ApiError(400, "invalid_type", "play_time must be an integer (UTC epoch seconds)", "play_time")
    earliest = now - settings.play_time_skew_seconds
    latest = now + settings.play_time_max_lead_seconds
    if play_time < earliest:
        raise ApiError(
            400,
            "play_time_in_past",
            f"play_time is {now - play_time} s in the past; "
            f"at most {settings.play_time_skew_seconds} s of clock skew is tolerated",
            "play_time",
        )
    if play_time > latest:
        raise ApiError(
            400,
            "play_time_too_far",
            f"play_time may be at most {settings.play_time_max_lead_seconds} s ahead",
            "play_time",
        )
    assert venue_id is not None
    return AdRequestBody(venue_id, screen_id, play_time)


def check_content_type(content_type: str | None) -> None:
    media, _, params = (content_type or "").partition(";")
    if media.strip().lower() != "application/json":
        raise ApiError(
            415, "unsupported_media_type", "send the body as Content-Type: application/json", "Content-Type"
        )
    charset = params.strip().lower()
    if charset and charset.replace(" ", "") not in ("charset=utf-8", 'charset="utf-8"'):
        raise ApiError(415, "unsupported_media_type", "the body must be UTF-8 JSON", "Content-Type")


def check_content_encoding(content_encoding: str | None) -> None:
    """Bodies are read as sent: an encoded one (gzip, say) is refused by name rather than read as garbage."""
    if content_encoding is not None and content_encoding.strip().lower() not in ("", "identity"):
        raise ApiError(
            415,
            "unsupported_content_encoding",
            f"send the body without Content-Encoding (got {content_encoding.strip()[:40]!r})",
            "Content-Encoding",
        )


def check_format(fmt: str | None) -> str:
    if fmt is None:
        return "json"
    if fmt not in FORMATS:
        raise ApiError(400, "invalid_format", "format must be json or xml", "format")
    return fmt


async def handle_ad_request(
    env: Environment,
    *,
    key: str | None,
    fmt: str | None,
    content_type: str | None,
    body: bytes,
    content_encoding: str | None = None,
    source: int = 0,
) -> Reply:
    """`source`: the client's network (api/sources.py), stored with the ad request for the invalid-traffic
    rules."""
    try:
        return await _ad_request(
            env,
            key=key,
            fmt=fmt,
            content_type=content_type,
            content_encoding=content_encoding,
            body=body,
            source=source,
        )
    except ApiError as error:
        return error_reply(error, NO_STORE)


async def _ad_request(
    env: Environment,
    *,
    key: str | None,
    fmt: str | None,
    content_type: str | None,
    content_encoding: str | None,
    body: bytes,
    source: int = 0,
) -> Reply:
    account = known_key(env, key, SCOPE_AD_REQUEST) or await authenticate(env, key, SCOPE_AD_REQUEST)
    # The key's rate limit (limits/keys.py): 0 goes on, > 0 is a Retry-After, -1 asks the shared bucket.
    if limited := env.ad_request_limit.check(account.key_id):
        if limited < 0:
            limited = await env.ad_request_limit.wait(account.key_id)
        if limited:
            return ad_requests_limited(limited)
    fmt = check_format(fmt)
    check_content_type(content_type)
    check_content_encoding(content_encoding)
    if len(body) > env.settings.max_body_bytes:
        raise ApiError(
            413, "payload_too_large", f"the body may be at most {env.settings.max_body_bytes} bytes", "body"
        )
    now = int(time.time())
    request = parse_body(body, env, now)
    if account.screen is not None:  # a player-link key: its own screen only, refused before anything counts
        check_screen(account, request.venue_id, request.screen_id)
    catalog = env.catalog
    assert catalog is not None
    if env.name == "sandbox":
        if request.venue_id == NO_FILL_VENUE:
            # Counted as production counts an ad request it cannot fill: the dashboard's requests include it.
            no_fill = NoFill(request.venue_id, request.screen_id, request.play_time, account.key_id)
            await env.writer.submit(no_fill)
            return Reply(204, headers=[NO_STORE])
    elif request.venue_id not in catalog.venues:
        raise ApiError(422, "unknown_venue", f"venue {request.venue_id!r} is not registered", "venue_id")
    timing = Timing() if catalog.partners else None  # with no partner, nothing to tell and nothing timed
    filled = await fill_slot(
        catalog,
        env.delivery_cache,
        env.writer,
        env.rng,
        SlotRequest(
            account.account_id,
            request.venue_id,
            request.screen_id,
            request.play_time,
            account.key_id,
            source or None,
        ),
        now=now,
        play_window_seconds=env.settings.play_window_seconds,
        new_id=uuid7,
        exchange=env.exchange,
        timing=timing,
    )
    told = timing.header() if timing is not None else None
    if filled is None:
        return Reply(204, headers=[NO_STORE, told] if told else [NO_STORE])
    record = filled[0]
    uuid_text = str(record.id)
    vast = build_wrapper(
        base_url=env.base_url,
        ad_request_uuid=uuid_text,
        venue_id=record.venue_id,
        screen_id=record.screen_id,
        ad_system_name=env.settings.ad_system_name,
        ad_system_version=__version__,
        schema_strict=env.settings.schema_strict_extension,
    )
    if fmt == "xml":
        return Reply(
            200,
            vast.encode(),
            XML,
            [
                NO_STORE,
                ("x-ad-request-uuid", uuid_text),
                ("x-ad-request-expired-at", str(record.expires_at)),
                *([told] if told else []),
            ],
        )
    headers = (NO_STORE, told) if told else (NO_STORE,)
    return json_reply(
        200,
        {
            "vast_tag": vast,
            "ad_request_uuid": uuid_text,
            "ad_request_expired_at": record.expires_at,
            "venue_id": record.venue_id,
            "screen_id": record.screen_id,
        },
        *headers,
    )
