"""The hot endpoints as Litestar handlers: the OpenAPI document's source of truth for them, and the path
taken when the fast lane is switched off. Both call the same framework-free handlers."""

from __future__ import annotations

import time
from typing import Any

from litestar import Request, Response, get, head, post
from litestar.datastructures import ResponseHeader
from litestar.openapi.spec import Example
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter

from adslot.api.ad_request import handle_ad_request
from adslot.api.auth import HEADER, authenticate
from adslot.api.docs import AdRequestEnvelope, ErrorEnvelope, EventEnvelope, RecordEnvelope
from adslot.api.proof_of_play import handle_event, handle_inline_vast, record_view
from adslot.api.reply import NO_STORE, Reply, error_reply, json_reply
from adslot.auth.keys import SCOPE_AD_REQUEST
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ids import parse_uuid

ERRORS = {
    400: ResponseSpec(ErrorEnvelope, description="Invalid input; `error.code` and `error.field` say which."),
    401: ResponseSpec(ErrorEnvelope, description="Missing, unknown, revoked or other-environment key."),
    403: ResponseSpec(ErrorEnvelope, description="The key lacks the permission."),
}
PIXEL_ERRORS = {
    400: ResponseSpec(ErrorEnvelope, description="Missing or malformed ad_request_uuid, or an unknown event."),
    404: ResponseSpec(ErrorEnvelope, description="No ad request with this uuid in this environment."),
    410: ResponseSpec(ErrorEnvelope, description="Fired after ad_request_expired_at: kept as late, not counted."),
}
XML_DOC = ResponseSpec(str, media_type="application/xml", description="A VAST 2.0 document.")


def env_of(request: Request[Any, Any, Any]) -> Environment:
    env: Environment = request.app.state.env
    return env


def to_response(reply: Reply) -> Response[bytes]:
    return Response(reply.body, status_code=reply.status, media_type=reply.content_type, headers=dict(reply.headers))


@post(
    ["/api/v1/ad/request", "/ad/request"],
    operation_id=lambda _handler, _method, parts: "createAdRequest" if "api" in parts else "createAdRequestShort",
    summary="Announce an ad slot and get a VAST 2.0 wrapper to play",
    tags=["ad request"],
    status_code=200,
    security=[{"SspKey": []}],
    responses={
        200: ResponseSpec(AdRequestEnvelope, description="An ad fills the slot (format=json; with format=xml "
                          "the body is the VAST document and the uuid and expiry are in headers)."),
        204: ResponseSpec(None, description="Valid request, no ad to return."),
        413: ResponseSpec(ErrorEnvelope, description="Body larger than the limit."),
        415: ResponseSpec(ErrorEnvelope, description="Body is not application/json."),
        422: ResponseSpec(ErrorEnvelope, description="The venue is not registered (production)."),
        **ERRORS,
    },
    response_headers=[
        ResponseHeader(name="X-Ad-Request-Uuid", description="format=xml only", documentation_only=True),
        ResponseHeader(name="X-Ad-Request-Expired-At", description="format=xml only", documentation_only=True),
    ],
)
async def ad_request(
    request: Request[Any, Any, Any],
    format: str | None = Parameter(  # noqa: A002 - the contract's parameter name
        query="format", default=None, description="json (default) or xml", examples=[Example(value="json")]
    ),
    ssp_key: str | None = Parameter(header="Ssp-Key", default=None, description="Account key"),
) -> Response[bytes]:
    env = env_of(request)
    body = await request.body()
    return to_response(
        await handle_ad_request(
            env, key=ssp_key, fmt=format, content_type=request.headers.get("content-type"), body=body
        )
    )


@get(
    "/api/v1/ad/vast/{ad_request_uuid:str}",
    operation_id="getInlineVast",
    summary="The inline VAST 2.0 of an ad request (the wrapper's VASTAdTagURI)",
    tags=["proof of play"],
    responses={
        200: XML_DOC,
        400: ResponseSpec(str, media_type="application/xml", description="Malformed uuid: empty VAST."),
        404: ResponseSpec(str, media_type="application/xml", description="Unknown uuid: empty VAST."),
        410: ResponseSpec(str, media_type="application/xml", description="Expired: empty VAST."),
    },
)
async def inline_vast(request: Request[Any, Any, Any], ad_request_uuid: str) -> Response[bytes]:
    return to_response(await handle_inline_vast(env_of(request), ad_request_uuid))


EVENT_RESPONSES = {200: ResponseSpec(EventEnvelope, description="Recorded (counted, duplicate or echo)."),
                   **PIXEL_ERRORS}


@get(
    "/api/v1/ad/callback/",
    operation_id="fireImpression",
    summary="Impression pixel (the VAST Impression URL)",
    tags=["proof of play"],
    responses=EVENT_RESPONSES,
)
async def impression(
    request: Request[Any, Any, Any],
    ad_request_uuid: str | None = Parameter(query="ad_request_uuid", default=None),
    layer: str | None = Parameter(query="layer", default=None, description="wrapper (default) or inline"),
) -> Response[bytes]:
    return to_response(
        await handle_event(env_of(request), event="impression", ad_request_uuid=ad_request_uuid, layer=layer)
    )


@get(
    "/api/v1/ad/tracking/video/",
    operation_id="fireTrackingEvent",
    summary="Quartile tracking pixel (the VAST Tracking URLs)",
    tags=["proof of play"],
    responses=EVENT_RESPONSES,
)
async def tracking(
    request: Request[Any, Any, Any],
    ad_request_uuid: str | None = Parameter(query="ad_request_uuid", default=None),
    event: str | None = Parameter(
        query="event", default=None, description="start, firstQuartile, midpoint, thirdQuartile or complete"
    ),
    layer: str | None = Parameter(query="layer", default=None, description="wrapper (default) or inline"),
) -> Response[bytes]:
    return to_response(
        await handle_event(env_of(request), event=event, ad_request_uuid=ad_request_uuid, layer=layer)
    )


def _head(reply: Reply) -> Response[None]:
    return Response(None, status_code=reply.status, headers=dict(reply.headers))


@head("/api/v1/ad/callback/", operation_id="fireImpressionHead", tags=["proof of play"],
      summary="Impression pixel fired with HEAD")
async def impression_head(
    request: Request[Any, Any, Any],
    ad_request_uuid: str | None = Parameter(query="ad_request_uuid", default=None),
    layer: str | None = Parameter(query="layer", default=None),
) -> Response[None]:
    return _head(
        await handle_event(env_of(request), event="impression", ad_request_uuid=ad_request_uuid, layer=layer)
    )


@head("/api/v1/ad/tracking/video/", operation_id="fireTrackingEventHead", tags=["proof of play"],
      summary="Tracking pixel fired with HEAD")
async def tracking_head(
    request: Request[Any, Any, Any],
    ad_request_uuid: str | None = Parameter(query="ad_request_uuid", default=None),
    event: str | None = Parameter(query="event", default=None),
    layer: str | None = Parameter(query="layer", default=None),
) -> Response[None]:
    return _head(await handle_event(env_of(request), event=event, ad_request_uuid=ad_request_uuid, layer=layer))


@get(
    "/api/v1/ad/request/{ad_request_uuid:str}",
    operation_id="getAdRequest",
    summary="The stored Proof-of-Play record of one of your ad requests",
    tags=["ad request"],
    security=[{"SspKey": []}],
    responses={
        200: ResponseSpec(RecordEnvelope, description="The record."),
        404: ResponseSpec(ErrorEnvelope, description="No such ad request for this account."),
        **ERRORS,
    },
)
async def get_record(
    request: Request[Any, Any, Any],
    ad_request_uuid: str,
    ssp_key: str | None = Parameter(header="Ssp-Key", default=None, description="Account key"),
) -> Response[bytes]:
    env = env_of(request)
    try:
        account = authenticate(env, ssp_key, SCOPE_AD_REQUEST)
        parsed = parse_uuid(ad_request_uuid)
        if parsed is None:
            raise ApiError(400, "malformed_ad_request_uuid", "not a UUID", "ad_request_uuid")
        record = await env.store.get(parsed)
        if record is None or record.account_id != account.account_id:
            raise ApiError(404, "unknown_ad_request", "no ad request with this uuid for this key's account",
                           "ad_request_uuid")
    except ApiError as error:
        return to_response(error_reply(error, NO_STORE))
    return to_response(json_reply(200, record_view(record, int(time.time())), NO_STORE))


HOT_ROUTES = [ad_request, inline_vast, impression, tracking, impression_head, tracking_head, get_record]
__all__ = ["HEADER", "HOT_ROUTES"]
