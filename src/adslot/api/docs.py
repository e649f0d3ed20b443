"""Response shapes named in the OpenAPI document (the hot handlers encode these by hand for speed)."""

from __future__ import annotations

from typing import Literal

import msgspec


class AdRequestIn(msgspec.Struct):
    venue_id: str
    play_time: int
    screen_id: str | None = None


class AdRequestResult(msgspec.Struct):
    vast_tag: str
    ad_request_uuid: str
    ad_request_expired_at: int
    venue_id: str
    screen_id: str | None


class AdRequestEnvelope(msgspec.Struct):
    status: int
    data: AdRequestResult


class ErrorBody(msgspec.Struct):
    code: str
    message: str
    field: str | None


class ErrorEnvelope(msgspec.Struct):
    status: int
    error: ErrorBody


class EventResult(msgspec.Struct):
    ad_request_uuid: str
    event: str
    result: Literal["counted", "duplicate", "echo"]


class EventEnvelope(msgspec.Struct):
    status: int
    data: EventResult


class EventTimes(msgspec.Struct):
    impression: int | None
    start: int | None
    firstQuartile: int | None  # noqa: N815 - the contract's event names
    midpoint: int | None
    thirdQuartile: int | None  # noqa: N815
    complete: int | None


class AdRequestRecord(msgspec.Struct):
    ad_request_uuid: str
    venue_id: str
    screen_id: str | None
    play_time: int
    created_at: int
    ad_request_expired_at: int
    state: Literal["issued", "played", "expired"]
    campaign_id: int
    creative_id: int
    events: EventTimes
    duplicate_count: int
    late_count: int


class RecordEnvelope(msgspec.Struct):
    status: int
    data: AdRequestRecord


AD_REQUEST_BODY_SCHEMA: dict[str, object] = {
    "type": "object",
    "required": ["venue_id", "play_time"],
    "properties": {
        "venue_id": {"type": "string", "minLength": 1, "maxLength": 128, "example": "venue-42"},
        "screen_id": {"type": ["string", "null"], "minLength": 1, "maxLength": 128, "example": "screen-1"},
        "play_time": {"type": "integer", "description": "UTC epoch seconds, now or in the near future"},
    },
}
