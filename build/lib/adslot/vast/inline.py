"""The VAST 2.0 InLine that the wrapper's VASTAdTagURI points at: the creative the decision chose."""

from __future__ import annotations

from dataclasses import dataclass

from adslot.vast.urls import impression_url
from adslot.vast.wrapper import XML_DECLARATION, ad_system, tracking_events
from adslot.vast.xml import attr, cdata, text

INLINE = "&layer=inline"
"""Marks the inline's pixels, so the player's fires of both VAST layers count once, not as duplicates."""


@dataclass(frozen=True, slots=True)
class MediaFile:
    url: str
    mime_type: str
    width: int
    height: int
    bitrate_kbps: int | None = None
    delivery: str = "progressive"


@dataclass(frozen=True, slots=True)
class InlineCreative:
    creative_id: int
    title: str
    duration_seconds: int
    media: MediaFile


def duration(seconds: int) -> str:
    hours, rest = divmod(max(0, seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def build_inline(
    *,
    base_url: str,
    ad_request_uuid: str,
    creative: InlineCreative,
    ad_system_name: str,
    ad_system_version: str,
) -> str:
    media = creative.media
    bitrate = f' bitrate="{media.bitrate_kbps}"' if media.bitrate_kbps else ""
    return (
        f'{XML_DECLARATION}<VAST version="2.0">'
        f'<Ad id="{attr(ad_request_uuid)}"><InLine>'
        f"{ad_system(ad_system_name, ad_system_version)}"
        f"<AdTitle>{text(creative.title)}</AdTitle>"
        f"<Impression>{cdata(impression_url(base_url, ad_request_uuid) + INLINE)}</Impression>"
        f'<Creatives><Creative id="{creative.creative_id}"><Linear>'
        f"<Duration>{duration(creative.duration_seconds)}</Duration>"
        f"{tracking_events(base_url, ad_request_uuid, INLINE)}"
        "<MediaFiles>"
        f'<MediaFile delivery="{attr(media.delivery)}" type="{attr(media.mime_type)}"'
        f' width="{media.width}" height="{media.height}"{bitrate}>{cdata(media.url)}</MediaFile>'
        "</MediaFiles></Linear></Creative></Creatives>"
        "</InLine></Ad></VAST>"
    )
