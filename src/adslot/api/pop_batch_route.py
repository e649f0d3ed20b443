"""The batch Proof-of-Play endpoint as a Litestar handler (api/pop_batch.py does the work), and its
OpenAPI description. Not on the hot lane: an offline player uploads rarely, up to 1,000 fires at a time."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from litestar import Request, Response, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIFormat, OpenAPIMediaType, OpenAPIType, RequestBody, Schema

from adslot.api.adapters import env_of, reply_response
from adslot.api.docs import error_spec
from adslot.api.hot_routes import OWN_AD_REQUEST_ERRORS, SspKey, documented, source_of
from adslot.api.pop_batch import MAX_FIRES, PATH, handle_pop_batch
from adslot.api.proof_of_play import LAYERS
from adslot.vast.urls import EVENTS


class BatchResult(msgspec.Struct, omit_defaults=True):
    index: int
    ad_request_uuid: str
    event: str
    layer: str
    result: Literal["counted", "duplicate", "echo", "late", "released", "unknown", "invalid"]
    reason: str | None = None
    """Why an item is late or invalid."""


class BatchCounts(msgspec.Struct):
    counted: int
    duplicate: int
    echo: int
    late: int
    released: int
    unknown: int
    invalid: int


class BatchAnswer(msgspec.Struct):
    results: list[BatchResult]
    counts: BatchCounts


class BatchEnvelope(msgspec.Struct):
    status: int
    data: BatchAnswer


BATCH_BODY = Schema(
    type=OpenAPIType.OBJECT,
    required=["fires"],
    properties={
        "fires": Schema(
            type=OpenAPIType.ARRAY,
            min_items=1,
            max_items=MAX_FIRES,
            items=Schema(
                type=OpenAPIType.OBJECT,
                required=["ad_request_uuid", "event", "played_at"],
                properties={
                    "ad_request_uuid": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.UUID),
                    "event": Schema(type=OpenAPIType.STRING, enum=list(EVENTS)),
                    "played_at": Schema(
                        type=OpenAPIType.INTEGER, description="When it was played, UTC epoch seconds"
                    ),
                    "layer": Schema(
                        type=OpenAPIType.STRING, enum=list(LAYERS), description="Default wrapper"
                    ),
                },
            ),
        )
    },
)


@post(
    PATH,
    operation_id="uploadProofOfPlayBatch",
    summary="An offline player's fires, each with the time it was played",
    description=(
        f"Up to {MAX_FIRES} fires of your ad requests, each answered in order: counted, duplicate, echo, "
        "late, released, unknown or invalid. A fire counts when played_at lies within its ad request's play "
        "window and it arrives within the upload window. Sending a batch again counts nothing twice. One "
        "malformed fire refuses the whole batch (its index in error.field), and nothing is stored; so does, "
        "for a player-link key, a fire of another screen's ad request (403 key_not_for_screen)."
    ),
    tags=["proof of play"],
    security=[{"SspKey": []}],
    status_code=200,
    responses={
        200: ResponseSpec(
            BatchEnvelope, generate_examples=False, description="Each fire's answer, in order."
        ),
        413: error_spec("More than 1,000 fires (batch_too_large), or a body past 1 MiB."),
        415: error_spec("Body is not UTF-8 application/json, or is sent with a Content-Encoding."),
        **OWN_AD_REQUEST_ERRORS,
    },
    operation_class=documented(
        request_body=RequestBody(
            content={"application/json": OpenAPIMediaType(schema=BATCH_BODY)}, required=True
        )
    ),
)
async def pop_batch(request: Request[Any, Any, Any], ssp_key: SspKey = None) -> Response[bytes]:
    return reply_response(
        await handle_pop_batch(
            env_of(request),
            key=ssp_key,
            content_type=request.headers.get("content-type"),
            content_encoding=request.headers.get("content-encoding"),
            body=await request.body(),
            source=source_of(request),
        )
    )
