"""Whether a creative can play on a screen as the screen declares itself.

A creative that a player cannot decode, that would be letterboxed or cropped, or that outlasts the slot is a
wasted play the advertiser does not pay for; the decision must never pick one.
"""

from __future__ import annotations

from adslot.decision.model import Creative, Orientation, ScreenProfile

ASPECT_TOLERANCE = 0.02
"""Relative difference of aspect ratios still accepted: encodes like 1920x1088 or 4096x2160 on a 16:9 panel
are scaled without visible bars, a 4:3 creative (33% off) is not."""


def orientation_of(width: int, height: int) -> Orientation:
    if width > height:
        return "landscape"
    if height > width:
        return "portrait"
    return "square"


def screen_orientation(screen: ScreenProfile) -> Orientation | None:
    """A declared orientation wins (a rotated panel may report its native size) over the declared size."""
    if screen.orientation is not None:
        return screen.orientation
    if screen.width is not None and screen.height is not None:
        return orientation_of(screen.width, screen.height)
    return None


def fits(creative: Creative, screen: ScreenProfile | None) -> bool:
    """No screen, or a screen that declares nothing, accepts anything.

    An empty ``mime_types`` set counts as undeclared: a screen that accepts no format at all is a data entry
    slip, not a screen to starve.
    """
    if screen is None:
        return True
    wanted = screen_orientation(screen)
    if wanted is not None and orientation_of(creative.width, creative.height) != wanted:
        return False
    if screen.width and screen.height and not _aspect_close(creative, screen.width, screen.height):
        return False
    if screen.mime_types and creative.mime_type not in screen.mime_types:
        return False
    return screen.max_duration_seconds is None or creative.duration_seconds <= screen.max_duration_seconds


def _aspect_close(creative: Creative, width: int, height: int) -> bool:
    """|cw/ch - sw/sh| ≤ 2% of sw/sh, cross-multiplied so that integer sizes compare without rounding."""
    if creative.height <= 0:
        return False
    return (
        abs(creative.width * height - width * creative.height) <= ASPECT_TOLERANCE * width * creative.height
    )
