"""Form fields become the API's bodies, decoded by the API's own structs, errors naming their inputs."""

from __future__ import annotations

import pytest

from adslot.campaigns.schemas import CampaignIn, TargetingRules
from adslot.console.forms import decode, error_for, row_id, utc_input, utc_time, words
from adslot.console.pages.campaigns import campaign_body, campaign_form, campaign_patch
from adslot.errors import ApiError
from adslot.inventory.schemas import VenueIn

CAMPAIGN_FORM = {
    "advertiser_id": "3",
    "name": "Spring",
    "start_at": "2026-12-01T00:00",
    "end_at": "2026-12-31T00:00",
    "venue_ids": "lobby, hall\nroof",
    "tier": "sponsorship",
    "weight": "50",
    "timezone": "Europe/Berlin",
    "pacing": "even",
    "cpm": "12.5",
    "share_of_voice": "0.25",
    "separation_minutes": "10",
    "frequency.per_hour": "4",
    "targeting.venue_types": "1.1, 2",
    "targeting.geo.countries": "DE",
    "targeting.geo.radius": "52.5, 13.4, 10",
    "exclusions.venue_tags": "outdoor",
    "dayparts[0].days.mon": "on",
    "dayparts[0].days.tue": "on",
    "dayparts[0].start_hour": "7",
    "dayparts[0].end_hour": "10",
    "caps[0].period": "daily",
    "caps[0].metric": "plays",
    "caps[0].limit": "200",
}


def test_a_campaign_form_decodes_to_the_apis_campaign_with_every_rule() -> None:
    campaign = decode(campaign_body(CAMPAIGN_FORM), CampaignIn)
    assert campaign.venue_ids == ["lobby", "hall", "roof"]
    assert campaign.start_at == 1_796_083_200
    assert campaign.targeting is not None and campaign.targeting.venue_types == ["1.1", "2"]
    assert campaign.targeting.geo is not None and campaign.targeting.geo.radius is not None
    assert campaign.targeting.geo.radius[0].radius_km == 10
    assert campaign.exclusions is not None and campaign.exclusions.venue_tags == ["outdoor"]
    assert [(d.days, d.start_hour, d.end_hour) for d in campaign.dayparts] == [(["mon", "tue"], 7, 10)]
    assert [(c.period, c.metric, c.limit) for c in campaign.caps] == [("daily", "plays", 200)]
    assert campaign.frequency is not None and campaign.frequency.per_hour == 4
    assert (campaign.tier, campaign.weight, campaign.cpm, campaign.share_of_voice) == (
        "sponsorship",
        50,
        12.5,
        0.25,
    )


def test_a_bad_value_is_the_apis_invalid_field_naming_the_input() -> None:
    with pytest.raises(ApiError) as caught:
        decode(campaign_body(CAMPAIGN_FORM | {"caps[0].limit": "-3"}), CampaignIn)
    assert (caught.value.code, caught.value.field) == ("invalid_field", "caps[0].limit")
    assert error_for(caught.value, "caps[0]") == caught.value.message
    assert error_for(caught.value, "caps[1]") is None
    with pytest.raises(ApiError) as caught:
        decode({"venue_id": "v", "name": "n", "latitude": "north"}, VenueIn)
    assert caught.value.field == "latitude"


def test_a_stored_campaign_round_trips_through_its_edit_form() -> None:
    campaign = decode(campaign_body(CAMPAIGN_FORM), CampaignIn)
    import msgspec

    stored = msgspec.convert(
        msgspec.to_builtins(campaign)
        | {"id": 1, "all_venues": False, "creatives": [], "created_at": 0, "status": "active"},
        __import__("adslot.campaigns.schemas", fromlist=["Campaign"]).Campaign,
    )
    patch = campaign_patch({k: "" if v is None else str(v) for k, v in campaign_form(stored).items()})
    assert patch.dayparts == campaign.dayparts and patch.caps == campaign.caps
    assert patch.targeting == campaign.targeting and patch.venue_ids == campaign.venue_ids


def test_a_blank_rule_in_an_edit_clears_it_as_a_patch_with_null_does() -> None:
    patch = campaign_patch({"name": "x", "start_at": "", "cpm": ""})
    assert patch.cpm is None and patch.exclusions is None and patch.frequency is None
    assert patch.targeting == TargetingRules()
    assert patch.all_venues is True


def test_lists_split_on_commas_and_lines_and_times_are_utc() -> None:
    assert words({"x": " a, b\n c ,, "}, "x") == ["a", "b", "c"]
    assert words({"x": " "}, "x") is None
    assert utc_time({"t": "2026-12-04T10:00"}, "t") == 1_796_378_400
    assert utc_input(1_796_378_400) == "2026-12-04T10:00"
    with pytest.raises(ApiError) as caught:
        utc_time({"t": "tomorrow"}, "t")
    assert caught.value.field == "t"


@pytest.mark.parametrize(
    ("typed", "problem"),
    [
        ("99999999999999999999", "Expected `int` <= 1000000"),
        ("-1", "Expected `int` >= 1"),
        ("1e3", "Expected `int`, got `float`"),
        ("1000.0", "Expected `int`, got `float`"),
        ("abc", "Expected `int`, got `str`"),
        ("²", "Expected `int`, got `str`"),
    ],
)
def test_a_number_field_is_read_as_the_same_text_in_a_json_body_is(typed: str, problem: str) -> None:
    with pytest.raises(ApiError) as refused:
        decode(campaign_body(CAMPAIGN_FORM | {"weight": typed}), CampaignIn)
    assert (refused.value.status, refused.value.field, refused.value.message) == (400, "weight", problem)


def test_a_number_in_a_text_field_stays_text_and_a_float_field_takes_an_exponent() -> None:
    form = CAMPAIGN_FORM | {
        "name": "1e3",
        "targeting.venue_types": "1.2",
        "cpm": "1e1",
        "caps[0].limit": "2e3",
    }
    form |= {"caps[0].period": "daily", "caps[0].metric": "plays"}
    campaign = decode(campaign_body(form), CampaignIn)
    assert campaign.name == "1e3" and campaign.cpm == 10.0 and campaign.caps[0].limit == 2000.0
    assert campaign.targeting is not None and campaign.targeting.venue_types == ["1.2"]


def test_an_id_typed_in_a_form_is_bounded_as_the_apis_path_ids_are() -> None:
    assert row_id("2147483647", "campaign_id", "pick one") == 2147483647
    for typed in ("2147483648", "99999999999999999999", "0", "-1", "1e3", "abc", "²", ""):
        with pytest.raises(ApiError) as refused:
            row_id(typed, "campaign_id", "pick one")
        assert (refused.value.status, refused.value.field) == (400, "campaign_id")
