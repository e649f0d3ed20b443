"""The management API (admin permission): advertisers, campaigns, creatives, venues, screens and demand
partners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import sqlalchemy as sa
from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, RequestBody, Schema
from litestar.params import JSONBody, PathParameter, QueryParameter

from adslot import audit
from adslot.api.adapters import env_of, reply_response
from adslot.api.auth import authenticate
from adslot.api.docs import error_spec
from adslot.api.hot_routes import documented, vast_spec
from adslot.api.reply import MARKUP_HEADERS, XML, Reply
from adslot.api.strict_body import strict_body
from adslot.auth.keys import SCOPE_ADMIN, KeyRecord
from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import (
    Advertiser,
    AdvertiserIn,
    Campaign,
    CampaignIn,
    CampaignPatch,
    Creative,
    CreativeIn,
    CreativePatch,
)
from adslot.demand import creatives_repository as creatives_repo
from adslot.demand import repository as demand_repo
from adslot.demand.creatives import CreativeStatus, DemandCreative
from adslot.demand.partners import Partner, PartnerIn, PartnerPatch
from adslot.environment import Environment
from adslot.fields import MAX_ID
from adslot.inventory import repository as inventory_repo
from adslot.inventory.csv_import import MAX_CSV_BYTES, MAX_CSV_ROWS, check_csv_content_type, import_venues
from adslot.inventory.schemas import (
    ImportResult,
    Screen,
    ScreenIn,
    ScreenPatch,
    Venue,
    VenueIn,
    VenuePatch,
)


async def admin_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    env: Environment = connection.app.state.env
    connection.state.key = await authenticate(env, connection.headers.get("ssp-key"), SCOPE_ADMIN)


async def change(
    request: Request[Any, Any, Any],
    action: str,
    target: str,
    fn: Callable[[sa.Connection], T],
    before: Callable[[sa.Connection], Any] | None = None,
) -> T:
    """A management write with its audit entry (the key's id as the actor), in one transaction."""
    key: KeyRecord = request.state.key
    return await env_of(request).run_sync(
        audit.audited(f"api key {key.key_id}", action, target, fn, before=before), write=True
    )


T = TypeVar("T")
ERRORS = {
    400: error_spec("Invalid input."),
    401: error_spec("Missing or invalid key."),
    403: error_spec("The key lacks the admin permission."),
}
WRITE_ERRORS = {
    **ERRORS,
    404: error_spec("Not found."),
    409: error_spec("Already exists."),
    422: error_spec("Refers to something unknown or inconsistent."),
    415: error_spec("The body must be `Content-Type: application/json` (UTF-8), with no Content-Encoding."),
}
READ_ERRORS = {**ERRORS, 404: error_spec("Not found.")}
# The key is checked by admin_guard, before any parameter is read; the SspKey security scheme documents it.
# Ids above MAX_ID (fields.py) name nothing.
CampaignId = Annotated[int, PathParameter(description="The campaign's id", ge=1, le=MAX_ID)]
CreativeId = Annotated[int, PathParameter(description="The creative's id", ge=1, le=MAX_ID)]
VenueId = Annotated[str, PathParameter(description="Your identifier of the venue")]
ScreenId = Annotated[str, PathParameter(description="Your identifier of the screen in the venue")]
PartnerName = Annotated[str, PathParameter(description="The demand partner's name (a slug)")]
IMPORT_ERRORS = {
    **ERRORS,
    400: error_spec(
        "Bad CSV: `error.code` is invalid_csv, `error.field` names the first problem (`line N: column`) and "
        "`error.details` lists every problem found (line, column, code, message). Nothing is stored."
    ),
    413: error_spec(f"Body larger than {MAX_CSV_BYTES} bytes, or more than {MAX_CSV_ROWS} rows."),
    415: error_spec("The body must be `Content-Type: text/csv` (UTF-8)."),
}
CSV_COLUMNS = (
    "venue_id, name, timezone, latitude, longitude, venue_type, tags (separated by `;`), country, region, "
    "city, impressions_per_play, hours (opening hours: the JSON of POST /api/v1/venues/{venue_id}/hours, "
    "or `always`); optionally screen_id, screen_name, width, height, orientation, mime_types "
    "(separated by `;`), max_duration_seconds"
)
CSV_BODY = RequestBody(
    required=True,
    description=(
        "UTF-8 CSV with a header row naming its columns, any of: "
        f"{CSV_COLUMNS}. One row per screen; a venue's columns may be repeated or left blank on its further "
        "rows. Venues and screens are created or updated (a blank cell leaves an existing value as it is), "
        "all or nothing."
    ),
    content={
        "text/csv": OpenAPIMediaType(
            schema=Schema(
                type=OpenAPIType.STRING,
                examples=[
                    "venue_id,name,timezone,country,screen_id,width,height\n"
                    "lobby,Main lobby,Europe/Berlin,DE,s1,1920,1080\n"
                ],
            )
        )
    },
)


class ImportEnvelope(msgspec.Struct):
    status: int
    data: ImportResult


class AdvertiserController(Controller):
    path = "/api/v1/advertisers"
    tags = ("management",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(operation_id="listAdvertisers", summary="List advertisers", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any]) -> list[Advertiser]:
        return await env_of(request).run_sync(campaigns_repo.list_advertisers)

    @post(operation_id="createAdvertiser", summary="Create an advertiser", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: JSONBody[AdvertiserIn]) -> Advertiser:
        return await change(
            request,
            "advertiser.create",
            f"advertiser {data.name}",
            lambda c: campaigns_repo.create_advertiser(c, data),
        )


class CampaignController(Controller):
    path = "/api/v1/campaigns"
    tags = ("management",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(operation_id="listCampaigns", summary="List campaigns", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any]) -> list[Campaign]:
        return await env_of(request).run_sync(campaigns_repo.list_campaigns)

    @post(operation_id="createCampaign", summary="Create a campaign", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: JSONBody[CampaignIn]) -> Campaign:
        return await change(
            request,
            "campaign.create",
            f"campaign {data.name}",
            lambda c: campaigns_repo.create_campaign(c, data),
        )

    @get("/{campaign_id:int}", operation_id="getCampaign", summary="Get a campaign", responses=READ_ERRORS)
    async def get(self, request: Request[Any, Any, Any], campaign_id: CampaignId) -> Campaign:
        return await env_of(request).run_sync(lambda c: campaigns_repo.get_campaign(c, campaign_id))

    @patch(
        "/{campaign_id:int}",
        operation_id="updateCampaign",
        summary="Update a campaign",
        responses=WRITE_ERRORS,
    )
    async def update(
        self, request: Request[Any, Any, Any], campaign_id: CampaignId, data: JSONBody[CampaignPatch]
    ) -> Campaign:
        return await change(
            request,
            "campaign.update",
            f"campaign {campaign_id}",
            lambda c: campaigns_repo.update_campaign(c, campaign_id, data),
            before=lambda c: campaigns_repo.get_campaign(c, campaign_id),
        )

    @post(
        "/{campaign_id:int}/creatives",
        operation_id="addCreative",
        summary="Add a creative to a campaign",
        responses=WRITE_ERRORS,
    )
    async def add_creative(
        self, request: Request[Any, Any, Any], campaign_id: CampaignId, data: JSONBody[CreativeIn]
    ) -> Creative:
        return await change(
            request,
            "creative.create",
            f"campaign {campaign_id} creative {data.name}",
            lambda c: campaigns_repo.add_creative(c, campaign_id, data),
        )

    @patch(
        "/{campaign_id:int}/creatives/{creative_id:int}",
        operation_id="updateCreative",
        summary="Pause, resume, rename or reweigh a creative",
        responses=WRITE_ERRORS,
    )
    async def update_creative(
        self,
        request: Request[Any, Any, Any],
        campaign_id: CampaignId,
        creative_id: CreativeId,
        data: JSONBody[CreativePatch],
    ) -> Creative:
        return await change(
            request,
            "creative.update",
            f"campaign {campaign_id} creative {creative_id}",
            lambda c: campaigns_repo.update_creative(c, campaign_id, creative_id, data),
        )


class VenueController(Controller):
    path = "/api/v1/venues"
    tags = ("management",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(operation_id="listVenues", summary="List venues", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any]) -> list[Venue]:
        return await env_of(request).run_sync(inventory_repo.list_venues)

    @post(operation_id="createVenue", summary="Register a venue", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: JSONBody[VenueIn]) -> Venue:
        return await change(
            request, "venue.create", f"venue {data.venue_id}", lambda c: inventory_repo.create_venue(c, data)
        )

    @get("/{venue_id:str}", operation_id="getVenue", summary="Get a venue", responses=READ_ERRORS)
    async def get(self, request: Request[Any, Any, Any], venue_id: VenueId) -> Venue:
        return await env_of(request).run_sync(lambda c: inventory_repo.get_venue(c, venue_id))

    @patch("/{venue_id:str}", operation_id="updateVenue", summary="Update a venue", responses=WRITE_ERRORS)
    async def update(
        self, request: Request[Any, Any, Any], venue_id: VenueId, data: JSONBody[VenuePatch]
    ) -> Venue:
        return await change(
            request,
            "venue.update",
            f"venue {venue_id}",
            lambda c: inventory_repo.update_venue(c, venue_id, data),
            before=lambda c: inventory_repo.get_venue(c, venue_id),
        )

    @post(
        "/{venue_id:str}/screens",
        operation_id="addScreen",
        summary="Add a screen to a venue",
        responses=WRITE_ERRORS,
    )
    async def add_screen(
        self, request: Request[Any, Any, Any], venue_id: VenueId, data: JSONBody[ScreenIn]
    ) -> Screen:
        return await change(
            request,
            "screen.create",
            f"screen {venue_id}/{data.screen_id}",
            lambda c: inventory_repo.add_screen(c, venue_id, data),
        )

    @patch(
        "/{venue_id:str}/screens/{screen_id:str}",
        operation_id="updateScreen",
        summary="Update a screen",
        responses=WRITE_ERRORS,
    )
    async def update_screen(
        self,
        request: Request[Any, Any, Any],
        venue_id: VenueId,
        screen_id: ScreenId,
        data: JSONBody[ScreenPatch],
    ) -> Screen:
        return await change(
            request,
            "screen.update",
            f"screen {venue_id}/{screen_id}",
            lambda c: inventory_repo.update_screen(c, venue_id, screen_id, data),
        )

    @post(
        "/import",
        operation_id="importVenues",
        summary="Create or update venues and screens from a CSV file",
        status_code=200,
        responses=IMPORT_ERRORS,
        request_max_body_size=MAX_CSV_BYTES,
        operation_class=documented(request_body=CSV_BODY),
    )
    async def import_csv(self, request: Request[Any, Any, Any]) -> ImportEnvelope:
        check_csv_content_type(request.headers.get("content-type"))
        body = await request.body()
        result = await change(
            request, "venues.import", f"CSV ({len(body)} bytes)", lambda c: import_venues(c, body)
        )
        return ImportEnvelope(200, result)


class DemandPartnerController(Controller):
    """The environment's demand partners: production's and the sandbox's are separate registries."""

    path = "/api/v1/demand/partners"
    tags = ("management",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(operation_id="listDemandPartners", summary="List demand partners", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any]) -> list[Partner]:
        return await env_of(request).run_sync(demand_repo.list_partners)

    @post(operation_id="createDemandPartner", summary="Register a demand partner", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: JSONBody[PartnerIn]) -> Partner:
        return await change(
            request,
            "demand_partner.create",
            f"demand partner {data.name}",
            lambda c: demand_repo.create_partner(c, data),
        )

    @get(
        "/{name:str}", operation_id="getDemandPartner", summary="Get a demand partner", responses=READ_ERRORS
    )
    async def get(self, request: Request[Any, Any, Any], name: PartnerName) -> Partner:
        return await env_of(request).run_sync(lambda c: demand_repo.get_partner(c, name))

    @patch(
        "/{name:str}",
        operation_id="updateDemandPartner",
        summary="Update a demand partner: pause or resume it (status), change its floor, timeout, venues",
        responses=WRITE_ERRORS,
    )
    async def update(
        self, request: Request[Any, Any, Any], name: PartnerName, data: JSONBody[PartnerPatch]
    ) -> Partner:
        return await change(
            request,
            "demand_partner.update",
            f"demand partner {name}",
            lambda c: demand_repo.update_partner(c, name, data),
            before=lambda c: demand_repo.get_partner(c, name),
        )

    @delete(
        "/{name:str}",
        operation_id="deleteDemandPartner",
        summary="Remove a demand partner",
        responses=READ_ERRORS,
    )
    async def remove(self, request: Request[Any, Any, Any], name: PartnerName) -> None:
        def remove(conn: sa.Connection) -> None:  # None: the audit entry of a deletion has no `after`
            demand_repo.remove_partner(conn, name)

        await change(
            request,
            "demand_partner.delete",
            f"demand partner {name}",
            remove,
            before=lambda c: demand_repo.get_partner(c, name),
        )


DemandCreatives = list[DemandCreative]
"""Named out of the controller, whose `list` method would shadow the builtin in its own signature."""
DemandCreativeId = Annotated[int, PathParameter(description="The demand creative's id", ge=1, le=MAX_ID)]
CREATIVE_DECISION_ERRORS = {
    **READ_ERRORS,
    409: error_spec("The creative was rejected: a rejection is final (`creative_rejected`)."),
}


class DemandCreativeController(Controller):
    """The approval queue of the creatives demand partners bid: a new one plays only once approved (unless
    its partner is auto-approved), a rejected one never plays again."""

    path = "/api/v1/demand/creatives"
    tags = ("management",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(
        operation_id="listDemandCreatives",
        summary="List demand creatives (the approval queue: status=pending), oldest first",
        responses=READ_ERRORS,
    )
    async def list(
        self,
        request: Request[Any, Any, Any],
        status: Annotated[
            CreativeStatus | None, QueryParameter(description="Only creatives in this status")
        ] = None,
        partner: Annotated[str | None, QueryParameter(description="Only this partner's creatives")] = None,
    ) -> DemandCreatives:
        env = env_of(request)
        return await env.run_sync(
            lambda c: creatives_repo.list_creatives(c, status, partner, base_url=env.base_url)
        )

    @get(
        "/{creative_id:int}/preview",
        operation_id="previewDemandCreative",
        summary="The VAST markup the creative was first bid with, for any VAST player",
        responses={
            200: vast_spec("The VAST document, as the partner bid it."),
            **READ_ERRORS,
            409: error_spec("The bid had no markup: its VAST is served by its nurl (`no_stored_markup`)."),
        },
    )
    async def preview(
        self, request: Request[Any, Any, Any], creative_id: DemandCreativeId
    ) -> Response[bytes]:
        adm = await env_of(request).run_sync(lambda c: creatives_repo.markup(c, creative_id))
        return reply_response(Reply(200, adm.encode(), XML, MARKUP_HEADERS))

    @get(
        "/{creative_id:int}",
        operation_id="getDemandCreative",
        summary="Get a demand creative",
        responses=READ_ERRORS,
    )
    async def get(self, request: Request[Any, Any, Any], creative_id: DemandCreativeId) -> DemandCreative:
        env = env_of(request)
        return await env.run_sync(
            lambda c: creatives_repo.get_creative(c, creative_id, base_url=env.base_url)
        )

    @post(
        "/{creative_id:int}/approve",
        operation_id="approveDemandCreative",
        summary="Approve a demand creative: it may play (approving twice changes nothing)",
        status_code=200,
        responses=CREATIVE_DECISION_ERRORS,
    )
    async def approve(self, request: Request[Any, Any, Any], creative_id: DemandCreativeId) -> DemandCreative:
        return await self._decide(request, "approve", creative_id)

    @post(
        "/{creative_id:int}/reject",
        operation_id="rejectDemandCreative",
        summary="Reject a demand creative: it never plays again (final)",
        status_code=200,
        responses=READ_ERRORS,
    )
    async def reject(self, request: Request[Any, Any, Any], creative_id: DemandCreativeId) -> DemandCreative:
        return await self._decide(request, "reject", creative_id)

    async def _decide(
        self, request: Request[Any, Any, Any], decision: Literal["approve", "reject"], creative_id: int
    ) -> DemandCreative:
        key: KeyRecord = request.state.key
        base_url = env_of(request).base_url
        decide = creatives_repo.approve if decision == "approve" else creatives_repo.reject
        return await change(
            request,
            f"demand_creative.{decision}",
            f"demand creative {creative_id}",
            lambda c: decide(c, creative_id, f"api key {key.key_id}", base_url=base_url),
            before=lambda c: creatives_repo.get_creative(c, creative_id, base_url=base_url),
        )


MANAGEMENT_CONTROLLERS = [
    AdvertiserController,
    CampaignController,
    VenueController,
    DemandPartnerController,
    DemandCreativeController,
]
