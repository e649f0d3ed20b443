"""The processes under test: adslot (`adslot serve`) and the bare app, each in its own process group.

Both bind 127.0.0.1 only and run on the same stack (uvicorn, uvloop, httptools, no access log, same worker
count). Every process started here is stopped by its process-group id when its `with` block ends, also on
Ctrl-C or an exception.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.scenarios import PROGRAMMATIC_VENUE_ID
from bench.wrk import run_wrk

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
VENUE_ID = "bench-venue"
BIDDER_NAME = "bench-bidder"
DEFAULT_BIDDER_DELAY_MS = 20
SCREEN_ID = "bench-screen"
ACCOUNT = "bench"
LONG_SECONDS = 6 * 3600
"""Play-time lead and play window for the run: nothing the benchmark issued may expire while it runs."""


class ServerError(RuntimeError):
    """A server did not start, or a setup step failed."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _stop(process: subprocess.Popen[bytes], grace_s: float = 15) -> None:
    """SIGTERM the process group we created (graceful: adslot drains its writer), then SIGKILL it."""
    if process.poll() is not None:
        _kill_group(process.pid, signal.SIGKILL)
        return
    _kill_group(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    _kill_group(process.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


Launch = Callable[[int], tuple[list[str], dict[str, str]]]
"""Command and environment of a server, given the port it is to bind."""


def is_ours(client: httpx.Client, url: str, key: str) -> bool:
    """An ad request with the run's key fills, with VAST links to this URL: the server is the one we started.

    Other servers come and go on a shared machine; a port picked free may be taken before a slow-starting
    server binds it, and then a bare "does it answer" would measure someone else's process.
    """
    body = ad_request_body(int(time.time()) + 60)
    response = client.post(f"{url}/api/v1/ad/request?format=json", json=body, headers={"Ssp-Key": key})
    return response.status_code == 200 and f"{url}/api/v1/ad/vast/" in response.text


def _start(name: str, launch: Launch, log: Path, key: str, timeout_s: float) -> Server:
    port = free_port()
    command, env = launch(port)
    with log.open("ab") as log_file:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(name, f"http://{HOST}:{port}", process, log)
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=5) as client:
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if is_ours(client, server.url, key):
                    return server
                break  # another process answers on this port
            except httpx.HTTPError:
                time.sleep(0.1)
    _stop(process)
    code = process.returncode
    raise ServerError(f"{name} on port {port} did not start (exit {code}):\n{server.log_tail()}")


@contextmanager
def running(name: str, launch: Launch, log: Path, key: str, attempts: int = 3) -> Iterator[Server]:
    """Start a server in its own process group, check it is ours and answers, and always stop it afterwards.

    A start that fails (the port was taken meanwhile, or another server answers there) is retried on a new
    port.
    """
    for attempt in range(1, attempts + 1):
        try:
            server = _start(name, launch, log, key, timeout_s=60)
            break
        except ServerError:
            if attempt == attempts:
                raise
    try:
        yield server
    finally:
        _stop(server.process)


def base_env() -> dict[str, str]:
    """The caller's environment without ADSLOT_* settings, so only what the benchmark sets applies."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADSLOT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def adslot_env(
    data_dir: Path,
    port: int,
    *,
    postgres_url: str | None,
    schemas: tuple[str, str] | None,
    extra: Mapping[str, str],
) -> dict[str, str]:
    env = base_env()
    env |= {
        "ADSLOT_DATA_DIR": str(data_dir),
        "ADSLOT_HOST": HOST,
        "ADSLOT_PORT": str(port),
        "ADSLOT_PLAY_TIME_MAX_LEAD_SECONDS": str(LONG_SECONDS),
        "ADSLOT_PLAY_WINDOW_SECONDS": str(LONG_SECONDS),
    }
    if postgres_url:
        assert schemas is not None
        env |= {
            "ADSLOT_DATABASE_URL": postgres_url,
            "ADSLOT_DATABASE_SCHEMA": schemas[0],
            "ADSLOT_SANDBOX_DATABASE_SCHEMA": schemas[1],
        }
    env |= extra
    return env


def _cli(env: Mapping[str, str], *args: str) -> str:
    command = [sys.executable, "-m", "adslot.cli", *args]
    out = subprocess.run(
        command, cwd=REPO, env=dict(env), capture_output=True, text=True, timeout=120, check=False
    )
    if out.returncode != 0:
        raise ServerError(f"`adslot {' '.join(args)}` failed ({out.returncode}):\n{out.stderr}{out.stdout}")
    return out.stdout


def parse_caps(raw: str) -> str:
    """A JSON list of caps, as `adslot campaigns add --caps` takes it (the CLI checks each cap)."""
    try:
        caps = json.loads(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a JSON list of caps") from None
    if not isinstance(caps, list) or not caps:
        raise argparse.ArgumentTypeError("expected a non-empty JSON list of caps")
    return json.dumps(caps)


def setup_production(env: Mapping[str, str], caps: str | None = None) -> str:
    """Register a venue, an advertiser, a live campaign with one creative and an account key; return the key.

    Done through the CLI, as an operator would, before the server starts. `caps` (the CLI's --caps JSON)
    makes every ad request reserve against the campaign's counters and every impression deliver.
    """
    now = int(time.time())
    capped = ["--caps", caps] if caps else []
    _cli(env, "venues", "add", "--venue-id", VENUE_ID, "--name", "Bench venue", "--timezone", "UTC")
    advertiser = json.loads(_cli(env, "campaigns", "add-advertiser", "--name", "BenchCo"))
    campaign = json.loads(
        _cli(
            env,
            "campaigns",
            "add",
            "--advertiser-id",
            str(advertiser["id"]),
            "--name",
            "Bench campaign",
            "--start-at",
            str(now - 3600),
            "--end-at",
            str(now + 30 * 86400),
            "--venue",
            VENUE_ID,
            *capped,
        )
    )
    _cli(
        env,
        "campaigns",
        "add-creative",
        "--campaign-id",
        str(campaign["id"]),
        "--name",
        "Bench 15s",
        "--media-url",
        "https://cdn.example.com/bench.mp4",
        "--width",
        "1920",
        "--height",
        "1080",
        "--duration-seconds",
        "15",
        "--bitrate-kbps",
        "4000",
    )
    key = _cli(env, "keys", "create", "--env", "production", "--account", ACCOUNT).strip().splitlines()[0]
    if not key.startswith("ssp_live_"):
        raise ServerError(f"unexpected key output: {key!r}")
    return key


def setup_programmatic(env: Mapping[str, str], bidder_url: str) -> None:
    """Register the programmatic venue and the bench bidder as its only partner, through the CLI as an
    operator would. The venue has no campaign: an ad request for it fills only from the bidder's bid."""
    _cli(env, "venues", "add", "--venue-id", PROGRAMMATIC_VENUE_ID, "--name", "Bench programmatic venue")
    _cli(
        env,
        "demand",
        "add",
        "--env",
        "production",
        "--name",
        BIDDER_NAME,
        "--endpoint",
        f"{bidder_url}/openrtb2/auction",
        "--venues",
        PROGRAMMATIC_VENUE_ID,
        "--auto-approve",
    )


@dataclass
class BenchBidder:
    """`adslot demand test-bidder` as the programmatic scenario's partner; its log file says what adslot
    asked it, which the scenario's rows count (kinds())."""

    url: str
    delay_ms: int
    process: subprocess.Popen[bytes]
    log: Path
    read_to: int = 0
    """How far kinds() has read the log."""

    def kinds(self) -> dict[str, int]:
        """Entries logged since the last call, by kind (request, bid, no_bid, win, pixel ...)."""
        counts: dict[str, int] = {}
        with self.log.open("rb") as log:
            log.seek(self.read_to)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written is counted next time
        self.read_to += len(complete)
        for line in complete.splitlines():
            kind = str(json.loads(line).get("kind"))
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def bidder_command(port: int, delay_ms: int, log: Path) -> list[str]:
    """Always bids (`--no-bid-rate 0`), after `delay_ms`, logging to a file rather than a pipe."""
    return [
        sys.executable,
        "-m",
        "adslot.cli",
        "demand",
        "test-bidder",
        *("--host", HOST, "--port", str(port)),
        *("--delay-ms", str(delay_ms), "--no-bid-rate", "0", "--seed", "1", "--log", str(log)),
    ]


@contextmanager
def running_bidder(
    delay_ms: int, work: Path, attempts: int = 3, timeout_s: float = 60
) -> Iterator[BenchBidder]:
    """The test bidder on a free loopback port, in its own process group, stopped when the block ends."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        log = work / f"bidder-{port}.jsonl"
        log.touch()
        with (work / "bidder.out").open("ab") as out:
            process = subprocess.Popen(
                bidder_command(port, delay_ms, log),
                cwd=REPO,
                env=base_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        bidder = BenchBidder(f"http://{HOST}:{port}", delay_ms, process, log)
        if _bidder_answers(bidder, timeout_s):
            break
        _stop(process)
        if attempt == attempts:
            raise ServerError(f"the test bidder on port {port} did not start (exit {process.returncode})")
    try:
        yield bidder
    finally:
        _stop(bidder.process)


def _bidder_answers(bidder: BenchBidder, timeout_s: float) -> bool:
    """Its `GET /log` answers a JSON list: the bidder we started listens on its port."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=5) as client:
        while bidder.process.poll() is None and time.monotonic() < deadline:
            try:
                return isinstance(client.get(f"{bidder.url}/log").json(), list)
            except (httpx.HTTPError, ValueError):
                time.sleep(0.1)
    return False


def probe_programmatic(url: str, key: str, bidder: BenchBidder) -> tuple[int, dict[str, int]]:
    """One ad request for the programmatic venue: its status, and what the bidder logged meanwhile (a
    `request` when adslot asked it). Read before the runs, so a server that asks no partner is told apart
    from one whose auction is slow."""
    bidder.kinds()
    body = {**ad_request_body(int(time.time()) + 60), "venue_id": PROGRAMMATIC_VENUE_ID}
    with httpx.Client(timeout=10) as client:
        response = client.post(f"{url}/api/v1/ad/request?format=json", json=body, headers={"Ssp-Key": key})
    time.sleep(0.2)  # the bidder's log line is written as it answers: let the file catch up
    return response.status_code, bidder.kinds()


def admin_key(env: Mapping[str, str]) -> str:
    """A production key with the admin permission, for the delivery report (the ad request key has none)."""
    out = _cli(env, "keys", "create", "--env", "production", "--account", ACCOUNT, "--scope", "admin")
    key = out.strip().splitlines()[0]
    if not key.startswith("ssp_live_"):
        raise ServerError(f"unexpected key output: {key!r}")
    return key


def adslot_command(port: int, workers: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "adslot.cli",
        "serve",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]


def bare_command(port: int, workers: int, app: str = "bench.bare_app:app") -> list[str]:
    """uvicorn serving `app` on the bare app's stack (bench.handoff runs its variants of it the same way);
    several workers under adslot's own supervisor, a listening socket each, as `adslot serve` runs them
    (bench/bare_serve.py)."""
    if workers > 1:
        serve = [sys.executable, "-m", "bench.bare_serve", app, "--host", HOST, "--port", str(port)]
        return [*serve, "--workers", str(workers)]
    return [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
        "--lifespan",
        "on",
    ]


def bare_env(port: int) -> dict[str, str]:
    return base_env() | {"BENCH_BARE_BASE_URL": f"http://{HOST}:{port}"}


def ad_request_body(play_time: int) -> dict[str, object]:
    return {"venue_id": VENUE_ID, "screen_id": SCREEN_ID, "play_time": play_time}


async def _issue(url: str, key: str, count: int, concurrency: int) -> list[str]:
    headers = {"Ssp-Key": key}
    body = ad_request_body(int(time.time()) + 60)
    uuids: list[str] = []
    failures: list[str] = []
    next_index = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal next_index
        while next_index < count and not failures:
            next_index += 1
            response = await client.post(f"{url}/api/v1/ad/request?format=json", json=body, headers=headers)
            if response.status_code != 200:
                failures.append(f"{response.status_code} {response.text[:300]}")
                return
            uuids.append(response.json()["data"]["ad_request_uuid"])

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    if failures:
        raise ServerError(f"ad request failed while issuing the benchmark's ad requests: {failures[0]}")
    return uuids


def issue_ad_requests(
    url: str, key: str, count: int, concurrency: int = 32, timeout_s: float = 300
) -> list[str]:
    """Make `count` real ad requests (as a player would); their uuids feed the VAST and pixel scripts."""

    async def bounded() -> list[str]:
        return await asyncio.wait_for(_issue(url, key, count, concurrency), timeout_s)

    uuids = asyncio.run(bounded())
    with httpx.Client(timeout=10) as client:
        response = client.get(f"{url}/api/v1/ad/vast/{uuids[0]}")
        if response.status_code != 200 or "<InLine>" not in response.text:
            raise ServerError(f"the inline VAST of an issued ad request answered {response.status_code}")
    return uuids


EVENT_COUNTS = ("plays", "starts", "first_quartiles", "midpoints", "third_quartiles", "completes")


STARTED = int(time.time())
"""When this benchmark started: the delivery report's window is fixed around it."""


def delivery_totals(url: str, admin: str, timeout_s: float = 120, around: int = STARTED) -> dict[str, int]:
    """Counted events, duplicates and late fires over every ad request played within a day of `around`, from
    adslot's delivery report: two of them, before and after a scenario, give what its pixels did.

    The window stays put for the whole benchmark: one that followed the clock would let a growth run's
    preloaded, week-old ad requests slip out of it between the two reports (negative duplicates)."""
    params = {"from": str(around - 86400), "to": str(around + 86400), "group_by": "campaign"}
    with httpx.Client(timeout=timeout_s) as client:
        response = client.get(f"{url}/api/v1/reports/delivery", params=params, headers={"Ssp-Key": admin})
    if response.status_code != 200:
        raise ServerError(f"the delivery report answered {response.status_code}: {response.text[:300]}")
    totals = response.json()["data"]["totals"]
    return {
        "counted": sum(int(totals[name]) for name in EVENT_COUNTS),
        "duplicate": int(totals["duplicates"]),
        "late": int(totals["late"]),
    }


MINT_FACTOR = 3.5
"""Seconds of minting ad requests per second of pixel runs, per request made for each uuid: a server
answers pixels at up to about 2.5 times the rate at which wrk mints ad requests on it (wrk parses every
answer while minting), plus a margin: at 2.5 a quick run's list can run out."""
MINT_MIN_SECONDS = 3
"""A server answers slower in its first second (imports, caches): no list is minted in less."""
PLAY_LEAD_SECONDS = 60
"""How far ahead of the request a player's play_time is, as in the ad request scenario: the mint's
prebuilt request asks for this much after the mint's end, so no request of a long mint names a past slot
(adslot refuses one more than its skew, 60 s by default, in the past, with a 400)."""


def mint_seconds(pixel_seconds: float, requests_per_uuid: int) -> int:
    """How long to mint a list on which `pixel_seconds` of runs making `requests_per_uuid` requests per uuid
    fire each pixel once."""
    return max(MINT_MIN_SECONDS, math.ceil(MINT_FACTOR * pixel_seconds / requests_per_uuid))


def mint_ad_requests(
    wrk: str, url: str, key: str, seconds: int, out: Path, *, connections: int, threads: int
) -> list[str]:
    """Real ad requests made with wrk for `seconds` (bench/lua/mint.lua), as many as the server answers: the
    uuids the pixel scenarios fire on, each once. Written to `out`, one per line, and returned, latest first:
    a player fires on the ad request it was just given, so each fire names an ad request issued at most as
    many ad requests earlier as its scenario has fired, not behind every list minted and every ad request run
    since (oldest first, a fast machine's impressions would name rows ~2 million writes back, beyond the
    writer's memory: a restarted writer's case)."""
    result = run_wrk(
        wrk,
        url,
        "mint.lua",
        duration_s=seconds,
        connections=connections,
        threads=threads,
        script_args={
            "key": key,
            "venue": VENUE_ID,
            "screen": SCREEN_ID,
            "out": str(out),
            "lead": str(seconds + PLAY_LEAD_SECONDS),
        },
    )
    uuids = out.read_text().split()
    if result.error_count or not uuids:
        raise ServerError(
            f"minting ad requests: {result.requests} answered, {len(uuids)} uuids, {result.non2xx} not 2xx, "
            f"socket errors {result.socket_errors}"
        )
    # adslot's ids are uuid7s, whose leading bits are their issue time: sorted descending, latest first
    # across wrk's threads (mint.lua writes each thread's list after the other's).
    uuids.sort(reverse=True)
    out.write_text("\n".join(uuids) + "\n")
    return uuids
