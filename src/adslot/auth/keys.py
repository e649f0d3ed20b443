"""API keys: a visible environment prefix, 128 random bits, stored only as a SHA-256 hash.

A slow password hash buys nothing for 128-bit random secrets and would cost every ad request; SHA-256
is what payment APIs use for the same reason.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from adslot.errors import ApiError

SCOPE_AD_REQUEST = "ad_request"
SCOPE_ADMIN = "admin"
SCOPES = (SCOPE_AD_REQUEST, SCOPE_ADMIN)
LIVE_PREFIX = "ssp_live_"
TEST_PREFIX = "ssp_test_"
DISPLAY_PREFIX_LENGTH = 13


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key(prefix: str) -> str:
    return prefix + secrets.token_hex(16)


def display_prefix(key: str) -> str:
    return key[:DISPLAY_PREFIX_LENGTH]


def parse_scopes(raw: str) -> frozenset[str]:
    scopes = frozenset(s.strip() for s in raw.split(",") if s.strip())
    unknown = scopes - set(SCOPES)
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(sorted(unknown))}; known: {', '.join(SCOPES)}")
    if not scopes:
        raise ValueError("at least one scope is required")
    return scopes


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What the hot path needs to know about a key, kept in memory by hash."""

    key_id: int
    account_id: int
    scopes: frozenset[str]
    screen: tuple[str, str] | None = None
    """(venue_id, screen_id) of a player-link key (player_keys), loaded with the key so that checking a
    request against it is a tuple compare; None for a key that may ask for any venue and screen."""


def check_screen(record: KeyRecord, venue_id: str, screen_id: str | None) -> None:
    """Refuse a player-link key's request for any venue or screen but its own (403 key_not_for_screen); a key
    bound to no screen passes. A request that names no screen is another screen's too."""
    screen = record.screen
    if screen is None:
        return
    if venue_id != screen[0]:
        raise ApiError(
            403, "key_not_for_screen", f"this player key is for venue {screen[0]!r} only", "venue_id"
        )
    if screen_id != screen[1]:
        raise ApiError(
            403,
            "key_not_for_screen",
            f"this player key is for screen {screen[1]!r} of venue {screen[0]!r} only",
            "screen_id",
        )


def check_ad_request_screen(
    record: KeyRecord, account_id: int, venue_id: str, screen_id: str | None, field: str
) -> None:
    """Refuse a player-link key's act on an ad request of its account issued for another venue or screen (403
    key_not_for_screen, `field` naming the ad request); a key bound to no screen passes, and so does an ad
    request of another account, which the caller answers as unknown (a key never learns of those). The
    message names the key's own screen only: the other screen is none of the player's business."""
    screen = record.screen
    if screen is None or account_id != record.account_id or (venue_id, screen_id) == screen:
        return
    raise ApiError(
        403,
        "key_not_for_screen",
        f"this ad request is not for this player key's screen ({screen[1]!r} of venue {screen[0]!r})",
        field,
    )
