"""auth.keys.check_ad_request_screen: a player-link key acts on its own screen's ad requests only."""

from __future__ import annotations

import pytest

from adslot.auth.keys import SCOPE_AD_REQUEST, KeyRecord, check_ad_request_screen
from adslot.errors import ApiError

PLAYER = KeyRecord(7, 3, frozenset({SCOPE_AD_REQUEST}), ("lobby", "s1"))
ACCOUNT_KEY = KeyRecord(8, 3, frozenset({SCOPE_AD_REQUEST}))


def test_a_player_key_passes_for_its_own_screens_ad_request() -> None:
    check_ad_request_screen(PLAYER, 3, "lobby", "s1", "ad_request_uuid")


@pytest.mark.parametrize(
    ("venue_id", "screen_id"),
    [("lobby", "s2"), ("hall", "s1"), ("lobby", None)],
    ids=["screen", "venue", "none"],
)
def test_a_player_key_is_refused_another_screens_ad_request_of_its_account_naming_the_field(
    venue_id: str, screen_id: str | None
) -> None:
    with pytest.raises(ApiError) as refused:
        check_ad_request_screen(PLAYER, 3, venue_id, screen_id, "fires[4].ad_request_uuid")
    error = refused.value
    assert (error.status, error.code, error.field) == (403, "key_not_for_screen", "fires[4].ad_request_uuid")
    # It names the key's own screen, never the other one (the player has no business learning it).
    assert "'s1'" in error.message and "'lobby'" in error.message
    assert "'s2'" not in error.message and "hall" not in error.message


def test_another_accounts_ad_request_is_left_to_the_caller_to_answer_as_unknown() -> None:
    check_ad_request_screen(PLAYER, 4, "lobby", "s2", "ad_request_uuid")


def test_a_key_bound_to_no_screen_passes_for_any_screen() -> None:
    for venue_id, screen_id in (("lobby", "s2"), ("hall", None)):
        check_ad_request_screen(ACCOUNT_KEY, 3, venue_id, screen_id, "ad_request_uuid")
