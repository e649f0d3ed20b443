"""The Litestar application of one environment: management API, documented hot paths, pages."""

from __future__ import annotations

from litestar import Litestar
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme, Server

from adslot import __version__
from adslot.api.errors import EXCEPTION_HANDLERS
from adslot.api.hot_routes import HOT_ROUTES
from adslot.api.management import MANAGEMENT_CONTROLLERS
from adslot.api.pages import PAGE_ROUTES
from adslot.api.pop_batch_route import pop_batch
from adslot.api.reports import REPORT_CONTROLLERS
from adslot.api.screens import FLEET_CONTROLLERS
from adslot.environment import Environment
from adslot.player.api import PLAYER_API
from adslot.player.pages import PLAYER_PAGES

DESCRIPTION = """adslot's ad request service: a player announces an ad slot (venue, optional screen,
play time) and receives a VAST 2.0 wrapper; the player then fires the impression and quartile URLs inside it
(Proof of Play). Errors answer `{"status": <http status>, "error": {"code", "message", "field"}}`."""


def build_litestar(env: Environment) -> Litestar:
    app = Litestar(
        route_handlers=[
            *HOT_ROUTES,
            pop_batch,
            *MANAGEMENT_CONTROLLERS,
            *FLEET_CONTROLLERS,
            *REPORT_CONTROLLERS,
            *PAGE_ROUTES,
            *PLAYER_API,
            *PLAYER_PAGES,
        ],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        openapi_config=OpenAPIConfig(
            title=f"adslot ({env.name})",
            version=__version__,
            description=DESCRIPTION,
            servers=[Server(url=env.base_url, description=env.name)],
            components=Components(
                security_schemes={
                    "SspKey": SecurityScheme(type="apiKey", name="Ssp-Key", security_scheme_in="header")
                }
            ),
            path="/schema",
            # Only the JSON: an empty list would bring back Litestar's default UIs, which load from CDNs. The
            # document users read is {base}/openapi.json, and the UI is the playground (pages.py).
            render_plugins=[JsonRenderPlugin()],
        ),
        request_max_body_size=max(env.settings.max_body_bytes, 1024 * 1024),
        debug=False,
        logging_config=None,  # logging stays adslot's (telemetry/logs.py)
    )
    app.state.env = env
    return app
