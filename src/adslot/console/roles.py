"""Who may do what in the console: each role can do everything the one before it can.

An advertiser sits below a viewer: it may do nothing a role check asks for, and reads only the pages that
declare themselves open to it (scope.py), filtered to its own advertisers' campaigns.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["advertiser", "viewer", "trafficker", "admin"]
ROLES: tuple[Role, ...] = ("advertiser", "viewer", "trafficker", "admin")
ADVERTISER: Role = "advertiser"
"""Bound to one or more advertisers: their direct campaigns' proof, nothing else (scope.py)."""
READ: Role = "viewer"
TRAFFIC: Role = "trafficker"
"""Venues, screens, advertisers, campaigns and creatives."""
ADMIN: Role = "admin"
"""Keys and users, besides everything a trafficker does."""


def allows(role: str, needed: Role) -> bool:
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)
