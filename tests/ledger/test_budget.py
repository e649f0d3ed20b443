"""Admission rules on delivery counters: caps, pacing, frequency, separation; delivery and release.

The property tests drive arbitrary sequences of issues, impressions, expiries and early releases and check,
after every step, that no counter ever holds more than its cap and that each counter's reserved and delivered
units are exactly what the outstanding and played ad requests account for.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from adslot.ledger.budget import Counter, DeliveryCache, admit, ceil_div, deliver, release, stage
from adslot.ledger.claims import Claim, Claims, PacePlan, Spacing, claims_json

PLAY = 1_767_600_000


def one(key: str, units: int = 1, cap: int | None = 10, pace: PacePlan | None = None) -> Claims:
    return Claims((Claim(key, units, cap, pace),))


# --- caps -------------------------------------------------------------------------------------------


def test_a_claim_that_fits_reserves_its_units_and_takes_the_campaigns_current_cap() -> None:
    counters = {"c1:life:plays": Counter(10, reserved=3, delivered=4)}
    assert admit(one("c1:life:plays", cap=8), PLAY, counters) is None
    assert counters["c1:life:plays"] == Counter(8, reserved=4, delivered=4)


def test_a_claim_that_would_pass_its_cap_is_refused_as_cap_reached_and_changes_nothing() -> None:
    counters = {"c1:life:plays": Counter(8, reserved=3, delivered=5)}
    assert admit(one("c1:life:plays", cap=8), PLAY, counters) == "cap_reached"
    assert counters == {"c1:life:plays": Counter(8, reserved=3, delivered=5)}


def test_exactly_reaching_the_cap_is_admitted() -> None:
    counters = {"k": Counter(8, reserved=2, delivered=5)}
    assert admit(one("k", units=1, cap=8), PLAY, counters) is None
    assert admit(one("k", units=1, cap=8), PLAY, counters) == "cap_reached"


def test_a_counter_that_does_not_exist_yet_starts_empty() -> None:
    counters: dict[str, Counter] = {}
    assert admit(one("c1:day:2026-01-05:impressions", units=1500, cap=2000), PLAY, counters) is None
    assert counters == {"c1:day:2026-01-05:impressions": Counter(2000, reserved=1500)}
    assert admit(one("c2:life:plays", units=3, cap=2), PLAY, {}) == "cap_reached"


def test_an_uncapped_claim_is_counted_but_never_refused() -> None:
    counters = {"k": Counter(None, reserved=10**9)}
    assert admit(one("k", units=5, cap=None), PLAY, counters) is None
    assert counters["k"].reserved == 10**9 + 5


def test_all_or_nothing_one_failing_claim_reserves_none_of_the_others() -> None:
    claims = Claims((Claim("a", 1, 5), Claim("b", 1, 1), Claim("c", 1, 5)))
    counters = {"b": Counter(1, delivered=1)}
    assert admit(claims, PLAY, counters) == "cap_reached"
    assert counters == {"b": Counter(1, delivered=1)}


def test_frequency_keys_are_refused_as_frequency() -> None:
    counters = {"f1:lobby/s1:h:1767600000": Counter(2, delivered=2)}
    assert admit(one("f1:lobby/s1:h:1767600000", cap=2), PLAY, counters) == "frequency"


def test_the_first_claim_that_does_not_fit_gives_the_reason() -> None:
    claims = Claims((Claim("c1:life:plays", 1, 0), Claim("f1:v/:d:2026-01-05", 1, 0)))
    assert admit(claims, PLAY, {}) == "cap_reached"


# --- pacing -------------------------------------------------------------------------------------------


def test_a_new_pacing_hour_gets_what_is_left_of_the_goal_spread_over_the_hours_left_rounded_up() -> None:
    pace = PacePlan("c1:life:plays", goal=100, remaining_active_hours=8)
    counters = {"c1:life:plays": Counter(100, reserved=5, delivered=25)}  # 70 left over 8 hours: 8.75
    assert admit(one("c1:hour:1", cap=None, pace=pace), PLAY, counters) is None
    assert counters["c1:hour:1"] == Counter(9, reserved=1)


def test_a_pacing_hour_keeps_the_cap_it_was_created_with() -> None:
    pace = PacePlan("c1:life:plays", goal=100, remaining_active_hours=1)
    counters = {"c1:life:plays": Counter(100), "c1:hour:1": Counter(2, delivered=2)}
    assert admit(one("c1:hour:1", cap=None, pace=pace), PLAY, counters) == "paced"
    assert counters["c1:hour:1"] == Counter(2, delivered=2)


def test_a_pacing_hour_created_when_the_goal_is_spent_gets_cap_zero_never_negative() -> None:
    pace = PacePlan("c1:life:plays", goal=10, remaining_active_hours=3)
    counters = {"c1:life:plays": Counter(10, delivered=12)}
    assert stage(one("c1:hour:1", cap=None, pace=pace), PLAY, counters) == "paced"
    staged = stage(Claims((Claim("c1:hour:1", 0, None, pace),)), PLAY, counters)
    assert isinstance(staged, dict) and staged["c1:hour:1"].cap == 0


def test_a_pacing_row_inserted_empty_by_postgresql_is_sized_like_a_missing_one() -> None:
    pace = PacePlan("c1:life:plays", goal=30, remaining_active_hours=3)
    counters = {"c1:life:plays": Counter(30), "c1:hour:1": Counter(None)}
    assert admit(one("c1:hour:1", cap=None, pace=pace), PLAY, counters) is None
    assert counters["c1:hour:1"] == Counter(10, reserved=1)


def test_ceil_div_rounds_up_and_is_exact_for_large_integers() -> None:
    assert [ceil_div(n, 4) for n in (0, 1, 4, 5, -3)] == [0, 1, 1, 2, 0]
    assert ceil_div(10**18 + 1, 10**9) == 10**9 + 1


# --- separation -------------------------------------------------------------------------------------------


def spacing(play_time: int, gap: int = 600, key: str = "s:lobby/s1:cars") -> Claims:
    return Claims((), (Spacing(key, play_time, gap),))


def test_the_first_play_of_a_category_on_a_screen_is_admitted_and_marked() -> None:
    counters: dict[str, Counter] = {}
    assert admit(spacing(PLAY), PLAY, counters) is None
    assert counters["s:lobby/s1:cars"] == Counter(600, last_at=PLAY)


def test_a_play_closer_than_the_gap_after_the_last_is_refused_as_separation() -> None:
    counters = {"s:lobby/s1:cars": Counter(600, last_at=PLAY)}
    assert admit(spacing(PLAY + 599), PLAY + 599, counters) == "separation"
    assert admit(spacing(PLAY + 600), PLAY + 600, counters) is None
    assert counters["s:lobby/s1:cars"].last_at == PLAY + 600


def test_the_larger_of_the_two_gaps_applies() -> None:
    wide = {"s:lobby/s1:cars": Counter(900, last_at=PLAY)}
    assert admit(spacing(PLAY + 700, gap=300), PLAY + 700, wide) == "separation"
    narrow = {"s:lobby/s1:cars": Counter(300, last_at=PLAY)}
    assert admit(spacing(PLAY + 700, gap=900), PLAY + 700, narrow) == "separation"
    assert admit(spacing(PLAY + 900, gap=900), PLAY + 900, narrow) is None


def test_a_play_before_the_marked_one_is_refused_because_older_plays_are_not_remembered() -> None:
    counters = {"s:lobby/s1:cars": Counter(600, last_at=PLAY)}
    assert admit(spacing(PLAY - 3600), PLAY - 3600, counters) == "separation"


def test_separation_is_checked_with_the_counts_all_or_nothing() -> None:
    claims = Claims((Claim("c1:life:plays", 1, 5),), (Spacing("s:v/:cars", PLAY, 600),))
    counters = {"s:v/:cars": Counter(600, last_at=PLAY - 10)}
    assert admit(claims, PLAY, counters) == "separation"
    assert "c1:life:plays" not in counters


# --- deliver and release -------------------------------------------------------------------------------


def test_a_counted_impression_moves_units_from_reserved_to_delivered() -> None:
    counters = {"a": Counter(10, reserved=3, delivered=1), "b": Counter(None, reserved=2000)}
    deliver('[["a",2],["b",1500]]', counters)
    assert counters == {
        "a": Counter(10, reserved=1, delivered=3),
        "b": Counter(None, reserved=500, delivered=1500),
    }


def test_a_release_returns_reserved_units_and_leaves_delivered_alone() -> None:
    counters = {"a": Counter(10, reserved=3, delivered=1)}
    release('[["a",2]]', counters)
    assert counters == {"a": Counter(10, reserved=1, delivered=1)}


def test_an_ad_request_without_claims_moves_nothing() -> None:
    counters = {"a": Counter(10, reserved=3)}
    deliver(None, counters)
    release(None, counters)
    assert counters == {"a": Counter(10, reserved=3)}


# --- the invariant, over arbitrary histories -------------------------------------------------------------

KEYS = ("c1:life:plays", "c1:day:d:plays", "f1:v/s:h:0", "c2:life:impressions")
SPACING_KEYS = ("s:v/s:cars", "s:v/t:cars")
claim_strategy = st.builds(
    Claim,
    key=st.sampled_from(KEYS),
    units=st.integers(min_value=0, max_value=4),
    cap=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
)
pace_strategy = st.builds(
    lambda hour, total, goal, hours, units: Claim(
        f"c1:hour:{hour}", units, None, PacePlan(total, goal, hours)
    ),
    hour=st.integers(min_value=0, max_value=2),
    total=st.sampled_from(KEYS),
    goal=st.integers(min_value=-5, max_value=30),
    hours=st.integers(min_value=0, max_value=5),
    units=st.integers(min_value=0, max_value=3),
)
spacing_strategy = st.builds(
    Spacing,
    key=st.sampled_from(SPACING_KEYS),
    play_time=st.just(0),
    gap_seconds=st.integers(min_value=1, max_value=900),
)


def unique_keys(claims: list[Claim]) -> tuple[Claim, ...]:
    """plan_claims never repeats a key within one ad request."""
    return tuple({c.key: c for c in claims}.values())


class Ledger(RuleBasedStateMachine):
    """The pure ledger as the stores drive it, against a model of who holds what."""

    outstanding = Bundle("outstanding")

    def __init__(self) -> None:
        super().__init__()
        self.counters: dict[str, Counter] = {}
        self.held: dict[int, list[tuple[str, int]]] = {}  # reserved by unplayed ad requests
        self.delivered: dict[int, list[tuple[str, int]]] = {}
        self.plays: dict[str, list[tuple[int, int]]] = {}  # spacing key -> [(play_time, gap)]
        self.ids = itertools.count()
        self.clock = PLAY

    @rule(
        target=outstanding,
        counts=st.lists(st.one_of(claim_strategy, pace_strategy), max_size=4),
        spacings=st.lists(spacing_strategy, max_size=1),
        advance=st.integers(min_value=-900, max_value=1200),
    )
    def issue(self, counts: list[Claim], spacings: list[Spacing], advance: int) -> int:
        self.clock += advance
        spaced = tuple(Spacing(s.key, self.clock, s.gap_seconds) for s in spacings)
        claims = Claims(unique_keys(counts), spaced)
        before = {k: c.snapshot() for k, c in self.counters.items()}
        reason = admit(claims, self.clock, self.counters)
        ident = next(self.ids)
        if reason is not None:
            assert {k: c.snapshot() for k, c in self.counters.items()} == before
            return -1
        self.held[ident] = [(c.key, c.units) for c in claims.counts]
        for s in spaced:
            self.plays.setdefault(s.key, []).append((s.play_time, s.gap_seconds))
        return ident

    @rule(ident=consumes(outstanding))
    def impression(self, ident: int) -> None:
        if ident in self.held:
            deliver(claims_json(Claims(tuple(Claim(k, u, None) for k, u in self.held[ident]))), self.counters)
            self.delivered[ident] = self.held.pop(ident)

    @rule(ident=consumes(outstanding))
    def released_or_expired(self, ident: int) -> None:
        if ident in self.held:
            release(claims_json(Claims(tuple(Claim(k, u, None) for k, u in self.held[ident]))), self.counters)
            del self.held[ident]

    @invariant()
    def no_counter_exceeds_its_cap(self) -> None:
        for key, counter in self.counters.items():
            if counter.cap is not None and not key.startswith("s:"):
                assert counter.delivered + counter.reserved <= counter.cap, key

    @invariant()
    def counters_account_exactly_for_held_and_delivered_units(self) -> None:
        reserved: dict[str, int] = {}
        delivered: dict[str, int] = {}
        for units in self.held.values():
            for key, u in units:
                reserved[key] = reserved.get(key, 0) + u
        for units in self.delivered.values():
            for key, u in units:
                delivered[key] = delivered.get(key, 0) + u
        for key, counter in self.counters.items():
            assert counter.reserved == reserved.get(key, 0), key
            assert counter.delivered == delivered.get(key, 0), key

    @invariant()
    def no_two_plays_of_a_category_on_a_screen_are_closer_than_their_gap(self) -> None:
        for plays in self.plays.values():
            for (t1, g1), (t2, g2) in itertools.combinations(plays, 2):
                assert abs(t1 - t2) >= max(g1, g2)


TestLedgerInvariant = Ledger.TestCase
TestLedgerInvariant.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# --- the worker's cache --------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_accepts_keys_it_has_never_seen() -> None:
    cache = DeliveryCache()
    assert cache.accepts(one("c1:life:plays", cap=1), PLAY)
    assert cache.accepts(Claims(), PLAY)


def test_the_cache_refuses_what_the_ledger_reported_full_and_changes_nothing_itself() -> None:
    cache = DeliveryCache()
    cache.update({"c1:life:plays": (10, 4, 6, None)})
    assert not cache.accepts(one("c1:life:plays", cap=10), PLAY)
    assert not cache.accepts(one("c1:life:plays", cap=10), PLAY)  # asking twice does not reserve
    assert cache.accepts(one("c1:life:plays", cap=11), PLAY)  # the operator raised the cap


def test_the_cache_applies_separation_and_pacing_like_the_ledger() -> None:
    cache = DeliveryCache()
    cache.update({"s:v/s:cars": (600, 0, 0, PLAY), "c1:life:plays": (100, 0, 99, None)})
    assert not cache.accepts(spacing(PLAY + 60, key="s:v/s:cars"), PLAY + 60)
    assert cache.accepts(spacing(PLAY + 600, key="s:v/s:cars"), PLAY + 600)
    pace = PacePlan("c1:life:plays", goal=100, remaining_active_hours=5)
    assert cache.accepts(one("c1:hour:9", cap=None, pace=pace), PLAY)  # 1 left over 5 hours: cap 1
    assert not cache.accepts(one("c1:hour:9", units=2, cap=None, pace=pace), PLAY)


def test_the_cache_forgets_a_counter_after_its_ttl_so_freed_room_is_asked_for_again() -> None:
    clock = Clock()
    cache = DeliveryCache(ttl_seconds=5, clock=clock)
    cache.update({"c1:life:plays": (10, 10, 0, None)})
    clock.now += 4.9
    assert not cache.accepts(one("c1:life:plays", cap=10), PLAY)
    clock.now += 0.2
    assert cache.accepts(one("c1:life:plays", cap=10), PLAY)
    assert len(cache) == 0


def test_the_cache_is_bounded_and_drops_the_least_recently_refreshed_counters() -> None:
    cache = DeliveryCache(max_keys=3)
    cache.update({"a": (0, 0, 0, None), "b": (0, 0, 0, None), "c": (0, 0, 0, None)})
    cache.update({"a": (0, 0, 0, None)})  # refreshed: now the newest
    cache.update({"d": (0, 0, 0, None)})
    assert len(cache) == 3
    assert cache.accepts(one("b", cap=0), PLAY)  # forgotten, so unknown, so accepted
    assert not cache.accepts(one("a", cap=0), PLAY)
    assert not cache.accepts(one("c", cap=0), PLAY)
    assert not cache.accepts(one("d", cap=0), PLAY)
