"""API keys: a visible environment prefix, 128 random bits, stored only as a SHA-256 hash.

A slow password hash buys nothing for 128-bit random secrets and would cost every ad request; SHA-256
is what payment APIs use for the same reason.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

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
