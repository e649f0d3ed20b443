"""The order in which a benchmark round runs its servers (bench.runner.round_order)."""

from __future__ import annotations

from bench.runner import round_order


def test_one_adslot_server_runs_right_after_the_bare_app_in_every_round() -> None:
    assert [round_order(["bare", "adslot"], n) for n in (1, 2, 3)] == [["bare", "adslot"]] * 3


def test_growths_servers_take_every_place_after_the_bare_app_in_turn() -> None:
    servers = ["bare", "adslot@0", "adslot@1M", "adslot@10M"]
    orders = [round_order(servers, n) for n in range(1, 7)]
    assert orders[:3] == [
        ["bare", "adslot@0", "adslot@1M", "adslot@10M"],
        ["bare", "adslot@1M", "adslot@10M", "adslot@0"],
        ["bare", "adslot@10M", "adslot@0", "adslot@1M"],
    ]
    assert orders[3:] == orders[:3]
    for place in (1, 2, 3):  # over each three rounds, every server ran once in each place
        assert sorted(order[place] for order in orders[:3]) == sorted(servers[1:])
