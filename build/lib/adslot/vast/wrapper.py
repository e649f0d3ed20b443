"""The VAST 2.0 wrapper returned by an ad request (spec section 2.3), built as a string for speed.

The spec puts `<Extension type="custom-meta">` directly in `<VAST>` after `</Ad>`, which the 2.0.1 schema does
not allow; `schema_strict=True` moves it into `Wrapper/Extensions` for players that validate.
"""

from __future__ import annotations

from adslot.vast.urls import QUARTILE_EVENTS, impression_url, tracking_url, vast_url
from adslot.vast.xml import attr, cdata, text

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'


def custom_meta(venue_id: str, screen_id: str | None) -> str:
    return (
        '<Extension type="custom-meta">'
        f"<venue_id>{cdata(venue_id)}</venue_id>"
        f"<screen_id>{cdata(screen_id or '')}</screen_id>"
        "</Extension>"
    )


def ad_system(name: str, version: str) -> str:
    return f'<AdSystem version="{attr(version)}">{text(name)}</AdSystem>'


def tracking_events(base_url: str, ad_request_uuid: str, suffix: str = "") -> str:
    rows = "".join(
        f'<Tracking event="{event}">{cdata(url + suffix)}</Tracking>'
        for event, url in ((e, tracking_url(base_url, ad_request_uuid, e)) for e in QUARTILE_EVENTS)
    )
    return f"<TrackingEvents>{rows}</TrackingEvents>"


def build_wrapper(
    *,
    base_url: str,
    ad_request_uuid: str,
    venue_id: str,
    screen_id: str | None,
    ad_system_name: str,
    ad_system_version: str,
    schema_strict: bool = False,
) -> str:
    meta = custom_meta(venue_id, screen_id)
    wrapper_extensions = f"<Extensions>{meta}</Extensions>" if schema_strict else ""
    trailing = "" if schema_strict else meta
    return (
        f'{XML_DECLARATION}<VAST version="2.0">'
        f'<Ad id="{attr(ad_request_uuid)}"><Wrapper>'
        f"{ad_system(ad_system_name, ad_system_version)}"
        f"<VASTAdTagURI>{cdata(vast_url(base_url, ad_request_uuid))}</VASTAdTagURI>"
        f"<Impression>{cdata(impression_url(base_url, ad_request_uuid))}</Impression>"
        "<Creatives><Creative><Linear>"
        f"{tracking_events(base_url, ad_request_uuid)}"
        "</Linear></Creative></Creatives>"
        f"{wrapper_extensions}</Wrapper></Ad>{trailing}</VAST>"
    )


EMPTY_VAST = f'{XML_DECLARATION}<VAST version="2.0"/>'
