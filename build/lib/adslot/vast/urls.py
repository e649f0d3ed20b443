"""The URL shapes of the contract (spec section 4.2), built from an environment's public base URL."""

from __future__ import annotations

from adslot import routes

QUARTILE_EVENTS = ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")
EVENTS = ("impression", *QUARTILE_EVENTS)


def vast_url(base_url: str, ad_request_uuid: str) -> str:
    return f"{base_url}{routes.VAST}{ad_request_uuid}"


def impression_url(base_url: str, ad_request_uuid: str) -> str:
    return f"{base_url}{routes.IMPRESSION}?ad_request_uuid={ad_request_uuid}"


def tracking_url(base_url: str, ad_request_uuid: str, event: str) -> str:
    return f"{base_url}{routes.TRACKING}?ad_request_uuid={ad_request_uuid}&event={event}"
