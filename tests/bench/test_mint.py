"""The mint's ad requests name a slot still ahead when its last one is sent, however long it runs, and the
benchmark fires on them latest first.

wrk sends one prebuilt request for a whole run, so its play_time is fixed when wrk starts; adslot refuses a
play_time more than its skew (60 s) in the past, and a pixel list takes minutes to mint. A real wrk runs
mint.lua against a small loopback server that records the bodies it receives and answers each with a fresh
uuid7, as adslot does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.runner import BARE, Bench, Target, parse_args
from bench.scenarios import Scenario, select
from bench.servers import PLAY_LEAD_SECONDS, Server, mint_ad_requests

from adslot.ids import uuid7
from tests.bench.loopback import KeepAlive, serving
from tests.bench.test_bench_smoke import require_wrk
from tests.test_ids import unix_ms


class _Recorder(KeepAlive):
    play_times: list[int] = []  # noqa: RUF012 - shared by the handler instances of one server
    issued: list[str] = []  # noqa: RUF012 - in the order answered, as above
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.play_times.append(body["play_time"])
            issued = str(uuid7())
            self.issued.append(issued)
        answer = b'{"data":{"ad_request_uuid":"%s"}}' % issued.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[int], list[str]]]:
    play_times: list[int] = []
    issued: list[str] = []
    with serving(type("Recorder", (_Recorder,), {"play_times": play_times, "issued": issued})) as url:
        yield url, play_times, issued


@pytest.mark.timeout(60)
def test_a_mint_asks_for_a_play_time_a_lead_after_its_own_end(
    recorder: tuple[str, list[int], list[str]], tmp_path: Path
) -> None:
    wrk = require_wrk()
    url, play_times, _ = recorder
    seconds = 2
    started = time.time()
    uuids = mint_ad_requests(wrk, url, "key", seconds, tmp_path / "uuids.txt", connections=2, threads=1)
    assert uuids and play_times, "wrk made no request"
    assert len(set(play_times)) == 1, "one prebuilt request for the whole run"
    assert play_times[0] >= int(started) + seconds + PLAY_LEAD_SECONDS
    assert play_times[0] <= time.time() + seconds + PLAY_LEAD_SECONDS + 1


@pytest.mark.timeout(60)
def test_a_pixel_list_is_fired_latest_first_across_wrks_threads(
    recorder: tuple[str, list[int], list[str]], tmp_path: Path
) -> None:
    """A player fires on the ad request it was just given: the list starts at the last one issued, not
    behind everything minted since its first (mint.lua writes its threads' lists one after the other)."""
    wrk = require_wrk()
    url, _, issued = recorder
    path = tmp_path / "uuids.txt"
    returned = mint_ad_requests(wrk, url, "key", 2, path, connections=4, threads=2)
    listed = path.read_text().split()
    assert returned == listed, "bench.profile fires on the returned list, the benchmark on the file"
    # Every answer wrk read, once; the last few the recorder sent may have been in flight when wrk stopped.
    assert len(listed) > 100 and len(set(listed)) == len(listed) and set(listed) <= set(issued)
    assert len(issued) - len(listed) <= 4
    # Issue order, latest first (uuid7s of one millisecond may tie in either order).
    times = [unix_ms(uuid.UUID(u)) for u in listed]
    assert times == sorted(times, reverse=True)
    assert times[0] > times[-1]


def _bench_on(
    url: str, uuids: Path, offset: int, fastest: float | None, name: str = "adslot"
) -> tuple[Bench, Target, Scenario]:
    """A Bench whose impression runs on `url`'s list `uuids`, fired up to `offset`, at `fastest` req/s."""
    bench = Bench(parse_args(["--connections", "4", "--threads", "1"]), require_wrk())
    target = Target(name, Server(name, url, None, uuids), {"key": "key", "uuids": str(uuids)})  # type: ignore[arg-type]
    impression = select(["impression"])[0]
    bench.offsets[(name, impression.uuid_set)] = offset
    if fastest is not None:
        bench.fastest[(name, impression.uuid_set)] = fastest
    return bench, target, impression


@pytest.mark.timeout(60)
def test_a_list_the_next_run_may_outrun_gets_fresh_ad_requests_in_front_of_what_is_left(
    recorder: tuple[str, list[int], list[str]], tmp_path: Path
) -> None:
    """A mint slowed by another load makes a short list; the runs after the first, at full speed, would fire
    past its end into duplicates. The rate measured so far says how many the next run needs."""
    url, _, issued = recorder
    old = [str(uuid7()) for _ in range(10)][::-1]
    path = tmp_path / "uuids.txt"
    path.write_text("\n".join(old) + "\n")
    bench, target, impression = _bench_on(url, path, offset=4, fastest=200.0)
    bench.top_up(target, impression, duration=1)
    listed = path.read_text().split()
    assert listed[-6:] == old[4:], "the unfired rest stays, after the fresh ones"
    assert len(listed) - 6 >= 300 and set(listed[:-6]) <= set(issued), "1.5 x 200 req/s x 1 s, minted"
    assert bench.offsets[("adslot", impression.uuid_set)] == 0, "the next run starts at the fresh ones"
    times = [unix_ms(uuid.UUID(u)) for u in listed]
    assert times == sorted(times, reverse=True), "still latest first"
    assert any("minted onto its list" in note for note in bench.notes)


@pytest.mark.parametrize("fastest", [None, 1.0])
def test_a_list_long_enough_for_the_next_run_is_left_as_it_is(fastest: float | None, tmp_path: Path) -> None:
    old = [str(uuid7()) for _ in range(10)]
    path = tmp_path / "uuids.txt"
    path.write_text("\n".join(old) + "\n")
    bench, target, impression = _bench_on("http://127.0.0.1:9", path, offset=4, fastest=fastest)
    bench.top_up(target, impression, duration=1)
    assert path.read_text().split() == old and bench.offsets[("adslot", impression.uuid_set)] == 4


def test_the_bare_apps_runs_never_replace_the_adslot_servers_list_they_share(tmp_path: Path) -> None:
    """The bare app fires on an adslot server's list; uuids minted on the bare app would be unknown to that
    server, whose next runs would answer them 404."""
    old = [str(uuid7()) for _ in range(10)]
    path = tmp_path / "uuids.txt"
    path.write_text("\n".join(old) + "\n")
    bench, target, impression = _bench_on("http://127.0.0.1:9", path, offset=8, fastest=10_000.0, name=BARE)
    bench.top_up(target, impression, duration=1)
    assert path.read_text().split() == old and bench.offsets[(BARE, impression.uuid_set)] == 8
