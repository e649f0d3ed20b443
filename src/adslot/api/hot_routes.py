"""The hot endpoints as Litestar handlers: the OpenAPI document's source of truth for them, and the path
taken when the fast lane is switched off. Both call the same framework-free handlers.

The handlers read the body, the key and the query by hand (as the fast lane does), so what Litestar cannot
infer from their signatures (the JSON body, the XML answer, the parameters the contract requires, the bodiless
HEAD answers) is added to their operations by `documented` below.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Request, Response, get, head, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Parameter,
    RequestBody,
    Schema,
)
from litestar.params import HeaderParameter, PathParameter, QueryParameter

from adslot import routes
from adslot.api.ad_request import FORMATS, handle_ad_request
from adslot.api.adapters import env_of, reply_response
from adslot.api.auth import HEADER, authenticate
from adslot.api.docs import (
    AD_REQUEST_BODY,
    AdRequestEnvelope,
    EventEnvelope,
    ManifestEnvelope,
    RecordEnvelope,
    ReleaseEnvelope,
    error_spec,
)
from adslot.api.lease import handle_manifest, handle_release
from adslot.api.proof_of_play import LAYERS, handle_event, handle_inline_vast, record_view
from adslot.api.reply import NO_STORE, Reply, error_reply, json_reply
from adslot.api.sources import sources_for
from adslot.auth.keys import SCOPE_AD_REQUEST
from adslot.edge.clients import connection_of
from adslot.errors import ApiError
from adslot.ids import parse_uuid
from adslot.vast.urls import EVENTS, QUARTILE_EVENTS

ERRORS = {
    400: error_spec("Invalid input; `error.code` and `error.field` say which."),
    401: error_spec("Missing, unknown, revoked or other-environment key."),
    403: error_spec("The key lacks the permission."),
}
SCREEN_ERRORS = {
    **ERRORS,
    403: error_spec(
        "`insufficient_scope`: the key lacks the `ad_request` permission. `key_not_for_screen`: a "
        "player-link key asked for another venue or screen than its own, or for none (`error.field` names "
        "which)."
    ),
}
"""The keyed answers that check a player-link key's screen (auth.keys.check_screen)."""
OWN_AD_REQUEST_ERRORS = {
    **ERRORS,
    403: error_spec(
        "`insufficient_scope`: the key lacks the `ad_request` permission. `key_not_for_screen`: a "
        "player-link key named an ad request of its account issued for another venue or screen "
        "(`error.field` names which: `ad_request_uuid`, or `fires[i].ad_request_uuid` in a batch); "
        "nothing is changed."
    ),
}
"""The keyed answers that act on an existing ad request, checked against a player-link key's screen
(auth.keys.check_ad_request_screen)."""
PIXEL_ERRORS = {
    400: error_spec("Missing or malformed ad_request_uuid, or an unknown event or layer."),
    404: error_spec("No ad request with this uuid in this environment."),
    410: error_spec("Fired after ad_request_expired_at: kept as late, not counted."),
}
XML = "application/xml"


XML_HEADERS = {
    "X-Ad-Request-Uuid": OpenAPIHeader(
        description="format=xml only: the ad request's uuid",
        schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.UUID),
    ),
    "X-Ad-Request-Expired-At": OpenAPIHeader(
        description="format=xml only: ad_request_expired_at, UTC epoch seconds",
        schema=Schema(type=OpenAPIType.INTEGER),
    ),
}
VAST_ERROR_HEADERS = {
    "X-Adslot-Error": OpenAPIHeader(
        description="The error code, e.g. unknown_ad_request",
        schema=Schema(type=OpenAPIType.STRING),
        required=True,
    )
}


def vast_spec(description: str) -> ResponseSpec:
    return ResponseSpec(str, media_type=XML, description=description, generate_examples=False)


def documented(
    *,
    request_body: RequestBody | None = None,
    required: Sequence[str] = (),
    alternatives: dict[str, dict[str, OpenAPIMediaType]] | None = None,
    headers: dict[str, dict[str, OpenAPIHeader]] | None = None,
    bodiless: bool = False,
) -> type[Operation]:
    """An Operation class that completes what the handler's signature cannot tell Litestar.

    request_body: the body the handler reads by hand; required: parameters the handler checks itself (it
    answers 400 without them); alternatives: more media types per status; headers: response headers per
    status; bodiless: HEAD answers, which carry no body.
    """

    @dataclass
    class DocumentedOperation(Operation):
        def __post_init__(self) -> None:
            if request_body is not None:
                self.request_body = request_body
            for parameter in self.parameters or ():
                if isinstance(parameter, Parameter) and parameter.name in required:
                    parameter.required = True
            for status, content in (alternatives or {}).items():
                response = (self.responses or {}).get(status)
                if isinstance(response, OpenAPIResponse):
                    response.content = {**(response.content or {}), **content}
            for status, named in (headers or {}).items():
                response = (self.responses or {}).get(status)
                if isinstance(response, OpenAPIResponse):
                    response.headers = {**(response.headers or {}), **named}
            if bodiless:
                for response in (self.responses or {}).values():
                    if isinstance(response, OpenAPIResponse):
                        response.content = None

    return DocumentedOperation


def query(description: str, *, enum: Sequence[str] | None = None, uuid: bool = False) -> QueryParameter:
    """A query parameter the handler takes as `str | None` (and validates itself), documented as the plain
    string the contract expects: a query string has no null."""
    extra: dict[str, Any] = {"one_of": None, "type": OpenAPIType.STRING}
    if enum is not None:
        extra["enum"] = list(enum)
    if uuid:
        extra["format"] = OpenAPIFormat.UUID
    return QueryParameter(description=description, schema_extra=extra)


# The key is documented once, as the SspKey security scheme of each operation; a header parameter as well
# would have Swagger UI ask for it twice.
SspKey = Annotated[str | None, HeaderParameter(name="Ssp-Key", include_in_schema=False)]
AdRequestUuidQuery = Annotated[
    str | None, query("The ad request's uuid, as in the URLs of its VAST wrapper", uuid=True)
]
LayerQuery = Annotated[str | None, query("Which VAST layer fired: wrapper (default) or inline", enum=LAYERS)]
AdRequestUuidPath = Annotated[
    str, PathParameter(description="The ad request's uuid", schema_extra={"format": OpenAPIFormat.UUID})
]


@post(
    [routes.AD_REQUEST, routes.AD_REQUEST_SHORT],
    operation_id=lambda _handler, _method, parts: (
        "createAdRequest" if "api" in parts else "createAdRequestShort"
    ),
    summary="Announce an ad slot and get a VAST 2.0 wrapper to play",
    tags=["ad request"],
    status_code=200,
    security=[{"SspKey": []}],
    responses={
        200: ResponseSpec(
            AdRequestEnvelope,
            generate_examples=False,
            description="An ad fills the slot. With format=json (the default) the JSON envelope; with "
            "format=xml the body is the VAST document itself, and the uuid and expiry are in the "
            "X-Ad-Request-* headers.",
        ),
        204: ResponseSpec(None, description="Valid request, no ad to return: no body."),
        413: error_spec("Body larger than the limit."),
        415: error_spec("Body is not UTF-8 application/json, or is sent with a Content-Encoding."),
        422: error_spec("The venue is not registered (production)."),
        **SCREEN_ERRORS,
    },
    operation_class=documented(
        request_body=RequestBody(
            content={"application/json": OpenAPIMediaType(schema=AD_REQUEST_BODY)}, required=True
        ),
        alternatives={
            "200": {
                XML: OpenAPIMediaType(
                    schema=Schema(type=OpenAPIType.STRING, description="The VAST 2.0 wrapper")
                )
            }
        },
        headers={"200": XML_HEADERS},
    ),
)
async def ad_request(
    request: Request[Any, Any, Any],
    format: Annotated[  # the contract's parameter name
        str | None,
        QueryParameter(
            description="json (default) or xml",
            schema_extra={
                "one_of": None,
                "type": OpenAPIType.STRING,
                "enum": list(FORMATS),
                "default": "json",
            },
        ),
    ] = None,
    ssp_key: SspKey = None,
) -> Response[bytes]:
    env = env_of(request)
    started = time.perf_counter()  # timed from here on this lane (telemetry/metrics.py)
    body = await request.body()
    reply = await handle_ad_request(
        env,
        key=ssp_key,
        fmt=format,
        content_type=request.headers.get("content-type"),
        content_encoding=request.headers.get("content-encoding"),
        body=body,
        source=source_of(request),
    )
    return reply_response(env.meters.ad_request.answered(started, reply))


@get(
    routes.VAST + "{ad_request_uuid:str}",
    operation_id="getInlineVast",
    summary="The inline VAST 2.0 of an ad request (the wrapper's VASTAdTagURI)",
    description="Players parse XML, so failures answer an empty VAST 2.0 document and the error code in the "
    "X-Adslot-Error header.",
    tags=["proof of play"],
    responses={
        200: vast_spec("A VAST 2.0 document."),
        400: vast_spec("Malformed uuid: empty VAST."),
        404: vast_spec("Unknown uuid: empty VAST."),
        410: vast_spec("Expired, or its creative was removed: empty VAST."),
    },
    operation_class=documented(headers={status: VAST_ERROR_HEADERS for status in ("400", "404", "410")}),
)
async def inline_vast(request: Request[Any, Any, Any], ad_request_uuid: AdRequestUuidPath) -> Response[bytes]:
    started, env = time.perf_counter(), env_of(request)
    return reply_response(env.meters.vast.answered(started, await handle_inline_vast(env, ad_request_uuid)))


EVENT_RESPONSES = {
    200: ResponseSpec(
        EventEnvelope, generate_examples=False, description="Recorded (counted, duplicate or echo)."
    ),
    **PIXEL_ERRORS,
}
HEAD_RESPONSES = {
    200: ResponseSpec(None, description="Recorded, as the GET would answer, without a body."),
    400: ResponseSpec(
        None, description="Missing or malformed ad_request_uuid, or an unknown event or layer."
    ),
    404: ResponseSpec(None, description="No ad request with this uuid in this environment."),
    410: ResponseSpec(None, description="Fired after ad_request_expired_at: kept as late, not counted."),
}
EVENT_QUERY = query("The quartile event", enum=QUARTILE_EVENTS)
PIXEL_DOC = documented(required=("ad_request_uuid",))
TRACKING_DOC = documented(required=("ad_request_uuid", "event"))


@get(
    routes.IMPRESSION,
    operation_id="fireImpression",
    summary="Impression pixel (the VAST Impression URL)",
    description=f"The VAST carries it with a trailing slash (`{routes.IMPRESSION}`); both forms are served.",
    tags=["proof of play"],
    responses=EVENT_RESPONSES,
    operation_class=PIXEL_DOC,
)
async def impression(
    request: Request[Any, Any, Any], ad_request_uuid: AdRequestUuidQuery = None, layer: LayerQuery = None
) -> Response[bytes]:
    return reply_response(await _fired(request, "impression", ad_request_uuid, layer))


@get(
    routes.TRACKING,
    operation_id="fireTrackingEvent",
    summary="Quartile tracking pixel (the VAST Tracking URLs)",
    description=f"The VAST carries it with a trailing slash (`{routes.TRACKING}`); both forms are served.",
    tags=["proof of play"],
    responses=EVENT_RESPONSES,
    operation_class=TRACKING_DOC,
)
async def tracking(
    request: Request[Any, Any, Any],
    ad_request_uuid: AdRequestUuidQuery = None,
    event: Annotated[str | None, EVENT_QUERY] = None,
    layer: LayerQuery = None,
) -> Response[bytes]:
    return reply_response(await _fired(request, event, ad_request_uuid, layer, QUARTILE_EVENTS))


async def _fired(
    request: Request[Any, Any, Any],
    event: str | None,
    ad_request_uuid: str | None,
    layer: str | None,
    events: tuple[str, ...] | None = None,
) -> Reply:
    """A pixel's answer on this lane, GET or HEAD, metered as the hot lane meters it: the impression's
    (`events` None) or a quartile's (`events` the quartiles the tracking URL takes)."""
    started, env = time.perf_counter(), env_of(request)
    meter = env.meters.impression if events is None else env.meters.tracking
    reply = await handle_event(
        env,
        event=event,
        ad_request_uuid=ad_request_uuid,
        layer=layer,
        events=events or EVENTS,
        source=source_of(request),
    )
    return meter.answered(started, reply)


def source_of(request: Request[Any, Any, Any]) -> int:
    """The client's network (api/sources.py), as the hot lane finds it: from the connection's own peer
    (not `request.client`, which uvicorn rewrites from a loopback peer's X-Forwarded-For)."""
    return sources_for(env_of(request).settings).of(
        connection_of(request.scope), request.headers.get("x-forwarded-for")
    )


def _head(reply: Reply) -> Response[None]:
    return Response(None, status_code=reply.status, headers=dict(reply.headers))


@head(
    routes.IMPRESSION,
    operation_id="fireImpressionHead",
    tags=["proof of play"],
    summary="Impression pixel fired with HEAD",
    responses=HEAD_RESPONSES,
    operation_class=documented(required=("ad_request_uuid",), bodiless=True),
)
async def impression_head(
    request: Request[Any, Any, Any], ad_request_uuid: AdRequestUuidQuery = None, layer: LayerQuery = None
) -> Response[None]:
    return _head(await _fired(request, "impression", ad_request_uuid, layer))


@head(
    routes.TRACKING,
    operation_id="fireTrackingEventHead",
    tags=["proof of play"],
    summary="Tracking pixel fired with HEAD",
    responses=HEAD_RESPONSES,
    operation_class=documented(required=("ad_request_uuid", "event"), bodiless=True),
)
async def tracking_head(
    request: Request[Any, Any, Any],
    ad_request_uuid: AdRequestUuidQuery = None,
    event: Annotated[str | None, EVENT_QUERY] = None,
    layer: LayerQuery = None,
) -> Response[None]:
    return _head(await _fired(request, event, ad_request_uuid, layer, QUARTILE_EVENTS))


@get(
    routes.AD_REQUEST + "/{ad_request_uuid:str}",
    operation_id="getAdRequest",
    summary="The stored Proof-of-Play record of one of your ad requests",
    tags=["ad request"],
    security=[{"SspKey": []}],
    responses={
        200: ResponseSpec(RecordEnvelope, generate_examples=False, description="The record."),
        404: error_spec("No such ad request for this account."),
        **ERRORS,
    },
)
async def get_record(
    request: Request[Any, Any, Any], ad_request_uuid: AdRequestUuidPath, ssp_key: SspKey = None
) -> Response[bytes]:
    env = env_of(request)
    try:
        account = await authenticate(env, ssp_key, SCOPE_AD_REQUEST)
        parsed = parse_uuid(ad_request_uuid)
        if parsed is None:
            raise ApiError(400, "malformed_ad_request_uuid", "not a UUID", "ad_request_uuid")
        record = await env.lookup(parsed)
        if (
            record is None
            or record.account_id != account.account_id
            or (account.screen is not None and (record.venue_id, record.screen_id) != account.screen)
        ):  # a player-link key reads its own screen's records only
            raise ApiError(
                404,
                "unknown_ad_request",
                "no ad request with this uuid for this key's account",
                "ad_request_uuid",
            )
    except ApiError as error:
        return reply_response(error_reply(error, NO_STORE))
    return reply_response(json_reply(200, record_view(record, int(time.time())), NO_STORE))


@post(
    routes.AD_REQUEST + "/{ad_request_uuid:str}/release",
    operation_id="releaseAdRequest",
    summary="Give an unplayed ad request back, freeing its reservation at once",
    description=(
        "For a player that will not play the ad (screen off, content override). The slot's reservations "
        "against caps, pacing and frequency are returned at once, so the budget can be sold elsewhere; its "
        "VAST and pixels then answer 410 ad_request_released. Releasing twice answers already_released."
    ),
    tags=["ad request"],
    security=[{"SspKey": []}],
    status_code=200,
    responses={
        200: ResponseSpec(ReleaseEnvelope, generate_examples=False, description="Released."),
        404: error_spec("No such ad request for this account."),
        409: error_spec("ad_request_played: a played ad request cannot be given back."),
        410: error_spec("ad_request_expired: it expired unplayed; its reservation is already free."),
        **OWN_AD_REQUEST_ERRORS,
    },
)
async def release(
    request: Request[Any, Any, Any], ad_request_uuid: AdRequestUuidPath, ssp_key: SspKey = None
) -> Response[bytes]:
    return reply_response(await handle_release(env_of(request), key=ssp_key, ad_request_uuid=ad_request_uuid))


@get(
    "/api/v1/ad/manifest",
    operation_id="getCreativeManifest",
    summary="Every creative that may play on a screen in the next hours, to download ahead",
    description=(
        "Lists each creative of the campaigns whose flight, dayparts (venue-local), targeting and screen fit "
        "allow it at this venue and screen within the window, with its URL, size, duration and SHA-256. "
        "Caps and pacing are not applied: a listed creative may not play, an unlisted one never does."
    ),
    tags=["ad request"],
    security=[{"SspKey": []}],
    responses={
        200: ResponseSpec(ManifestEnvelope, generate_examples=False, description="The manifest."),
        422: error_spec("unknown_venue: the venue is not registered (production)."),
        **SCREEN_ERRORS,
    },
    operation_class=documented(required=("venue_id",)),
)
async def manifest(
    request: Request[Any, Any, Any],
    venue_id: Annotated[str | None, query("Your identifier of the venue")] = None,
    screen_id: Annotated[str | None, query("Your identifier of the screen (its fit rules apply)")] = None,
    hours: Annotated[str | None, query("The window, in hours from now: 1 to 72, default 24")] = None,
    ssp_key: SspKey = None,
) -> Response[bytes]:
    return reply_response(
        await handle_manifest(
            env_of(request), key=ssp_key, venue_id=venue_id, screen_id=screen_id, hours=hours
        )
    )


HOT_ROUTES = [
    ad_request,
    inline_vast,
    impression,
    tracking,
    impression_head,
    tracking_head,
    get_record,
    release,
    manifest,
]
__all__ = ["HEADER", "HOT_ROUTES"]
