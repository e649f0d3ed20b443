"""Run wrk with one of bench/lua's scripts and read the result line its done() callback prints."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import msgspec

from bench.hostcost import cpu_ticks

LUA_DIR = Path(__file__).resolve().parent / "lua"
RESULT_PREFIX = "BENCH_RESULT "


class WrkError(RuntimeError):
    """wrk failed or printed no result line."""


class WrkResult(msgspec.Struct, frozen=True):
    """One bounded wrk run, as bench/lua/common.lua's done() reports it (latencies in microseconds)."""

    requests: int
    duration_s: float
    rps: float
    bytes: int
    p50_us: int
    p90_us: int
    p99_us: int
    p999_us: int
    max_us: int
    mean_us: float
    non2xx: int
    """Answers outside 2xx; without the tally, wrk's count of statuses above 399."""
    socket_errors: dict[str, int]
    statuses: dict[str, int] = msgspec.field(default_factory=dict)
    """Answers by status; only with the tally on (--tally), which costs client CPU."""
    results: dict[str, int] = msgspec.field(default_factory=dict)
    """Pixel answers by their `result` ("counted", "duplicate", "echo"); only with the tally on."""
    next_offset: int = 0
    """Where a next run of the script should start in its request list to repeat none of this run's."""
    cpu_busy: float = 0.0
    """The share of the machine's CPU time (all CPUs) that was busy during the run, from /proc/stat; 0 where
    there is no /proc. Near 1 means server and wrk together used every CPU: no room for another worker."""
    cpu_us: dict[str, float] = msgspec.field(default_factory=dict)
    """CPU µs (user + system) per request by group of processes (the server's workers, its ledger writer,
    PostgreSQL, wrk), from /proc; empty where nothing measured it (the mint, the profile's own runs)."""
    postgres: dict[str, int] = msgspec.field(default_factory=dict)
    """How far PostgreSQL's server-wide counters (bench.postgres.activity) moved during the run: checkpoints,
    WAL, blocks read; empty on SQLite."""
    disk: dict[str, float] = msgspec.field(default_factory=dict)
    """The disk's flushes during the run, timed beside the servers (bench.hostcost.SyncProbe.summary()): how
    many, p50, p99, longest; empty where nothing probed it."""
    bidder: dict[str, int] = msgspec.field(default_factory=dict)
    """What the programmatic scenario's test bidder logged during the run, by kind (`request`: bid requests
    the server sent; `bid`, `win`...); empty for every other scenario."""

    @property
    def error_count(self) -> int:
        """Answers outside 2xx plus connect, read, write errors and timeouts."""
        return self.non2xx + sum(self.socket_errors.values())


def cpu_times() -> tuple[int, int]:
    """(busy, all) CPU ticks of the whole machine since boot; (0, 0) without /proc/stat. Busy is everything
    but idle and iowait."""
    ticks = cpu_ticks()
    if not ticks:
        return 0, 0
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


def wrk_binary() -> str | None:
    return shutil.which("wrk")


def wrk_version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10, check=False)
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "unknown"


def run_wrk(
    binary: str,
    url: str,
    script: str,
    *,
    duration_s: int,
    connections: int,
    threads: int,
    script_args: dict[str, str],
    timeout_s: int = 5,
) -> WrkResult:
    """One run, bounded by wrk's -d plus a hard subprocess timeout."""
    args = {**script_args, "threads": str(threads)}
    command = [
        binary,
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        f"{duration_s}s",
        "--timeout",
        f"{timeout_s}s",
        "-s",
        str(LUA_DIR / script),
        url,
        "--",
        *(f"{k}={v}" for k, v in args.items()),
    ]
    busy, total = cpu_times()
    try:
        out = subprocess.run(
            command, capture_output=True, text=True, timeout=duration_s + timeout_s + 30, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise WrkError(f"wrk did not finish in time: {' '.join(command)}") from exc
    busy_after, total_after = cpu_times()
    share = (busy_after - busy) / (total_after - total) if total_after > total else 0.0
    for line in out.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = msgspec.json.decode(line[len(RESULT_PREFIX) :], type=WrkResult)
            return msgspec.structs.replace(result, cpu_busy=round(share, 4))
    raise WrkError(
        f"wrk printed no result line (exit {out.returncode}): {' '.join(command)}\n"
        f"stdout: {out.stdout[-2000:]}\nstderr: {out.stderr[-2000:]}"
    )
