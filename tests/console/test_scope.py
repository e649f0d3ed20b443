"""Who reads what: staff everything, an advertiser user only their advertisers' campaigns, and only the
routes open to advertisers (in production)."""

from __future__ import annotations

import pytest

from adslot.console.scope import OPEN_TO_ADVERTISERS, route_open, scope_of
from adslot.console.users import User
from adslot.errors import ApiError


def user(role: str, advertisers: tuple[int, ...] = ()) -> User:
    return User(1, "someone@example.com", role, 0, None, advertisers)


class Row:
    def __init__(self, advertiser_id: int) -> None:
        self.advertiser_id = advertiser_id


def test_staff_of_every_role_see_every_advertiser() -> None:
    for role in ("viewer", "trafficker", "admin"):
        seen = scope_of(user(role))
        assert seen.everything and [r.advertiser_id for r in seen.only([Row(1), Row(2)])] == [1, 2]


def test_an_advertiser_user_sees_only_their_advertisers_and_none_when_bound_to_none() -> None:
    seen = scope_of(user("advertiser", (2, 5)))
    assert not seen.everything
    assert [r.advertiser_id for r in seen.only([Row(1), Row(2), Row(5), Row(7)])] == [2, 5]
    assert scope_of(user("advertiser")).only([Row(1), Row(2)]) == []


def test_a_campaign_outside_the_scope_is_not_found_as_an_unknown_id_is() -> None:
    seen = scope_of(user("advertiser", (2,)))
    seen.check_campaign(10, 2)
    with pytest.raises(ApiError) as refused:
        seen.check_campaign(11, 3)
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        404,
        "campaign_not_found",
        "campaign_id",
    )
    assert refused.value.message == "no campaign 11"


def test_a_route_is_closed_to_advertisers_unless_it_opens_itself_and_the_sandbox_always() -> None:
    advertiser = user("advertiser", (1,))
    assert not route_open(advertiser, {}, "production")
    assert not route_open(advertiser, {OPEN_TO_ADVERTISERS: False}, "production")
    assert route_open(advertiser, {OPEN_TO_ADVERTISERS: True}, "production")
    assert route_open(advertiser, {OPEN_TO_ADVERTISERS: True}, None)
    assert not route_open(advertiser, {OPEN_TO_ADVERTISERS: True}, "sandbox")
    assert route_open(user("viewer"), {}, "sandbox")
