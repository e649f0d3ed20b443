"""The main benchmark's connection counts: parsed, each round running every server at each count, and the
pixel lists minted long enough for all of them (bench.runner)."""

from __future__ import annotations

import dataclasses

import pytest
from bench.runner import DEFAULT_CONNECTIONS, Bench, Options, Target, parse_args
from bench.scenarios import Scenario, select
from bench.servers import mint_seconds
from bench.wrk import WrkResult


def test_by_default_the_max_rate_runs_go_at_64_and_256_connections() -> None:
    assert DEFAULT_CONNECTIONS == (64, 256)
    assert parse_args([]).connections == (64, 256)
    assert parse_args(["--connections", "128"]).connections == (128,)
    assert parse_args(["--connections", "64,512"]).base_connections == 64


@pytest.mark.parametrize("bad", ["0", "64,64", "x", "1"])
def test_connection_counts_must_be_distinct_and_at_least_the_thread_count(bad: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--connections", bad, "--threads", "2"])


def test_each_count_multiplies_the_seconds_a_pixel_list_is_minted_for() -> None:
    impression = select(["impression"])[0]
    one = parse_args(["--connections", "64", "--no-half-load"])
    two = dataclasses.replace(one, connections=(64, 256))
    assert Bench(two, "wrk").mint_seconds(impression) == 2 * Bench(one, "wrk").mint_seconds(impression)


def test_the_half_load_pixels_get_a_list_of_their_own_minted_for_their_runs_alone() -> None:
    impression = select(["impression"])[0]
    paced = impression.paced_list()
    assert paced.paced and not impression.paced
    assert paced.uuid_set != impression.uuid_set, "its own file and its own walk (Bench.offsets)"
    assert (paced.name, paced.script, paced.requests_per_uuid) == ("impression", "impression.lua", 1)
    args = parse_args(["--rounds", "3", "--duration", "8", "--connections", "64,256"])
    bench = Bench(args, "wrk")
    # The max-rate list: 3 rounds of 8 s at two counts; the paced one: 3 paced runs and a 3 s trial at
    # about half the rate. Neither pays for the other's runs.
    assert bench.mint_seconds(impression) == mint_seconds(3 * 8 * 2, 1)
    assert bench.mint_seconds(paced) == mint_seconds((3 * 8 + 3) / 2, 1)


class _Recording(Bench):
    """Records the runs Bench.run makes instead of starting wrk: the order is what is under test here."""

    def __init__(self, args: Options) -> None:
        super().__init__(args, "wrk")
        self.made: list[tuple[str, int]] = []

    def wrk_run(
        self,
        target: Target,
        scenario: Scenario,
        duration: int,
        extra: dict[str, str],
        connections: int | None = None,
    ) -> WrkResult:
        self.made.append((target.name, connections or 0))
        return WrkResult(1, 1.0, float(len(self.made)), 0, 1, 1, 1, 1, 1, 1.0, 0, {})


def test_every_round_runs_each_server_at_each_count_before_the_next_round() -> None:
    args = dataclasses.replace(parse_args(["--rounds", "2"]), connections=(64, 256))
    bench = _Recording(args)
    targets = [Target(name, None, {}) for name in ("bare", "adslot")]  # type: ignore[arg-type]
    results = bench.run(targets, select(["vast"])[0])
    assert bench.made == [("bare", 64), ("adslot", 64), ("bare", 256), ("adslot", 256)] * 2
    assert {c: {n: [r.rps for r in runs] for n, runs in by.items()} for c, by in results.items()} == {
        64: {"bare": [1.0, 5.0], "adslot": [2.0, 6.0]},
        256: {"bare": [3.0, 7.0], "adslot": [4.0, 8.0]},
    }
