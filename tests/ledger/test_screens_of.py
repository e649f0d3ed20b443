"""What a writer keeps of the screens of the ad requests it issued: found without a read, bounded."""

from __future__ import annotations

from adslot.ledger.screens_of import ScreensOf
from tests.ledger.stores import record


def test_issued_ad_requests_are_found_by_id_and_others_are_left_to_read() -> None:
    kept = ScreensOf()
    mine, unseen = record(screen_id="s1"), record()
    no_screen = record(venue_id="atrium", screen_id=None)
    kept.add([mine, no_screen])
    found, missing = kept.find([mine.id, unseen.id, no_screen.id])
    assert found == {mine.id: ("lobby", "s1"), no_screen.id: ("atrium", None)}
    assert missing == [unseen.id]


def test_the_oldest_are_forgotten_beyond_the_limit_and_equal_screens_share_one_tuple() -> None:
    kept = ScreensOf(limit=3)
    made = [record(screen_id="s1") for _ in range(5)]
    kept.add(made)
    assert len(kept) == 3
    found, missing = kept.find([r.id for r in made])
    assert missing == [made[0].id, made[1].id]
    assert len({id(where) for where in found.values()}) == 1
