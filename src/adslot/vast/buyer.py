"""The inline layer of an ad request a demand partner won: the buyer's own VAST, with adslot's pixels in it.

The player resolves adslot's wrapper to this document as it does for a direct ad, so the spec's contract
holds. adslot's inline-layer Impression and quartile Tracking are added beside the buyer's own, so one play
fires both (the player proves the play to adslot, and the buyer counts it too). The buyer's markup is
otherwise served as it was bid: elements are inserted as text at places the VAST 2.0 schema allows, after
the markup was parsed and found to be one VAST document with an InLine or Wrapper ad, so nothing of the
buyer's (CDATA, namespaces, comments) is reserialized. A bid whose markup only its `nurl` serves is answered
with a Wrapper pointing at that URL, carrying adslot's pixels.

Pure: no I/O. The markup is the partner's: it is checked by vast/markup.py, which refuses any DTD (so no
entity is ever expanded) and caps its nesting.
"""

from __future__ import annotations

import re

from adslot.vast.inline import INLINE
from adslot.vast.markup import NotVast, check_vast
from adslot.vast.urls import impression_url
from adslot.vast.wrapper import XML_DECLARATION, ad_system, tracking_events
from adslot.vast.xml import attr, cdata

_LEADING = "\ufeff \t\r\n"
"""A byte-order mark or blank lines a bidder's template left before the XML declaration: not served (a
declaration anywhere but first makes the document malformed for a player's parser)."""

__all__ = ["NotVast", "check_vast", "with_adslot_pixels", "wrapper_to"]


_AD_LAYER = re.compile(r"<(InLine|Wrapper)(\s[^>]*)?>")
_FIRST_IMPRESSION = re.compile(r"<Impression[\s>/]")
_CREATIVES = re.compile(r"<Creatives[\s>/]")
_LINEAR = re.compile(r"<Linear(\s[^>]*)?>")
_AFTER_DURATION = re.compile(r"</Duration\s*>")
_TRACKING_EVENTS = re.compile(r"<TrackingEvents(\s[^>]*)?/?>")
_NEXT_LINEAR_PART = re.compile(r"<(AdParameters|VideoClicks|MediaFiles)[\s>/]|</Linear\s*>")


def _pixels(base_url: str, ad_request_uuid: str) -> tuple[str, str]:
    """(adslot's Impression element, its Tracking elements), marked as the inline layer's fires."""
    impression = f"<Impression>{cdata(impression_url(base_url, ad_request_uuid) + INLINE)}</Impression>"
    events = tracking_events(base_url, ad_request_uuid, INLINE)
    return impression, events.removeprefix("<TrackingEvents>").removesuffix("</TrackingEvents>")


def with_adslot_pixels(markup: str, *, base_url: str, ad_request_uuid: str) -> str:
    """The buyer's VAST with adslot's inline-layer Impression and quartile Tracking added to its first ad.

    The Impression goes before the buyer's first one (the schema's sequence puts every Impression there),
    or before Creatives when it has none; the Tracking elements open each Linear's TrackingEvents, which is
    added after Duration (an InLine) or first (a Wrapper) when the Linear has none."""
    check_vast(markup)
    markup = markup.lstrip(_LEADING)
    impression, tracking = _pixels(base_url, ad_request_uuid)
    layer = _AD_LAYER.search(markup)
    if layer is None:
        raise NotVast("no <InLine> or <Wrapper> start tag")
    start = layer.end()
    found = _FIRST_IMPRESSION.search(markup, start) or _CREATIVES.search(markup, start)
    where = found.start() if found is not None else markup.find(f"</{layer.group(1)}", start)
    if where < 0:
        raise NotVast(f"no place for an <Impression> in <{layer.group(1)}>")
    markup = markup[:where] + impression + markup[where:]
    return _with_tracking(markup, tracking, where + len(impression))


def _with_tracking(markup: str, tracking: str, start: int) -> str:
    pieces: list[str] = []
    position = 0
    for linear in _LINEAR.finditer(markup, start):
        if linear.group(0).endswith("/>"):
            continue
        end = _NEXT_LINEAR_PART.search(markup, linear.end())
        limit = end.start() if end is not None else len(markup)
        events = _TRACKING_EVENTS.search(markup, linear.end(), limit)
        if events is None:
            duration = _AFTER_DURATION.search(markup, linear.end(), limit)
            at = after = duration.end() if duration is not None else linear.end()
            insert = f"<TrackingEvents>{tracking}</TrackingEvents>"
        elif events.group(0).endswith("/>"):
            # An empty <TrackingEvents/>: replaced by one holding adslot's (inserted after it, they would be
            # Tracking elements loose in the Linear, which players ignore).
            at, after = events.start(), events.end()
            insert = f"{events.group(0)[:-2].rstrip()}>{tracking}</TrackingEvents>"
        else:
            at = after = events.end()
            insert = tracking
        pieces.append(markup[position:at])
        pieces.append(insert)
        position = after
    pieces.append(markup[position:])
    return "".join(pieces)


def wrapper_to(
    url: str,
    *,
    base_url: str,
    ad_request_uuid: str,
    ad_system_name: str,
    ad_system_version: str,
) -> str:
    """A VAST 2.0 Wrapper to the buyer's markup at `url` (its `nurl`), with adslot's inline-layer pixels."""
    impression, tracking = _pixels(base_url, ad_request_uuid)
    return (
        f'{XML_DECLARATION}<VAST version="2.0">'
        f'<Ad id="{attr(ad_request_uuid)}"><Wrapper>'
        f"{ad_system(ad_system_name, ad_system_version)}"
        f"<VASTAdTagURI>{cdata(url)}</VASTAdTagURI>"
        f"{impression}"
        f"<Creatives><Creative><Linear><TrackingEvents>{tracking}</TrackingEvents></Linear></Creative>"
        "</Creatives></Wrapper></Ad></VAST>"
    )
