"""The pre-caching manifest: every (campaign, creative) that may play on a screen in a coming window."""

from __future__ import annotations

from adslot.decision.dayparts import Daypart, compile_dayparts
from adslot.decision.index import DecisionIndex
from adslot.decision.manifest import hours_touched, upcoming
from adslot.decision.model import ALL_HOURS, ScreenProfile, Targeting, VenueProfile
from tests.decision.factories import HOUR, START, campaign, creative, utc

V1 = VenueProfile("v1")
MONDAY_9_TO_10 = compile_dayparts([Daypart((0,), 9, 10)])


def pairs(
    index: DecisionIndex,
    start: int,
    end: int,
    *,
    venue: VenueProfile = V1,
    screen_id: str | None = None,
    screen: ScreenProfile | None = None,
) -> list[tuple[int, int]]:
    if screen is not None and screen_id is None:
        screen_id = screen.screen_id
    return [(c.campaign.id, c.creative.id) for c in upcoming(index, venue, screen_id, screen, start, end)]


def test_lists_every_creative_of_every_campaign_that_may_play_sorted_by_ids() -> None:
    index = DecisionIndex.build(
        [campaign(3, creatives=2), campaign(1, creatives=(creative(12, 1), creative(11, 1))), campaign(2)]
    )
    assert pairs(index, START, START + HOUR) == [(1, 11), (1, 12), (2, 200), (3, 300), (3, 301)]


def test_includes_every_tier_and_ignores_weights_and_shares() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, tier="sponsorship"),
            campaign(2, tier="house", weight=1),
            campaign(3, share_of_voice=0.1),
        ]
    )
    assert [c for c, _ in pairs(index, START, START + HOUR)] == [1, 2, 3]


def test_leaves_out_what_can_never_play() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, weight=0),
            campaign(2, creatives=(creative(21, 2, weight=0), creative(22, 2))),
            campaign(3, venues=("v2",)),
            campaign(4, exclusions=Targeting(venue_ids=frozenset({"v1"}))),
        ]
    )
    assert pairs(index, START, START + HOUR) == [(2, 22)]


def test_a_flight_must_overlap_the_window() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, start_at=START, end_at=START + HOUR),
            campaign(2, start_at=START + HOUR, end_at=START + 2 * HOUR),
            campaign(3, start_at=START + 2 * HOUR, end_at=START + 3 * HOUR),
        ]
    )
    assert [c for c, _ in pairs(index, START + HOUR - 1, START + 2 * HOUR)] == [1, 2]
    assert [c for c, _ in pairs(index, START + HOUR, START + 2 * HOUR)] == [2]


def test_a_daypart_must_be_touched_by_the_window() -> None:
    index = DecisionIndex.build([campaign(1, hours_of_week=MONDAY_9_TO_10)])
    assert pairs(index, START + 8 * HOUR, START + 9 * HOUR) == []
    assert pairs(index, START + 8 * HOUR, START + 9 * HOUR + 1) == [(1, 100)]
    assert pairs(index, START + 10 * HOUR - 1, START + 11 * HOUR) == [(1, 100)]
    assert pairs(index, START + 10 * HOUR, START + 11 * HOUR) == []


def test_a_daypart_hour_outside_the_flight_does_not_count() -> None:
    # In the window 08:00-11:00 the daypart hour 09 exists, but the flight covers only 10:00-11:00.
    index = DecisionIndex.build([campaign(1, hours_of_week=MONDAY_9_TO_10, start_at=START + 10 * HOUR)])
    assert pairs(index, START + 8 * HOUR, START + 11 * HOUR) == []


def test_dayparts_are_read_in_the_venue_time_zone() -> None:
    index = DecisionIndex.build([campaign(1, hours_of_week=MONDAY_9_TO_10)])
    tokyo = VenueProfile("v1", timezone="Asia/Tokyo")  # UTC+9: Monday 09:00 JST is Monday 00:00 UTC
    assert pairs(index, START, START + HOUR, venue=tokyo) == [(1, 100)]
    assert pairs(index, START + 9 * HOUR, START + 10 * HOUR, venue=tokyo) == []


def test_a_local_hour_starting_at_a_quarter_past_the_utc_hour_is_found() -> None:
    # Asia/Kathmandu is UTC+5:45: Monday 10:00 local is 04:15 UTC.
    ten_am = compile_dayparts([Daypart((0,), 10, 11)])
    index = DecisionIndex.build([campaign(1, hours_of_week=ten_am)])
    kathmandu = VenueProfile("v1", timezone="Asia/Kathmandu")
    assert pairs(index, utc(2026, 1, 5, 4, 0), utc(2026, 1, 5, 4, 15), venue=kathmandu) == []
    assert pairs(index, utc(2026, 1, 5, 4, 0), utc(2026, 1, 5, 4, 16), venue=kathmandu) == [(1, 100)]


def test_screen_rules_and_fit_apply() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, creatives=(creative(11, 1), creative(12, 1, width=1080, height=1920))),
            campaign(2, targeting=Targeting(screen_ids=frozenset({"s2"}))),
            campaign(3, exclusions=Targeting(screen_ids=frozenset({"s1"}))),
        ]
    )
    hd = ScreenProfile("v1", "s1", width=1920, height=1080)
    assert pairs(index, START, START + HOUR, screen=hd) == [(1, 11)]
    assert pairs(index, START, START + HOUR) == [(1, 11), (1, 12), (3, 300)]
    assert pairs(index, START, START + HOUR, screen_id="s2") == [(1, 11), (1, 12), (2, 200), (3, 300)]


def test_an_empty_or_reversed_window_lists_nothing() -> None:
    index = DecisionIndex.build([campaign(1)])
    assert pairs(index, START + HOUR, START + HOUR) == []
    assert pairs(index, START + HOUR, START) == []


def test_hours_touched_by_a_window_of_two_weeks_or_more_are_all_hours() -> None:
    assert hours_touched("Europe/Berlin", START, START + 15 * 86_400) == ALL_HOURS


def test_hours_touched_by_a_week_are_all_hours_in_a_zone_without_dst() -> None:
    assert hours_touched("Asia/Kathmandu", START + 1234, START + 1234 + 7 * 86_400) == ALL_HOURS


def test_hours_touched_by_the_spring_forward_night_skip_the_missing_hour() -> None:
    mask = hours_touched("Europe/Berlin", utc(2026, 3, 28, 23), utc(2026, 3, 29, 4))
    sunday = 6 * 24
    assert {h for h in range(168) if mask >> h & 1} == {
        sunday,
        sunday + 1,
        sunday + 3,
        sunday + 4,
        sunday + 5,
    }
