"""Response shapes named in the OpenAPI document (the hot handlers encode these by hand for speed)."""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIType, Schema


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
    firstQuartile: int | None  # the contract's event names
    midpoint: int | None
    thirdQuartile: int | None
    complete: int | None


class AdRequestRecord(msgspec.Struct):
    ad_request_uuid: str
    venue_id: str
    screen_id: str | None
    play_time: int
    created_at: int
    ad_request_expired_at: int
    state: Literal["issued", "played", "expired", "released"]
    campaign_id: int | None
    """null when a demand partner's bid won the slot (`source` programmatic)."""
    source: Literal["direct", "programmatic"]
    """Who filled the slot: one of the account's campaigns, or a demand partner's winning bid."""
    creative_id: int | None
    events: EventTimes
    duplicate_count: int
    late_count: int
    plays: int
    impressions: float
    impressions_per_play: float
    settled_at: int | None
    settle_reason: Literal["released", "expired", "played"] | None


class RecordEnvelope(msgspec.Struct):
    status: int
    data: AdRequestRecord


class ReleaseResult(msgspec.Struct):
    ad_request_uuid: str
    result: Literal["released", "already_released"]


class ReleaseEnvelope(msgspec.Struct):
    status: int
    data: ReleaseResult


class ManifestCreative(msgspec.Struct):
    creative_id: int
    campaign_id: int
    name: str
    media_url: str
    mime_type: str
    width: int
    height: int
    duration_seconds: int
    bitrate_kbps: int | None
    size_bytes: int | None
    sha256: str | None


class Manifest(msgspec.Struct):
    venue_id: str
    screen_id: str | None
    from_: int = msgspec.field(name="from")
    to: int = 0
    creatives: list[ManifestCreative] = msgspec.field(default_factory=list)


class ManifestEnvelope(msgspec.Struct):
    status: int
    data: Manifest


def error_spec(description: str) -> ResponseSpec:
    """An error answer in the OpenAPI document: the error envelope, without made-up examples."""
    return ResponseSpec(ErrorEnvelope, description=description, generate_examples=False)


def _identifier(description: str, example: str, *, nullable: bool = False) -> Schema:
    kind = [OpenAPIType.STRING, OpenAPIType.NULL] if nullable else OpenAPIType.STRING
    return Schema(
        type=kind,
        min_length=1,
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*\S[^\x00-\x1f\x7f]*$",
        description=description,
        examples=[example],
    )


AD_REQUEST_BODY = Schema(
    type=OpenAPIType.OBJECT,
    required=["venue_id", "play_time"],
    properties={
        "venue_id": _identifier("Your identifier of the venue (registered in production)", "venue-42"),
        "screen_id": _identifier("Your identifier of the screen in the venue", "screen-1", nullable=True),
        "play_time": Schema(
            type=OpenAPIType.INTEGER,
            description="UTC epoch seconds, now or in the near future",
            examples=[1767225600],
        ),
    },
)
"""The ad request body, which the handlers decode by hand (see ad_request.parse_body)."""
