"""What a console user may read: everything, or only their advertisers' direct campaigns.

The rule is applied on the server in two places. Route by route: a page is closed to an advertiser user
unless its handler declares itself open (`opt={OPEN_TO_ADVERTISERS: True}`), so a page added later is
refused by default; a refused page answers 404, as a page that does not exist does, so that an advertiser
learns nothing of what exists. Row by row: the open pages pass every campaign they read through the
user's ReadScope, and a campaign outside it is "not found" as an unknown id is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from adslot.console.roles import ADVERTISER
from adslot.console.users import User
from adslot.errors import ApiError

OPEN_TO_ADVERTISERS = "open_to_advertisers"
"""The route handler option that opens a page to advertiser users (who see it through their ReadScope)."""
ADVERTISER_ENVIRONMENT = "production"
"""Advertisers are bound to production's advertisers: the sandbox is closed to them."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReadScope:
    advertiser_ids: frozenset[int] | None
    """None: every advertiser (staff); else only these."""

    @property
    def everything(self) -> bool:
        return self.advertiser_ids is None

    def sees(self, advertiser_id: int) -> bool:
        return self.advertiser_ids is None or advertiser_id in self.advertiser_ids

    def only(self, found: Iterable[T], advertiser_of: Any = lambda x: x.advertiser_id) -> list[T]:
        """The items of `found` (campaigns or advertisers, by their advertiser id) the scope sees."""
        return [x for x in found if self.sees(int(advertiser_of(x)))]

    def check_campaign(self, campaign_id: int, advertiser_id: int) -> None:
        """A campaign outside the scope is not found, exactly as an unknown id is (campaigns.repository)."""
        if not self.sees(advertiser_id):
            raise ApiError(404, "campaign_not_found", f"no campaign {campaign_id}", "campaign_id")


EVERYTHING = ReadScope(None)


def scope_of(user: User) -> ReadScope:
    """An advertiser user's scope is their advertisers (none bound: nothing); any other role's, everything."""
    if user.role == ADVERTISER:
        return ReadScope(frozenset(user.advertiser_ids))
    return EVERYTHING


def route_open(user: User, opt: dict[str, Any], env_name: str | None) -> bool:
    """Whether the route may be served to the user at all: staff always; an advertiser only a route
    declared open to advertisers, and in production only."""
    if user.role != ADVERTISER:
        return True
    if not opt.get(OPEN_TO_ADVERTISERS):
        return False
    return env_name is None or env_name == ADVERTISER_ENVIRONMENT
