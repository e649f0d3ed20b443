"""Claim planning: which counters one play reserves, with which units, caps, pacing plans and spacings."""

from __future__ import annotations

import calendar
import datetime
from dataclasses import replace
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adslot.decision.model import ALL_HOURS, Cap, FrequencyCap, LiveCampaign, VenueProfile
from adslot.decision.slot import Slot, make_slot
from adslot.ledger.claims import (
    MAX_KEY_LENGTH,
    NO_CLAIMS,
    Claim,
    Claims,
    PacePlan,
    Spacing,
    active_hours,
    claims_json,
    closes_at,
    impressions_for,
    parse_claims,
    plan_claims,
    units_of,
)

HOUR = 3600
MONDAY = calendar.timegm((2026, 1, 5, 0, 0, 0))
"""Monday 2026-01-05 00:00 UTC: hour of week 0 in UTC."""
PLAY = MONDAY + 10 * HOUR + 120  # Monday 10:02 UTC


def campaign(**changes: object) -> LiveCampaign:
    base = LiveCampaign(id=7, advertiser_id=3, name="Spring", start_at=MONDAY, end_at=MONDAY + 14 * 86_400)
    return replace(base, **changes)  # type: ignore[arg-type]


def slot(
    play_time: int = PLAY, venue_id: str = "lobby", screen_id: str | None = "s1", timezone: str = "UTC"
) -> Slot:
    return make_slot(VenueProfile(venue_id, timezone=timezone), screen_id, None, play_time)


# --- nothing to claim -----------------------------------------------------------------------------


def test_a_campaign_without_caps_frequency_or_separation_claims_nothing_and_allocates_nothing() -> None:
    claims = plan_claims(campaign(pacing="even"), slot(), 1.0)
    assert claims is NO_CLAIMS
    assert not claims
    assert claims_json(claims) is None


def test_separation_needs_both_a_category_and_minutes() -> None:
    assert plan_claims(campaign(category="cars"), slot(), 1.0) is NO_CLAIMS
    assert plan_claims(campaign(separation_minutes=10), slot(), 1.0) is NO_CLAIMS


# --- caps ---------------------------------------------------------------------------------------------


def test_lifetime_plays_cap_claims_one_play_on_the_campaigns_lifetime_counter() -> None:
    claims = plan_claims(campaign(caps=(Cap("lifetime", "plays", 100),)), slot(), 2.5)
    assert claims == Claims((Claim("c7:life:plays", 1, 100),))


def test_impressions_count_in_thousandths_and_spend_in_micros_of_the_cpm() -> None:
    caps = (Cap("lifetime", "impressions", 10_000_000), Cap("lifetime", "spend", 50_000_000))
    claims = plan_claims(campaign(caps=caps, cpm_micros=4_000_000), slot(), 2.5)
    assert claims.counts == (
        Claim("c7:life:impressions", 2500, 10_000_000),
        Claim("c7:life:spend", 10_000, 50_000_000),  # 2.5 impressions at 4.00 per thousand = 0.01
    )


def test_units_round_to_the_nearest_integer() -> None:
    assert units_of("impressions", 1.2345, None) == 1234
    assert units_of("impressions", 1.2346, None) == 1235
    assert units_of("spend", 1.0, 1_500) == 2  # 1.5 micros rounds to even
    assert units_of("spend", 3.0, None) == 0
    assert units_of("plays", 0.0, None) == 1


def test_daily_cap_counts_the_day_in_the_campaigns_timezone_not_utc() -> None:
    tuesday_0230_utc = MONDAY + 26 * HOUR + 1800  # still Monday 21:30 in New York
    claims = plan_claims(
        campaign(caps=(Cap("daily", "plays", 40),), timezone="America/New_York"), slot(tuesday_0230_utc), 1.0
    )
    assert claims.counts == (Claim("c7:day:2026-01-05:plays", 1, 40),)
    utc_claims = plan_claims(campaign(caps=(Cap("daily", "plays", 40),)), slot(tuesday_0230_utc), 1.0)
    assert utc_claims.counts == (Claim("c7:day:2026-01-06:plays", 1, 40),)


def test_a_play_worth_zero_units_claims_nothing_on_that_metric() -> None:
    caps = (Cap("lifetime", "impressions", 1000), Cap("lifetime", "plays", 10))
    claims = plan_claims(campaign(caps=caps), slot(), 0.0)
    assert claims.counts == (Claim("c7:life:plays", 1, 10),)


def test_two_caps_on_the_same_counter_keep_the_tighter_limit() -> None:
    caps = (Cap("lifetime", "plays", 100), Cap("lifetime", "plays", 60), Cap("lifetime", "plays", 80))
    assert plan_claims(campaign(caps=caps), slot(), 1.0).counts == (Claim("c7:life:plays", 1, 60),)


# --- even pacing ------------------------------------------------------------------------------------------


def test_even_pacing_claims_the_play_hour_sized_from_the_lifetime_goal_over_the_flights_active_hours() -> (
    None
):
    end = MONDAY + 20 * HOUR  # flight ends Monday 20:00; the play is in the 10:00 hour: 10 hours left
    c = campaign(caps=(Cap("lifetime", "impressions", 90_000),), pacing="even", end_at=end)
    claims = plan_claims(c, slot(), 1.5)
    hour = MONDAY + 10 * HOUR
    assert claims.counts == (
        Claim("c7:life:impressions", 1500, 90_000),
        Claim(f"c7:hour:{hour}", 1500, None, PacePlan("c7:life:impressions", 90_000, 10)),
    )


def test_pacing_counts_only_the_dayparted_hours_left_in_the_flight() -> None:
    nine_to_five = sum(1 << (day * 24 + h) for day in range(7) for h in range(9, 17))
    c = campaign(
        caps=(Cap("lifetime", "plays", 1000),),
        pacing="even",
        hours_of_week=nine_to_five,
        end_at=MONDAY + 3 * 86_400,  # Monday to Wednesday
    )
    pace = plan_claims(c, slot(), 1.0).counts[1].pace
    # This hour (10:00) plus 11..16 today, then 8 hours on Tuesday and 8 on Wednesday.
    assert pace == PacePlan("c7:life:plays", 1000, 1 + 6 + 8 + 8)


def test_pacing_without_a_lifetime_cap_spreads_the_daily_cap_over_the_days_remaining_hours() -> None:
    c = campaign(caps=(Cap("daily", "plays", 48),), pacing="even", timezone="Europe/Berlin")
    claims = plan_claims(c, slot(), 1.0)  # 10:02 UTC is 11:02 in Berlin: 13 hours left until midnight
    assert claims.counts[1].pace == PacePlan("c7:day:2026-01-05:plays", 48, 13)


def test_the_first_lifetime_cap_is_the_pacing_goal_even_after_a_daily_one() -> None:
    caps = (Cap("daily", "plays", 10), Cap("lifetime", "impressions", 5000))
    pace = plan_claims(campaign(caps=caps, pacing="even"), slot(), 1.0).counts[-1].pace
    assert pace is not None and (pace.total_key, pace.goal) == ("c7:life:impressions", 5000)


def test_asap_campaigns_claim_no_pacing_hour() -> None:
    claims = plan_claims(campaign(caps=(Cap("lifetime", "plays", 10),)), slot(), 1.0)
    assert all(c.pace is None for c in claims.counts)


def brute_force_active_hours(mask: int, first: int, hours: int) -> int:
    return sum(1 for i in range(hours) if mask >> ((first + i) % 168) & 1)


@given(
    mask=st.integers(min_value=0, max_value=ALL_HOURS),
    first=st.integers(min_value=0, max_value=167),
    hours=st.integers(min_value=0, max_value=168 * 5 + 100),
)
def test_active_hours_by_weekly_arithmetic_equals_counting_hour_by_hour(
    mask: int, first: int, hours: int
) -> None:
    assert active_hours(mask, first, hours) == brute_force_active_hours(mask, first, hours)


# --- frequency --------------------------------------------------------------------------------------------


def test_frequency_claims_per_screen_hour_and_venue_local_day() -> None:
    c = campaign(frequency=FrequencyCap(per_hour=2, per_day=12))
    late_evening = MONDAY + 23 * HOUR + 1800  # Tuesday 00:30 in Berlin
    claims = plan_claims(c, slot(late_evening, timezone="Europe/Berlin"), 1.0)
    hour = MONDAY + 23 * HOUR
    assert claims.counts == (
        Claim(f"f7:lobby/s1:h:{hour}", 1, 2),
        Claim("f7:lobby/s1:d:2026-01-06", 1, 12),
    )


def test_a_request_without_a_screen_counts_the_venue_as_one_screen() -> None:
    claims = plan_claims(campaign(frequency=FrequencyCap(per_day=3)), slot(screen_id=None), 1.0)
    assert claims.counts == (Claim("f7:lobby/:d:2026-01-05", 1, 3),)


# --- separation ---------------------------------------------------------------------------------------------


def test_separation_is_a_spacing_per_screen_and_category_in_seconds() -> None:
    claims = plan_claims(campaign(category="cars", separation_minutes=10), slot(), 1.0)
    assert claims == Claims((), (Spacing("s:lobby/s1:cars", PLAY, 600),))
    assert claims_json(claims) is None  # nothing to give back later


# --- keys --------------------------------------------------------------------------------------------------


def all_keys(claims: Claims) -> list[str]:
    return [c.key for c in claims.counts] + [s.key for s in claims.spacings]


LIMITED = campaign(frequency=FrequencyCap(per_hour=1, per_day=1), category="cars", separation_minutes=5)


def test_places_that_would_print_alike_get_different_keys() -> None:
    # venue "a/b" + screen "c" and venue "a" + screen "b/c" would both print "a/b/c".
    one = all_keys(plan_claims(LIMITED, slot(venue_id="a/b", screen_id="c"), 1.0))
    other = all_keys(plan_claims(LIMITED, slot(venue_id="a", screen_id="b/c"), 1.0))
    assert set(one).isdisjoint(other)
    # screen "x:h" on separation "s:v/x:h:cars" vs screen "x", category "h:cars".
    colon = all_keys(plan_claims(LIMITED, slot(screen_id="x:h"), 1.0))
    assert set(colon).isdisjoint(
        all_keys(plan_claims(replace(LIMITED, category="h:cars"), slot(screen_id="x"), 1.0))
    )
    assert all("#" in key for key in one + colon)


def test_long_ids_are_hashed_so_every_key_fits_its_column() -> None:
    claims = plan_claims(LIMITED, slot(venue_id="v" * 500, screen_id="s" * 500), 1.0)
    keys = all_keys(claims)
    assert len(keys) == 3
    assert all(len(key) <= MAX_KEY_LENGTH for key in keys)
    other = all_keys(plan_claims(LIMITED, slot(venue_id="v" * 500, screen_id="s" * 499 + "t"), 1.0))
    assert set(keys).isdisjoint(other)


def test_absurd_category_still_gives_a_key_that_fits() -> None:
    claims = plan_claims(replace(LIMITED, category="x" * 400), slot(), 1.0)
    assert len(claims.spacings[0].key) <= MAX_KEY_LENGTH


def test_ordinary_ids_stay_readable() -> None:
    keys = all_keys(plan_claims(LIMITED, slot(venue_id="lobby", screen_id="s1"), 1.0))
    assert all("lobby/s1" in key for key in keys)


# --- audience and stored form -------------------------------------------------------------------------


def test_impressions_come_from_the_hour_of_week_multiplier_when_the_venue_has_one() -> None:
    hourly = tuple(float(h) / 10 for h in range(168))
    assert impressions_for(VenueProfile("v", impressions_per_play=3.0), 50) == 3.0
    assert impressions_for(VenueProfile("v", impressions_per_play=3.0, hourly_impressions=hourly), 50) == 5.0


def test_stored_claims_read_back_as_key_and_units() -> None:
    claims = plan_claims(
        campaign(caps=(Cap("lifetime", "plays", 5), Cap("daily", "impressions", 9000))), slot(), 2.0
    )
    text = claims_json(claims)
    assert text == '[["c7:life:plays",1],["c7:day:2026-01-05:impressions",2000]]'
    assert parse_claims(text) == (("c7:life:plays", 1), ("c7:day:2026-01-05:impressions", 2000))
    assert parse_claims(None) == ()


def test_claims_with_non_ascii_keys_read_back_as_written() -> None:
    claims = Claims((Claim("f7:Café Zürich/écran 1:h:1800000000", 1, 2), Claim("c7:life:plays", 1, 5)))
    text = claims_json(claims)
    assert text is not None and "Café Zürich" in text  # kept as UTF-8, not escaped
    assert parse_claims(text) == (("f7:Café Zürich/écran 1:h:1800000000", 1), ("c7:life:plays", 1))


@pytest.mark.parametrize("timezone", ["UTC", "Asia/Kolkata", "America/St_Johns", "Asia/Kathmandu"])
def test_daily_keys_use_the_local_date_at_every_minute_even_in_quarter_hour_offset_zones(
    timezone: str,
) -> None:
    c = campaign(caps=(Cap("daily", "plays", 1),), timezone=timezone)
    for play_time in range(MONDAY, MONDAY + 86_400 + 1, 300):
        local = datetime.datetime.fromtimestamp(play_time, ZoneInfo(timezone)).date()
        assert plan_claims(c, slot(play_time), 1.0).counts[0].key == f"c7:day:{local.isoformat()}:plays"


# --- when a counter closes ---------------------------------------------------------------------------------


def test_every_counter_a_plan_names_closes_with_its_hour_or_day_and_lifetime_and_separation_never() -> None:
    c = campaign(
        caps=(Cap("lifetime", "plays", 100), Cap("daily", "plays", 10)),
        pacing="even",
        frequency=FrequencyCap(per_hour=2, per_day=12),
        category="cars",
        separation_minutes=5,
    )
    late_evening = MONDAY + 23 * HOUR + 1800  # Monday in the campaign's UTC, Tuesday 00:30 in Berlin
    claims = plan_claims(c, slot(late_evening, timezone="Europe/Berlin"), 1.0)
    hour = MONDAY + 23 * HOUR
    monday_ends_everywhere = MONDAY + 86_400 + 12 * HOUR  # Tuesday 12:00 UTC: midnight at UTC-12
    tuesday_ends_everywhere = monday_ends_everywhere + 86_400
    assert {key: closes_at(key) for key in all_keys(claims)} == {
        "c7:life:plays": None,
        "c7:day:2026-01-05:plays": monday_ends_everywhere,
        f"c7:hour:{hour}": hour + HOUR,
        f"f7:lobby/s1:h:{hour}": hour + HOUR,
        "f7:lobby/s1:d:2026-01-06": tuesday_ends_everywhere,
        "s:lobby/s1:cars": None,
    }


def test_a_place_holding_colons_or_a_hashed_place_still_gives_the_window() -> None:
    c = campaign(frequency=FrequencyCap(per_hour=1, per_day=1))
    for venue, screen in (("mall:east", "s1"), ("a/b", "c:d"), ("x" * 120, "y" * 120)):
        hour_key, day_key = all_keys(plan_claims(c, slot(venue_id=venue, screen_id=screen), 1.0))
        assert closes_at(hour_key) == MONDAY + 11 * HOUR
        assert closes_at(day_key) == MONDAY + 86_400 + 12 * HOUR


@pytest.mark.parametrize(
    "key", ["", "c", "c7", "c7:hour:soon", "c7:day:2026-13-01:plays", "f7:lobby/s1:h:", "f7:x:w:1", "zz:1"]
)
def test_a_key_this_module_does_not_write_never_closes(key: str) -> None:
    assert closes_at(key) is None
