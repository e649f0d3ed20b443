"""The console's Litestar application, mounted at /console beside both environments."""

from __future__ import annotations

from collections.abc import Mapping

from litestar import Litestar
from litestar.exceptions import HTTPException

from adslot.console.pages import (
    admin,
    campaigns,
    demand,
    insight,
    overview,
    players,
    proof,
    reports,
    screens,
    share,
    signing,
    venues,
)
from adslot.console.web import (
    Console,
    api_error_page,
    before_request,
    http_error_page,
    internal_error_page,
    security_headers,
)
from adslot.edge.clients import TrustedProxies
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.inventory.csv_import import MAX_CSV_BYTES

ROUTES = [
    *signing.ROUTES,
    *overview.ROUTES,
    *venues.ROUTES,
    *players.ROUTES,
    *campaigns.ROUTES,
    *proof.ROUTES,
    *share.ROUTES,
    *reports.ROUTES,
    *insight.ROUTES,
    *screens.ROUTES,
    *demand.ROUTES,
    *admin.ROUTES,
]


def build_console(environments: Mapping[str, Environment]) -> Litestar:
    production = environments["production"]
    app = Litestar(
        route_handlers=ROUTES,
        before_request=before_request,
        before_send=[security_headers],
        exception_handlers={
            ApiError: api_error_page,
            HTTPException: http_error_page,
            Exception: internal_error_page,
        },
        openapi_config=None,
        request_max_body_size=MAX_CSV_BYTES + 64 * 1024,
        debug=False,
        logging_config=None,  # logging stays adslot's (telemetry/logs.py)
    )
    app.state.console = Console(
        environments,
        secure_cookies=production.base_url.startswith("https://"),
        proxies=TrustedProxies(production.settings.trusted_proxies),
    )
    return app
