"""Campaign rules in stored form: exact money and impression units, and the checks msgspec cannot make."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from adslot.campaigns.rules import CampaignRules, StoredCap, micros, stored_caps, wire_cap
from adslot.campaigns.schemas import CampaignIn, CampaignPatch, Cap
from adslot.errors import ApiError


def campaign(**rules: Any) -> CampaignIn:
    return msgspec.convert({"advertiser_id": 1, "name": "c", "start_at": 1, "end_at": 2, **rules}, CampaignIn)


def refused(call: Any) -> tuple[int, str, str | None]:
    with pytest.raises(ApiError) as raised:
        call()
    return raised.value.status, raised.value.code, raised.value.field


@pytest.mark.parametrize(
    ("amount", "expected"),
    [(1.005, 1_005_000), (1234.567891, 1_234_567_891), (0.000001, 1), (19.99, 19_990_000), (7, 7_000_000)],
)
def test_amounts_become_exact_micros_without_binary_float_error(amount: float, expected: int) -> None:
    assert micros(amount, "cpm") == expected


@pytest.mark.parametrize("amount", [1.0000001, 0.1234567, 1e-7])
def test_an_amount_with_more_than_six_decimals_is_refused_not_rounded(amount: float) -> None:
    assert refused(lambda: micros(amount, "caps[2].limit")) == (400, "invalid_field", "caps[2].limit")


def test_caps_are_stored_in_plays_milli_impressions_and_spend_micros_and_read_back_as_sent() -> None:
    sent = [
        Cap("lifetime", "plays", 500),
        Cap("daily", "impressions", 1200),
        Cap("daily", "spend", 12.345678),
        Cap("lifetime", "impressions", 3.0),
    ]
    stored = stored_caps(sent)
    assert stored == [
        StoredCap("lifetime", "plays", 500),
        StoredCap("daily", "impressions", 1_200_000),
        StoredCap("daily", "spend", 12_345_678),
        StoredCap("lifetime", "impressions", 3_000),
    ]
    assert [wire_cap(c) for c in stored] == [*sent[:3], Cap("lifetime", "impressions", 3)]


def test_two_caps_of_one_period_and_metric_are_refused_at_the_second() -> None:
    caps = [Cap("daily", "plays", 1), Cap("lifetime", "plays", 1), Cap("daily", "plays", 2)]
    assert refused(lambda: stored_caps(caps)) == (400, "invalid_field", "caps[2]")


def test_targeting_countries_are_upper_cased_and_its_venue_list_is_left_to_campaign_venues() -> None:
    rules = CampaignRules.from_input(
        campaign(
            targeting={"venue_ids": ["a"], "geo": {"countries": ["de", "At"]}},
            exclusions={"venue_ids": ["b"], "geo": {"countries": ["ch"]}},
        )
    )
    stored = msgspec.json.decode(rules.columns()["rules"])
    assert stored["targeting"]["geo"]["countries"] == ["DE", "AT"]
    assert "venue_ids" not in stored["targeting"]
    assert (stored["exclusions"]["venue_ids"], stored["exclusions"]["geo"]["countries"]) == (["b"], ["CH"])


def test_stored_rules_read_back_equal_to_what_was_written() -> None:
    rules = CampaignRules.from_input(
        campaign(
            tier="house",
            weight=3,
            timezone="Asia/Tokyo",
            targeting={"venue_tags": ["x"]},
            dayparts=[{"days": ["sun"], "start_hour": 23, "end_hour": 1}],
            caps=[{"period": "daily", "metric": "spend", "limit": 2.5}],
            cpm=1.25,
            pacing="even",
            frequency={"per_day": 3},
            separation_minutes=10,
            share_of_voice=0.5,
        )
    )
    assert CampaignRules.from_row(rules.columns()) == rules
    assert CampaignRules.from_row({**CampaignRules().columns(), "rules": "{}"}) == CampaignRules()


def test_a_patch_replaces_only_what_it_gives() -> None:
    before = CampaignRules.from_input(
        campaign(cpm=2, caps=[{"period": "daily", "metric": "plays", "limit": 5}], frequency={"per_hour": 1})
    )
    after = before.patched(msgspec.convert({"weight": 9, "cpm": None, "frequency": None}, CampaignPatch))
    assert (after.weight, after.cpm_micros, after.rules.frequency) == (9, None, None)
    assert (after.tier, after.rules.caps) == (before.tier, before.rules.caps)
    assert before.patched(CampaignPatch()) == before


@pytest.mark.parametrize(
    ("rules", "category", "expected"),
    [
        ({"timezone": "Nowhere/Land"}, None, (422, "invalid_timezone", "timezone")),
        ({"caps": [{"period": "daily", "metric": "spend", "limit": 1}]}, None, (422, "invalid_goal", "cpm")),
        ({"pacing": "even"}, None, (422, "invalid_goal", "pacing")),
        ({"separation_minutes": 1}, None, (422, "missing_category", "separation_minutes")),
    ],
)
def test_goals_that_cannot_be_met_are_refused(
    rules: dict[str, Any], category: str | None, expected: tuple[int, str, str]
) -> None:
    checked = CampaignRules.from_input(campaign(**rules))
    assert refused(lambda: checked.check(1, category)) == expected


def test_goals_that_can_be_met_pass() -> None:
    rules = CampaignRules.from_input(
        campaign(
            caps=[{"period": "lifetime", "metric": "spend", "limit": 100}],
            cpm=4,
            pacing="even",
            separation_minutes=20,
        )
    )
    rules.check(1, "beverages")


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"dayparts": [{"days": ["mon", "tue", "mon"], "start_hour": 1, "end_hour": 2}]}, "dayparts[0].days"),
        ({"frequency": {"per_hour": None, "per_day": None}}, "frequency"),
        ({"targeting": {"geo": {"countries": ["GB", "UK"]}}}, "targeting.geo.countries[1]"),
        ({"exclusions": {"geo": {"countries": ["EU"]}}}, "exclusions.geo.countries[0]"),
        ({"caps": [{"period": "daily", "metric": "plays", "limit": 2.5}]}, "caps[0].limit"),
    ],
)
def test_shapes_msgspec_cannot_judge_are_refused_with_their_path(rules: dict[str, Any], field: str) -> None:
    assert refused(lambda: CampaignRules.from_input(campaign(**rules))) == (400, "invalid_field", field)
