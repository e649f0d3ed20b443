"""Who may do what in the console: each role can do everything the one before it can."""

from __future__ import annotations

from typing import Literal

Role = Literal["viewer", "trafficker", "admin"]
ROLES: tuple[Role, ...] = ("viewer", "trafficker", "admin")
READ: Role = "viewer"
TRAFFIC: Role = "trafficker"
"""Venues, screens, advertisers, campaigns and creatives."""
ADMIN: Role = "admin"
"""Keys and users, besides everything a trafficker does."""


def allows(role: str, needed: Role) -> bool:
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)
