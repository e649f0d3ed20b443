"""What a writer keeps of the screens of the ad requests it issued: found without a read, bounded."""

from __future__ import annotations

from adslot.ledger.screens_of import ScreensOf
from tests.ledger.stores import record


def test_issued_ad_requests_are_found_by_id_and_others_are_left_to_read() -> None:
    kept = ScreensOf()
    mine, unseen = record(screen_id="s1"), record()
    no_screen = record(venue_id="atrium", screen_id=None)
    kept.add([mine, no_screen])
    assert kept.by_id == {mine.id.int: ("lobby", "s1"), no_screen.id.int: ("atrium", None)}
    assert unseen.id.int not in kept.by_id


def test_an_ad_request_read_back_is_kept_from_then_on() -> None:
    kept = ScreensOf()
    other_writers = record(screen_id="s9")
    kept.learn([(other_writers.id, "lobby", "s9")])
    assert kept.by_id[other_writers.id.int] == ("lobby", "s9")


def test_the_oldest_are_forgotten_beyond_the_limit_and_equal_screens_share_one_tuple() -> None:
    kept = ScreensOf(limit=3)
    made = [record(screen_id="s1") for _ in range(5)]
    kept.add(made)
    assert len(kept) == 3
    assert [r.id.int in kept.by_id for r in made] == [False, False, True, True, True]
    assert len({id(where) for where in kept.by_id.values()}) == 1
