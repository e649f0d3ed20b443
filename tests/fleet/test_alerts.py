"""Which silences raise which alerts, and which clear: one per episode, a dark venue as one."""

from __future__ import annotations

from adslot.fleet.alerts import AlertKey, OpenAlert, cleared, new_alerts, playing_verdict, silence_alerts
from adslot.fleet.hours import parse_schedule
from adslot.fleet.status import Seen, VenueInfo

NOW = 1_800_000_000
SILENT = 900
VENUES = {
    "v": VenueInfo("v", "V", "UTC"),
    "shut": VenueInfo("shut", "Shut", "UTC", hours=parse_schedule({})),
}


def seen(venue: str, screen: str, last: int | None) -> Seen:
    return Seen(venue, screen, NOW - 86400, last, None, None)


def test_a_lone_screen_silent_past_the_threshold_raises_one_alert_for_its_episode() -> None:
    rows = [seen("v", "a", NOW - SILENT)]
    wanted = silence_alerts(rows, VENUES, NOW, SILENT)
    assert wanted == [AlertKey("screen_silent", "v", "a", NOW - SILENT)]
    assert silence_alerts([seen("v", "a", NOW - SILENT + 1)], VENUES, NOW, SILENT) == []
    opened = [OpenAlert(1, wanted[0])]
    assert new_alerts(silence_alerts(rows, VENUES, NOW + 60, SILENT), opened) == [], "never twice"
    assert cleared(opened, rows) == []
    assert cleared(opened, [seen("v", "a", NOW + 5)]) == opened


def test_a_never_seen_screen_and_a_closed_venue_raise_nothing() -> None:
    rows = [seen("v", "new", None), seen("shut", "a", NOW - 10 * SILENT)]
    assert silence_alerts(rows, VENUES, NOW, SILENT) == []


def test_a_venue_whose_screens_all_went_silent_is_one_alert_and_clears_when_any_asks() -> None:
    rows = [seen("v", f"s{n}", NOW - SILENT - n) for n in range(50)]
    wanted = silence_alerts(rows, VENUES, NOW, SILENT)
    assert wanted == [AlertKey("venue_dark", "v", "", NOW - SILENT)]
    rows[7] = seen("v", "s7", NOW + 1)
    assert cleared([OpenAlert(3, wanted[0])], rows) == [OpenAlert(3, wanted[0])]


def test_screens_stopping_together_are_held_back_until_the_venue_is_dark() -> None:
    # Half silent a moment before the other half: no screen alert, the venue's comes a look later.
    rows = [seen("v", "early", NOW - SILENT), seen("v", "late", NOW - SILENT + 5)]
    assert silence_alerts(rows, VENUES, NOW, SILENT) == []
    assert [k.kind for k in silence_alerts(rows, VENUES, NOW + 5, SILENT)] == ["venue_dark"]
    # A screen silent while its neighbour still asks is a screen alert.
    rows = [seen("v", "dead", NOW - 2 * SILENT), seen("v", "alive", NOW - 1)]
    assert silence_alerts(rows, VENUES, NOW, SILENT) == [
        AlertKey("screen_silent", "v", "dead", NOW - 2 * SILENT)
    ]


def test_a_window_with_ads_and_too_few_plays_is_not_playing() -> None:
    assert playing_verdict(10, 2, 0.5) is False
    assert playing_verdict(10, 5, 0.5) is True
    assert playing_verdict(2, 0, 0.5) is None, "too few ads to tell"
