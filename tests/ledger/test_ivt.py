"""The invalid-traffic rules alone: each flags what it should, lets a real play through, and can be switched
off."""

from __future__ import annotations

from adslot.ledger.ivt import IvtConfig, Judge, comparable, network_key

NONE = (None,) * 6
IMPRESSION, START, FIRST, MIDPOINT, THIRD, COMPLETE = range(6)
T0 = 1_800_000_000
NET = network_key("203.0.113.7")
OTHER_NET = network_key("198.51.100.7")


def times(**at: int) -> tuple[int | None, ...]:
    order = ("impression", "start", "first", "midpoint", "third", "complete")
    return tuple(at.get(name) for name in order)


def test_a_real_30_second_play_is_never_flagged() -> None:
    judge = Judge()
    known: list[int | None] = [None] * 6
    for index, offset in enumerate((0, 0, 8, 15, 23, 30)):
        assert judge.judge(index, T0 + offset, tuple(known), 30, NET, NET) is None
        known[index] = T0 + offset


def test_a_complete_one_second_after_the_start_is_too_fast() -> None:
    assert Judge().judge(COMPLETE, T0 + 1, times(start=T0), 30, NET, NET) == "too_fast"


def test_a_first_quartile_within_the_tolerance_of_its_share_passes() -> None:
    # 30 s: a quarter is 7.5 s, 75 % of it 5.6 s, less 2 s of tolerance: 3.6 s.
    judge = Judge()
    assert judge.judge(FIRST, T0 + 4, times(impression=T0), 30, NET, NET) is None
    assert judge.judge(FIRST, T0 + 3, times(impression=T0), 30, NET, NET) == "too_fast"


def test_an_event_played_before_an_earlier_one_is_out_of_order() -> None:
    judge = Judge()
    assert judge.judge(MIDPOINT, T0 + 30, times(start=T0, third=T0 + 25), 30, NET, NET) == "out_of_order"
    assert judge.judge(START, T0 + 40, times(complete=T0 + 30), 30, NET, NET) == "out_of_order"


def test_a_start_judged_after_its_complete_is_checked_against_it() -> None:
    # Offline fires may arrive in any order: the rules compare played_at times, not arrivals.
    assert Judge().judge(START, T0, times(complete=T0 + 2), 30, NET, NET) == "too_fast"
    assert Judge().judge(START, T0, times(complete=T0 + 30), 30, NET, NET) is None


def test_an_unknown_duration_skips_too_fast_only() -> None:
    judge = Judge()
    assert judge.judge(COMPLETE, T0 + 1, times(start=T0), None, NET, NET) is None
    assert judge.judge(FIRST, T0 + 10, times(midpoint=T0), None, NET, NET) == "out_of_order"


def test_a_fire_from_another_network_is_foreign() -> None:
    judge = Judge()
    assert judge.judge(IMPRESSION, T0, NONE, 30, NET, OTHER_NET) == "foreign_network"
    assert judge.judge(IMPRESSION, T0, NONE, 30, NET, network_key("203.0.200.1")) is None  # same /16
    assert judge.judge(IMPRESSION, T0, NONE, 30, NET, 0) is None  # the fire's network unknown
    assert judge.judge(IMPRESSION, T0, NONE, 30, 0, OTHER_NET) is None  # the ad request's unknown


def test_network_keys_follow_the_prefix_lengths_and_families() -> None:
    assert network_key("10.1.2.3") == network_key("10.1.200.200")
    assert network_key("10.1.2.3") != network_key("10.2.2.3")
    assert network_key("10.1.2.3", 24) != network_key("10.1.200.200", 24)
    assert network_key("::ffff:10.1.2.3") == network_key("10.1.9.9")
    assert network_key("2001:db8:1::1") == network_key("2001:db8:1:ffff::2")
    assert network_key("2001:db8:1::1") != network_key("2001:db8:2::1")
    assert network_key("not an address") == 0 and network_key(None) == 0
    assert network_key("2001:db8:1::1") < 1 << 63  # a BIGINT
    # Keys made with other prefix lengths (the setting changed) are not compared.
    assert not comparable(network_key("10.1.2.3", 16), network_key("10.9.2.3", 24))
    assert comparable(network_key("10.1.2.3"), network_key("2001:db8::1"))


def test_more_first_impressions_from_one_network_than_the_limit_is_a_burst() -> None:
    judge = Judge(IvtConfig(burst_impressions=3, burst_seconds=60))
    answers = [judge.judge(IMPRESSION, T0 + n, NONE, 30, 0, NET) for n in range(5)]
    assert answers == [None, None, None, "burst", "burst"]
    # Another network has its own count, and quartiles are not counted.
    assert judge.judge(IMPRESSION, T0, NONE, 30, 0, OTHER_NET) is None
    assert judge.judge(START, T0 + 4, NONE, 30, 0, NET) is None


def test_the_burst_window_slides_so_old_impressions_stop_weighing() -> None:
    judge = Judge(IvtConfig(burst_impressions=2, burst_seconds=10))
    base = T0 - T0 % 10
    assert judge.judge(IMPRESSION, base, NONE, 30, 0, NET) is None
    assert judge.judge(IMPRESSION, base + 1, NONE, 30, 0, NET) is None
    # 9 s into the next window the previous one still weighs 1/10 of its 2: 1 + 0.2 is not more than 2.
    assert judge.judge(IMPRESSION, base + 19, NONE, 30, 0, NET) is None
    assert judge.judge(IMPRESSION, base + 40, NONE, 30, 0, NET) is None


def test_each_rule_can_be_switched_off() -> None:
    judge = Judge(IvtConfig(rules=()))
    assert judge.judge(COMPLETE, T0 + 1, times(start=T0), 30, NET, OTHER_NET) is None
    assert judge.judge(MIDPOINT, T0 + 30, times(third=T0 + 20), 30, NET, NET) is None
    only_order = Judge(IvtConfig(rules=("out_of_order",)))
    assert only_order.judge(COMPLETE, T0 + 1, times(start=T0), 30, NET, OTHER_NET) is None
    assert only_order.judge(MIDPOINT, T0 + 30, times(third=T0 + 20), 30, NET, NET) == "out_of_order"
    many = Judge(IvtConfig(rules=("too_fast",), burst_impressions=1))
    assert [many.judge(IMPRESSION, T0, NONE, 30, 0, NET) for _ in range(3)] == [None, None, None]
