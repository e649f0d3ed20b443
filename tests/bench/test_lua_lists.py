"""The pixel scripts fire on the uuids of their list file, in its order, from one string read at once.

A real wrk runs bench/lua's scripts against a small loopback server that records each request's path. The
list is read whole (not line by line into a table): wrk runs each thread's init while the threads before it
already fire, so a slow load would run inside the measured run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest
from bench.wrk import WrkError, run_wrk, wrk_binary

from adslot.ids import uuid7
from tests.bench.loopback import KeepAlive, serving
from tests.bench.test_bench_smoke import require_wrk

T = TypeVar("T")


class _Paths(KeepAlive):
    paths: list[str] = []  # noqa: RUF012 - shared by the handler instances of one server
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    paths: list[str] = []
    with serving(type("Paths", (_Paths,), {"paths": paths})) as url:
        yield url, paths


def _fire(url: str, script: str, uuids: Path) -> None:
    binary = wrk_binary()
    assert binary is not None
    run_wrk(
        binary,
        url,
        script,
        duration_s=1,
        connections=1,
        threads=1,
        script_args={"uuids": str(uuids), "venue": "v"},
    )


def _twice_round(fired: list[T], listed: list[T]) -> bool:
    """Whether the first fires walk `listed` in order twice round. wrk calls request() once before it
    starts (to check the script), so the walk begins one further on."""
    start = listed.index(fired[0])
    return fired[: 2 * len(listed)] == [listed[(start + k) % len(listed)] for k in range(2 * len(listed))]


def _queries(
    recorder: tuple[str, list[str]], tmp_path: Path, script: str, uuids: list[str]
) -> list[dict[str, str]]:
    """The query of each request `script` made in a second on a list of `uuids`."""
    require_wrk()
    url, paths = recorder
    listed = tmp_path / "uuids.txt"
    listed.write_text("\n".join(uuids) + "\n")
    _fire(url, script, listed)
    return [{k: v[0] for k, v in parse_qs(urlsplit(path).query).items()} for path in paths]


@pytest.mark.timeout(60)
def test_the_impression_script_fires_each_uuid_of_its_list_in_order_then_repeats_it(
    recorder: tuple[str, list[str]], tmp_path: Path
) -> None:
    uuids = [str(uuid7()) for _ in range(5)]
    fired = [q["ad_request_uuid"] for q in _queries(recorder, tmp_path, "impression.lua", uuids)]
    assert len(fired) > 2 * len(uuids), "wrk made too few requests in a second to see the list repeat"
    assert _twice_round(fired, uuids)


@pytest.mark.timeout(60)
def test_the_tracking_script_fires_the_five_quartiles_of_each_uuid_before_the_next(
    recorder: tuple[str, list[str]], tmp_path: Path
) -> None:
    uuids = [str(uuid7()) for _ in range(3)]
    queries = _queries(recorder, tmp_path, "tracking.lua", uuids)
    fired = [(q["ad_request_uuid"], q["event"]) for q in queries]
    events = ["start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]
    expected = [(u, e) for u in uuids for e in events]
    assert len(fired) > 2 * len(expected), "wrk made too few requests in a second to see the list repeat"
    assert _twice_round(fired, expected)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("{a}\n{b}x\n{c}\n", id="a-longer-line"),
        pytest.param("{a}\n{b}\n{c}", id="no-newline-after-the-last-line"),
    ],
)
def test_a_list_whose_lines_are_not_all_one_uuid_wide_is_refused(
    recorder: tuple[str, list[str]], tmp_path: Path, text: str
) -> None:
    require_wrk()
    url, paths = recorder
    listed = tmp_path / "uuids.txt"
    listed.write_text(text.format(a=uuid7(), b=uuid7(), c=uuid7()))
    with pytest.raises(WrkError):
        _fire(url, "impression.lua", listed)
    assert paths == []
