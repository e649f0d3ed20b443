"""Creative fit: orientation, aspect within 2%, format and duration, as far as the screen declares them."""

from __future__ import annotations

import pytest

from adslot.decision.fit import fits, orientation_of
from adslot.decision.model import ScreenProfile
from tests.decision.factories import creative

FULL_HD = ScreenProfile("v1", "s1", width=1920, height=1080)


def test_no_screen_accepts_any_creative() -> None:
    assert fits(creative(1, width=1080, height=1920, mime_type="image/gif", duration_seconds=999), None)


def test_a_screen_that_declares_nothing_accepts_any_creative() -> None:
    assert fits(creative(1, width=1080, height=1920, duration_seconds=999), ScreenProfile("v1", "s1"))


@pytest.mark.parametrize(
    ("width", "height", "orientation"),
    [(1920, 1080, "landscape"), (1080, 1920, "portrait"), (1080, 1080, "square")],
)
def test_orientation_follows_width_and_height(width: int, height: int, orientation: str) -> None:
    assert orientation_of(width, height) == orientation


def test_a_larger_creative_of_the_same_aspect_fits() -> None:
    assert fits(creative(1, width=3840, height=2160), FULL_HD)


def test_a_portrait_creative_does_not_fit_a_landscape_screen() -> None:
    assert not fits(creative(1, width=1080, height=1920), FULL_HD)


def test_aspect_within_two_percent_fits_and_beyond_does_not() -> None:
    # 16:9 is 1.7778; 1920x1100 is 1.7455 (1.8% off); 1920x1110 is 1.7297 (2.7% off).
    assert fits(creative(1, width=1920, height=1100), FULL_HD)
    assert not fits(creative(1, width=1920, height=1110), FULL_HD)
    # 4:3 is a third off 16:9.
    assert not fits(creative(1, width=1440, height=1080), FULL_HD)


def test_aspect_tolerance_is_relative_to_the_screen_on_both_sides() -> None:
    # 2% of 1.7778 is 0.0356: 1.8133 (x1958) is inside, 1.8222 (x1968) is not.
    assert fits(creative(1, width=1958, height=1080), FULL_HD)
    assert not fits(creative(1, width=1968, height=1080), FULL_HD)


def test_declared_orientation_alone_constrains_orientation_only() -> None:
    portrait = ScreenProfile("v1", "s1", orientation="portrait")
    assert fits(creative(1, width=1080, height=1920), portrait)
    assert fits(creative(1, width=600, height=1600), portrait)  # no size declared: any portrait aspect
    assert not fits(creative(1, width=1920, height=1080), portrait)
    assert not fits(creative(1, width=1000, height=1000), portrait)


def test_declared_orientation_wins_over_the_declared_size() -> None:
    # A panel mounted rotated may report its native landscape size and a portrait orientation.
    rotated = ScreenProfile("v1", "s1", width=1920, height=1080, orientation="portrait")
    assert not fits(creative(1, width=1920, height=1080), rotated)


def test_a_square_screen_takes_only_square_creatives() -> None:
    square = ScreenProfile("v1", "s1", width=1080, height=1080)
    assert fits(creative(1, width=2000, height=2000), square)
    assert not fits(creative(1, width=1090, height=1080), square)


def test_mime_type_must_be_among_the_declared_ones() -> None:
    mp4_only = ScreenProfile("v1", "s1", mime_types=frozenset({"video/mp4"}))
    assert fits(creative(1, mime_type="video/mp4"), mp4_only)
    assert not fits(creative(1, mime_type="video/webm"), mp4_only)


def test_an_empty_mime_type_set_counts_as_undeclared() -> None:
    assert fits(creative(1, mime_type="video/webm"), ScreenProfile("v1", "s1", mime_types=frozenset()))


def test_duration_may_equal_but_not_exceed_the_maximum() -> None:
    ten_seconds = ScreenProfile("v1", "s1", max_duration_seconds=10)
    assert fits(creative(1, duration_seconds=10), ten_seconds)
    assert not fits(creative(1, duration_seconds=11), ten_seconds)


def test_every_declared_constraint_must_hold_at_once() -> None:
    strict = ScreenProfile(
        "v1", "s1", width=1920, height=1080, mime_types=frozenset({"video/mp4"}), max_duration_seconds=15
    )
    assert fits(creative(1), strict)
    assert not fits(creative(1, duration_seconds=16), strict)
    assert not fits(creative(1, mime_type="image/png"), strict)
    assert not fits(creative(1, width=1080, height=1920), strict)


def test_a_creative_without_height_never_fits_a_sized_screen() -> None:
    assert not fits(creative(1, width=1920, height=0), FULL_HD)
