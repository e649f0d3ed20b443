"""The management API (admin permission): advertisers, campaigns, creatives, venues and screens."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get, patch, post
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter

from adslot.api.auth import authenticate
from adslot.api.docs import ErrorEnvelope
from adslot.auth.keys import SCOPE_ADMIN
from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import (
    Advertiser,
    AdvertiserIn,
    Campaign,
    CampaignIn,
    CampaignPatch,
    Creative,
    CreativeIn,
)
from adslot.environment import Environment
from adslot.inventory import repository as inventory_repo
from adslot.inventory.schemas import Screen, ScreenIn, Venue, VenueIn, VenuePatch


def admin_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    env: Environment = connection.app.state.env
    authenticate(env, connection.headers.get("ssp-key"), SCOPE_ADMIN)


def env_of(request: Request[Any, Any, Any]) -> Environment:
    env: Environment = request.app.state.env
    return env


ERRORS = {
    400: ResponseSpec(ErrorEnvelope, description="Invalid input."),
    401: ResponseSpec(ErrorEnvelope, description="Missing or invalid key."),
    403: ResponseSpec(ErrorEnvelope, description="The key lacks the admin permission."),
}
WRITE_ERRORS = {
    **ERRORS,
    404: ResponseSpec(ErrorEnvelope, description="Not found."),
    409: ResponseSpec(ErrorEnvelope, description="Already exists."),
    422: ResponseSpec(ErrorEnvelope, description="Refers to something unknown or inconsistent."),
}
KEY = Parameter(header="Ssp-Key", description="A key with the admin permission")


class AdvertiserController(Controller):
    path = "/api/v1/advertisers"
    tags = ["management"]
    guards = [admin_guard]
    security = [{"SspKey": []}]

    @get(operation_id="listAdvertisers", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any], ssp_key: str = KEY) -> list[Advertiser]:
        return await env_of(request).run_sync(campaigns_repo.list_advertisers)

    @post(operation_id="createAdvertiser", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: AdvertiserIn, ssp_key: str = KEY) -> Advertiser:
        return await env_of(request).run_sync(lambda c: campaigns_repo.create_advertiser(c, data), write=True)


class CampaignController(Controller):
    path = "/api/v1/campaigns"
    tags = ["management"]
    guards = [admin_guard]
    security = [{"SspKey": []}]

    @get(operation_id="listCampaigns", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any], ssp_key: str = KEY) -> list[Campaign]:
        return await env_of(request).run_sync(campaigns_repo.list_campaigns)

    @post(operation_id="createCampaign", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: CampaignIn, ssp_key: str = KEY) -> Campaign:
        return await env_of(request).run_sync(lambda c: campaigns_repo.create_campaign(c, data), write=True)

    @get("/{campaign_id:int}", operation_id="getCampaign", responses=WRITE_ERRORS)
    async def get(self, request: Request[Any, Any, Any], campaign_id: int, ssp_key: str = KEY) -> Campaign:
        return await env_of(request).run_sync(lambda c: campaigns_repo.get_campaign(c, campaign_id))

    @patch("/{campaign_id:int}", operation_id="updateCampaign", responses=WRITE_ERRORS)
    async def update(
        self, request: Request[Any, Any, Any], campaign_id: int, data: CampaignPatch, ssp_key: str = KEY
    ) -> Campaign:
        return await env_of(request).run_sync(
            lambda c: campaigns_repo.update_campaign(c, campaign_id, data), write=True
        )

    @post("/{campaign_id:int}/creatives", operation_id="addCreative", responses=WRITE_ERRORS)
    async def add_creative(
        self, request: Request[Any, Any, Any], campaign_id: int, data: CreativeIn, ssp_key: str = KEY
    ) -> Creative:
        return await env_of(request).run_sync(
            lambda c: campaigns_repo.add_creative(c, campaign_id, data), write=True
        )


class VenueController(Controller):
    path = "/api/v1/venues"
    tags = ["management"]
    guards = [admin_guard]
    security = [{"SspKey": []}]

    @get(operation_id="listVenues", responses=ERRORS)
    async def list(self, request: Request[Any, Any, Any], ssp_key: str = KEY) -> list[Venue]:
        return await env_of(request).run_sync(inventory_repo.list_venues)

    @post(operation_id="createVenue", responses=WRITE_ERRORS)
    async def create(self, request: Request[Any, Any, Any], data: VenueIn, ssp_key: str = KEY) -> Venue:
        return await env_of(request).run_sync(lambda c: inventory_repo.create_venue(c, data), write=True)

    @get("/{venue_id:str}", operation_id="getVenue", responses=WRITE_ERRORS)
    async def get(self, request: Request[Any, Any, Any], venue_id: str, ssp_key: str = KEY) -> Venue:
        return await env_of(request).run_sync(lambda c: inventory_repo.get_venue(c, venue_id))

    @patch("/{venue_id:str}", operation_id="updateVenue", responses=WRITE_ERRORS)
    async def update(
        self, request: Request[Any, Any, Any], venue_id: str, data: VenuePatch, ssp_key: str = KEY
    ) -> Venue:
        return await env_of(request).run_sync(lambda c: inventory_repo.update_venue(c, venue_id, data), write=True)

    @post("/{venue_id:str}/screens", operation_id="addScreen", responses=WRITE_ERRORS)
    async def add_screen(
        self, request: Request[Any, Any, Any], venue_id: str, data: ScreenIn, ssp_key: str = KEY
    ) -> Screen:
        return await env_of(request).run_sync(lambda c: inventory_repo.add_screen(c, venue_id, data), write=True)


MANAGEMENT_CONTROLLERS = [AdvertiserController, CampaignController, VenueController]
