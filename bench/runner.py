"""`python -m bench`: drive adslot and the bare app with wrk, side by side, and report the ratios.

For each storage backend (SQLite in a fresh data dir; PostgreSQL in fresh schemas when reachable) it sets
production up through the CLI, starts adslot and the bare app, makes real ad requests whose uuids the VAST and
pixel scripts use, then runs every scenario in rounds, bare and adslot interleaved, and takes medians.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TypeVar

import msgspec

from adslot.settings import EnvironmentSettings, load_settings
from bench import growth, report
from bench.cpu import Pids, measure_cpu, postgres_pids, server_groups
from bench.hostcost import SyncProbe
from bench.postgres import activity, drop_schemas, fresh_schemas, moved, redacted, unreachable_reason
from bench.report import Config, Row
from bench.scenarios import SCENARIOS, Scenario, select
from bench.servers import (
    DEFAULT_BIDDER_DELAY_MS,
    SCREEN_ID,
    VENUE_ID,
    BenchBidder,
    Launch,
    Server,
    ServerError,
    admin_key,
    adslot_command,
    adslot_env,
    bare_command,
    bare_env,
    delivery_totals,
    free_port,
    issue_ad_requests,
    mint_ad_requests,
    mint_seconds,
    parse_caps,
    probe_programmatic,
    running,
    running_bidder,
    setup_production,
    setup_programmatic,
)
from bench.wrk import WrkResult, run_wrk, wrk_binary, wrk_version

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = Path(__file__).resolve().parent / "results"
QUICK = {"duration": 2, "rounds": 1, "warmup": 1, "uuids": 500}
DEFAULTS = {"duration": 10, "rounds": 3, "warmup": 2, "uuids": 2000}
DEFAULT_CONNECTIONS = (64, 256)
"""wrk's connection counts for the max-rate runs; each server's best is compared (report.capacity_row)."""


def parse_seconds(raw: str) -> int:
    text = raw.strip().lower()
    scale = 60 if text.endswith("m") else 1
    value = int(float(text.rstrip("sm")) * scale)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 s")
    return value


def parse_env_pair(raw: str) -> tuple[str, str]:
    name, sep, value = raw.partition("=")
    if not sep or not name.startswith("ADSLOT_"):
        raise argparse.ArgumentTypeError("expected ADSLOT_NAME=value")
    return name, value


def parse_counts(raw: str, *, least: int, what: str) -> tuple[int, ...]:
    """`N` or `N,N,...`: distinct whole numbers of at least `least`, in the order given (`what` they count
    names them in the error)."""
    try:
        counts = tuple(int(part.replace("_", "")) for part in raw.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,N,... ({what})") from None
    if any(n < least for n in counts) or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"{what} must be distinct and at least {least}")
    return counts


def parse_connections(raw: str) -> tuple[int, ...]:
    """--connections: distinct counts, 1 or more."""
    return parse_counts(raw, least=1, what="connection counts")


def parse_sizes(raw: str) -> tuple[int, ...]:
    """--preload's row counts: distinct, 0 or more."""
    return parse_counts(raw, least=0, what="row counts")


@dataclass(frozen=True)
class Options:
    duration: int
    rounds: int
    warmup: int
    connections: tuple[int, ...]
    """wrk's connection counts: each max-rate round runs every server at each; the first is also the
    count of the paced half-load runs, the mints and the warm-up."""
    threads: int
    workers: int
    uuids: int
    scenarios: list[Scenario]
    half_load: bool
    postgres: str | None
    adslot_env: dict[str, str]
    out: Path
    tally: bool
    preload: tuple[int, ...] = (0,)
    """Stored ad requests to bulk-load first; several sizes run side by side, one adslot server each."""
    caps: str | None = None
    """The benchmark campaign's caps (JSON), or None: uncapped, no reservations on the measured path."""
    sqlite: bool = True
    """Run SQLite too (--no-sqlite: PostgreSQL only)."""
    disk_probe: bool = True
    """Time the disk's flushes beside every measured run (bench.hostcost.SyncProbe; --no-disk-probe)."""
    bidder_delay_ms: int = DEFAULT_BIDDER_DELAY_MS
    """The programmatic scenario's test bidder: how long it waits before every answer."""
    sweeps: int = 1
    """How many times each scenario's rounds run on its list besides the connection counts (bench.workers,
    which runs each count's rounds on their own), so that a pixel list is minted long enough for every
    sweep to fire first fires only."""

    @property
    def base_connections(self) -> int:
        return self.connections[0]


def parse_args(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Load-test adslot against a bare ASGI app on the same stack.",
    )
    p.add_argument("--duration", type=parse_seconds, help="seconds per wrk run (e.g. 10 or 10s; default 10)")
    p.add_argument("--rounds", type=int, help="rounds per scenario, bare and adslot interleaved (default 3)")
    p.add_argument(
        "--warmup", type=parse_seconds, help="seconds of warm-up per server before measuring (default 2)"
    )
    p.add_argument(
        "--connections",
        type=parse_connections,
        default=DEFAULT_CONNECTIONS,
        metavar="N[,N...]",
        help="wrk connection counts: every max-rate round runs each server at each, and each server's best "
        f"is compared (default {','.join(map(str, DEFAULT_CONNECTIONS))})",
    )
    p.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    p.add_argument("--workers", type=int, default=1, help="server worker processes, for both (default 1)")
    p.add_argument(
        "--uuids", type=int, help="real ad requests made first for the VAST fetches (default 2000)"
    )
    p.add_argument(
        "--scenarios",
        action="append",
        help=f"comma-separated subset of: {', '.join(s.name for s in SCENARIOS)} (default all)",
    )
    p.add_argument("--no-half-load", action="store_true", help="skip the latency runs at half load")
    p.add_argument(
        "--no-disk-probe",
        action="store_true",
        help="do not time the disk's flushes (20 a second) beside each measured run",
    )
    p.add_argument("--postgres", default=DEFAULT_POSTGRES, metavar="URL", help=f"default {DEFAULT_POSTGRES}")
    p.add_argument("--no-postgres", action="store_true", help="SQLite only")
    p.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only (for A/B runs of its code)")
    p.add_argument(
        "--adslot-env",
        action="append",
        type=parse_env_pair,
        default=[],
        metavar="ADSLOT_NAME=value",
        help="extra setting for adslot (repeatable), e.g. ADSLOT_BATCH_MAX=1024",
    )
    p.add_argument(
        "--tally",
        action="store_true",
        help="tally every status and pixel result in Lua (costs wrk ~6 µs of CPU per request)",
    )
    p.add_argument(
        "--preload",
        type=parse_sizes,
        default=(0,),
        metavar="N[,N...]",
        help="bulk-load N played ad requests with their events before adslot starts; several sizes "
        "(e.g. 0,1000000,10000000) run one adslot each, all interleaved with the bare app (growth runs)",
    )
    p.add_argument(
        "--caps",
        type=parse_caps,
        metavar="JSON",
        help="caps of the benchmark's campaign, as `adslot campaigns add --caps` takes them, e.g. "
        '\'[{"period": "daily", "metric": "plays", "limit": 1000000000}]\': every ad request then reserves '
        "and every impression delivers (default: uncapped)",
    )
    p.add_argument(
        "--bidder-delay-ms",
        type=int,
        default=DEFAULT_BIDDER_DELAY_MS,
        help="the programmatic scenario's test bidder: ms it waits before every answer "
        f"(default {DEFAULT_BIDDER_DELAY_MS})",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="where latest.json and latest.md go")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 s runs, 1 round, 500 uuids")
    args = p.parse_args(argv)
    base = QUICK if args.quick else DEFAULTS
    for name, value in base.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.rounds < 1 or args.uuids < 1 or args.workers < 1 or args.threads < 1:
        p.error("--rounds, --uuids, --workers and --threads must be at least 1")
    if min(args.connections) < args.threads:
        p.error("every --connections count must be at least --threads")
    if not 0 <= args.bidder_delay_ms <= 1000:
        p.error("--bidder-delay-ms must be between 0 and 1000")
    names = [n.strip() for chunk in args.scenarios or [] for n in chunk.split(",") if n.strip()]
    try:
        selected = select(names)
    except ValueError as exc:
        p.error(str(exc))
    return Options(
        duration=args.duration,
        rounds=args.rounds,
        warmup=args.warmup,
        connections=args.connections,
        threads=args.threads,
        workers=args.workers,
        uuids=args.uuids,
        scenarios=selected,
        half_load=not args.no_half_load,
        disk_probe=not args.no_disk_probe,
        postgres=None if args.no_postgres else args.postgres,
        sqlite=not args.no_sqlite,
        adslot_env=dict(args.adslot_env),
        out=args.out,
        tally=args.tally,
        preload=args.preload,
        caps=args.caps,
        bidder_delay_ms=args.bidder_delay_ms,
    )


@dataclass
class Target:
    """One server under test, with what its wrk scripts need to know."""

    name: str
    server: Server
    script_args: dict[str, str]


Processes = Callable[[Target], Mapping[str, Pids]]
"""The groups of processes whose CPU a run of `target` costs (its server's, the database's)."""


def processes(target: Target, *, postgres: bool) -> dict[str, Pids]:
    """What a run of `target` costs: its server's workers and ledger writer, and PostgreSQL's processes
    (shared by the servers, but only the one under load keeps them busy; listed at each end of the run, as
    the writers' pools replace their connections)."""
    groups: dict[str, Pids] = {**server_groups(target.server.process.pid)}
    if postgres:
        groups["PostgreSQL"] = postgres_pids
    return groups


Records = Callable[[], dict[str, int]]
"""Reads adslot's Proof-of-Play totals (counted, duplicate, late) over the benchmark's ad requests."""


@dataclass(frozen=True)
class Subject:
    """An adslot server measured against the bare app: its target's name, its rows' backend label, and how
    to read its Proof-of-Play totals (pixel scenarios)."""

    target: str
    label: str
    records: Records | None

    def totals(self) -> dict[str, int] | None:
        return self.records() if self.records else None


def pop_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    if before is None or after is None:
        return None
    return {k: after[k] - before.get(k, 0) for k in after}


T = TypeVar("T")

BARE = "bare"
"""The bare ASGI app's target: it fires on the first adslot server's lists."""
TOP_UP_MARGIN = 1.5
"""How many times the uuids a pixel run needs at its server's fastest rate so far a list must still hold."""
TOP_UP_MINTS = 3
"""Top-up mints before a run at most: a server that mints fewer than a run needs in that many is broken."""


def round_order(targets: Sequence[T], round_no: int) -> list[T]:
    """The first target (the bare app) first in every round, then the others rotated by one each round.

    With several adslot servers (growth's sizes, side by side) a fixed order favours the one that runs right
    after the bare app: each server's run leaves work behind it (SQLite's WAL checkpoint, the kernel's
    writeback of what it wrote) that the next server's run shares the CPUs and the disk with, and the bare app
    leaves none. Rotated, every server runs in every place as often, over as many rounds as there are
    servers. With one adslot server the order is bare, adslot in every round."""
    first, rest = list(targets[:1]), list(targets[1:])
    turn = (round_no - 1) % len(rest) if rest else 0
    return first + rest[turn:] + rest[:turn]


class Bench:
    def __init__(self, args: Options, wrk: str) -> None:
        self.args = args
        self.wrk = wrk
        self.processes: Processes | None = None
        """When set, the groups of processes whose CPU each run records per request (set per backend)."""
        self.postgres_url: str | None = None
        """The backend's PostgreSQL, whose counters each measured run records (None on SQLite)."""
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.offsets: dict[tuple[str, str], int] = {}
        """Where each target's next run of a scenario starts in its request list (pixel scenarios): past
        every request the runs before it sent."""
        self.bidder: BenchBidder | None = None
        """The programmatic scenario's test bidder, while a backend that runs it is measured."""
        self.fastest: dict[tuple[str, str], float] = {}
        """The highest rate each target's runs of a pixel scenario reached, in requests/s (top_up())."""

    def run(
        self,
        targets: list[Target],
        scenario: Scenario,
        delay_ms: dict[str, float] | None = None,
        counts: Sequence[int] | None = None,
    ) -> dict[int, dict[str, list[WrkResult]]]:
        """Every round runs each target once at each connection count (`counts`, by default all of
        --connections), in turn: bare, adslot at the first count, bare, adslot at the next ...
        (round_order()), so that a round's runs at each count are close in time. By count, then target."""
        counts = tuple(counts or self.args.connections)
        results: dict[int, dict[str, list[WrkResult]]] = {c: {t.name: [] for t in targets} for c in counts}
        label = scenario.name + (" @ half load" if delay_ms else "")
        for round_no in range(1, self.args.rounds + 1):
            for connections in counts:
                at = f" -c{connections}" if len(counts) > 1 else ""
                for target in round_order(targets, round_no):
                    extra = {"delay_ms": f"{delay_ms[target.name]:.3f}"} if delay_ms else {}
                    if self.args.tally or scenario.programmatic:  # its fill share is one of its figures
                        extra["tally"] = "1"
                    result = self.wrk_run(target, scenario, self.args.duration, extra, connections)
                    results[connections][target.name].append(result)
                    errors = f"  ERRORS {result.error_count} {result.statuses}" if result.error_count else ""
                    print(
                        f"    {label + at:<28} round {round_no}/{self.args.rounds} {target.name:<6} "
                        f"{result.rps:>10,.0f} req/s  p50 {result.p50_us:>7,} µs  "
                        f"p99 {result.p99_us:>8,} µs{errors}",
                        flush=True,
                    )
        return results

    def wrk_run(
        self,
        target: Target,
        scenario: Scenario,
        duration: int,
        extra: dict[str, str],
        connections: int | None = None,
    ) -> WrkResult:
        where = (target.name, scenario.uuid_set)
        walks = scenario.requests_per_uuid > 0
        if walks:
            self.top_up(target, scenario, duration)
            extra = {**extra, "offset": str(self.offsets.get(where, 0))}

        def load() -> WrkResult:
            return run_wrk(
                self.wrk,
                target.server.url,
                scenario.script,
                duration_s=duration,
                connections=connections or self.args.base_connections,
                threads=self.args.threads,
                script_args={**target.script_args, **scenario.args, **extra},
            )

        bidder = self.bidder if scenario.programmatic else None
        if bidder is not None:
            bidder.kinds()  # what it logged before (a calibration run's tail) is not this run's
        result = self.measure(target, load)
        if bidder is not None:
            time.sleep(0.1)  # the lines of its last answers
            result = msgspec.structs.replace(result, bidder=bidder.kinds())
        if walks:
            self.offsets[where] = result.next_offset
            self.fastest[where] = max(self.fastest.get(where, 0.0), result.rps)
        return result

    def top_up(self, target: Target, scenario: Scenario, duration: int) -> None:
        """Mint more ad requests onto the front of a pixel scenario's list when what is left of it may not
        last the next run at the fastest rate its runs went so far (with a margin), and start the run there.

        A list minted for all of a scenario's runs is sized by how fast the mint went (MINT_FACTOR): a mint
        slowed by another load on the machine makes a list that the later runs, going at full speed, outrun
        into duplicates. The rate already measured on this server says what the next run needs.

        The bare app is never topped up: it answers any uuid, and the list it fires on is an adslot server's,
        which fresh uuids minted on the bare app would replace with ones that server never issued."""
        where = (target.name, scenario.uuid_set)
        rate = self.fastest.get(where)
        if rate is None or target.name == BARE:
            return  # the first run: the mint's own sizing covers it with room for every later run
        path = Path(target.script_args["uuids"])
        per = scenario.requests_per_uuid
        needed = math.ceil(TOP_UP_MARGIN * rate * duration / per)
        fired = math.ceil(self.offsets.get(where, 0) / per)
        left = path.read_text().split()[fired:]
        if len(left) >= needed:
            return
        for _ in range(TOP_UP_MINTS):
            if len(left) >= needed:
                break
            fresh = path.with_suffix(".top-up")
            minted = mint_ad_requests(
                self.wrk,
                target.server.url,
                target.script_args["key"],
                mint_seconds(duration, per),
                fresh,
                connections=self.args.base_connections,
                threads=self.args.threads,
            )
            left = minted + left  # minted is latest first, and newer than every uuid left
            note = f"{target.name} {scenario.name}: {len(minted):,} ad requests minted onto its list"
            self.notes.append(note)
            print(f"[{note}]", flush=True)
        if len(left) < needed:
            made = f"{TOP_UP_MINTS} top-up mints left {len(left):,} of {needed:,} uuids"
            raise ServerError(f"{target.name} {scenario.name}: {made}")
        path.write_text("\n".join(left) + "\n")
        self.offsets[where] = 0

    def measure(self, target: Target, load: Callable[[], WrkResult]) -> WrkResult:
        """One wrk run, with the CPU, PostgreSQL's counters and the disk's flushes around it when the
        backend measures them."""
        if self.processes is None:
            result = load()
        else:
            url = self.postgres_url
            before = activity(url) if url else {}
            with SyncProbe() if self.args.disk_probe else nullcontext() as probe:
                result = measure_cpu(load, self.processes(target))
            if probe is not None:
                result = msgspec.structs.replace(result, disk=probe.summary())
            if url:
                result = msgspec.structs.replace(result, postgres=moved(before, activity(url)))
        return result

    def mint_seconds(self, scenario: Scenario) -> int:
        """How long to mint ad requests for a pixel scenario's own list: enough that its max-rate runs at
        every connection count, or (scenario.paced) its paced half-load runs and their trial, at about half
        that rate, fire each pixel once."""
        args = self.args
        if scenario.paced:
            seconds = (args.rounds * args.duration + min(3, args.duration)) / 2
        else:
            seconds = args.rounds * args.duration * args.sweeps * len(args.connections)
        return mint_seconds(seconds, scenario.requests_per_uuid)

    def uuids_for(
        self,
        files: dict[str, Path],
        scenario: Scenario,
        label: str,
        url: str,
        key: str,
        work: Path,
        tag: object,
    ) -> Path:
        """The list `scenario` uses on one adslot server, made on its first need and kept in `files` by set:
        the shared one, or a pixel scenario's own, minted just before its runs."""
        name = scenario.uuid_set
        if name not in files:
            made = self.mint if scenario.requests_per_uuid else self.shared_uuids
            files[name] = made(label, url, key, work, tag, scenario)
        return files[name]

    def shared_uuids(
        self, label: str, url: str, key: str, work: Path, tag: object, scenario: Scenario
    ) -> Path:
        """The shared list the VAST fetches cycle through (--uuids real ad requests, made with httpx), written
        to work/uuids-<tag>-<set>.txt."""
        path = work / f"uuids-{tag}-{scenario.uuid_set}.txt"
        issued = issue_ad_requests(url, key, self.args.uuids)
        path.write_text("\n".join(issued) + "\n")
        print(f"[{label} shared uuid list: {len(issued):,} real ad requests]", flush=True)
        return path

    def mint(self, label: str, url: str, key: str, work: Path, tag: object, scenario: Scenario) -> Path:
        """A pixel scenario's own list, minted with wrk just before its runs and written to
        work/uuids-<tag>-<set>.txt latest first (mint_ad_requests())."""
        path = work / f"uuids-{tag}-{scenario.uuid_set}.txt"
        seconds = self.mint_seconds(scenario)
        before = activity(self.postgres_url) if self.postgres_url else {}
        minted = mint_ad_requests(
            self.wrk,
            url,
            key,
            seconds,
            path,
            connections=self.args.base_connections,
            threads=self.args.threads,
        )
        runs = " @ half load" if scenario.paced else ""
        note = f"{label} {scenario.name}{runs}: fires on {len(minted):,} ad requests minted in {seconds} s"
        if self.postgres_url:
            wrote = moved(before, activity(self.postgres_url))
            if {"WAL bytes", "checkpoints"} <= wrote.keys():
                note += (
                    f" (PostgreSQL meanwhile: {wrote['WAL bytes']:,} bytes of WAL, "
                    f"{wrote['checkpoints']} checkpoints)"
                )
        self.notes.append(note)
        print(f"[{note}]", flush=True)
        return path

    def scenario(
        self,
        targets: list[Target],
        scenario: Scenario,
        adslots: list[Subject],
        paced_lists: Callable[[Scenario], list[Target]],
    ) -> None:
        """Max-rate rounds, then (for the latency scenarios) calibrated rounds at about half that rate; one
        row per adslot server, each against the same bare app's runs. `paced_lists`: for a pixel scenario,
        the targets with their lists for the half-load runs (Scenario.paced_list()), minted when called:
        the max-rate list is minted for the max-rate runs alone (mint_seconds())."""
        before = [subject.totals() for subject in adslots]
        first_row = len(self.rows)
        measured = self.run(targets, scenario, counts=self.counts(scenario))
        best: dict[str, report.Side] = {}
        for subject, was in zip(adslots, before, strict=True):
            row = self.max_row(scenario, subject, measured)
            row.proof_of_play = pop_delta(was, subject.totals())
            self.rows.append(row)
            best["bare"], best[subject.target] = row.bare, row.adslot
            at = (
                f" (wrk -c {row.connections['bare']} / {row.connections['adslot']})"
                if len(measured) > 1
                else ""
            )
            print(
                f"  {subject.label} {scenario.name}: ratio {row.ratio:.2f} (target {row.target}){at}",
                flush=True,
            )
        self.tag_programmatic(scenario, self.rows[first_row:])
        if scenario.half_load and self.args.half_load:
            rates = {name: 0.5 * side.rps for name, side in best.items()}
            if min(rates.values()) <= 0:
                self.notes.append(f"{scenario.name}: no half-load run, a server reached 0 req/s")
                return
            runs = scenario
            if scenario.requests_per_uuid:
                runs = scenario.paced_list()
                targets = paced_lists(runs)
            delay = {t.name: self.calibrate(t, runs, rates[t.name]) for t in targets}
            before = [subject.totals() for subject in adslots]
            count = self.args.base_connections
            first_row = len(self.rows)
            paced = self.run(targets, runs, delay, (count,))[count]
            for subject, was in zip(adslots, before, strict=True):
                half = report.half_load_row(
                    scenario,
                    subject.label,
                    paced["bare"],
                    paced[subject.target],
                    {"bare": rates["bare"], "adslot": rates[subject.target]},
                    {"bare": delay["bare"], "adslot": delay[subject.target]},
                )
                half.proof_of_play = pop_delta(was, subject.totals())
                half.connections = dict.fromkeys(("bare", "adslot"), self.args.base_connections)
                self.rows.append(half)
                print(
                    f"  {subject.label} {scenario.name} @ half load: adslot p99/p50 {half.ratio:.1f}",
                    flush=True,
                )
            self.tag_programmatic(scenario, self.rows[first_row:])

    def counts(self, scenario: Scenario) -> tuple[int, ...] | None:
        """The connection counts of a scenario's max-rate runs: all of --connections, but the first alone for
        the programmatic one. Each of its connections waits for the bidder, and more of them than adslot
        answers within the partner's timeout only measure the answers without an auction that follow the
        timeouts (the partner's circuit breaker opens), which its half-load rate would then be taken from."""
        return (self.args.base_connections,) if scenario.programmatic else None

    def tag_programmatic(self, scenario: Scenario, rows: list[Row]) -> None:
        """Give a programmatic scenario's rows the bidder's delay, which report.added_latency_us subtracts."""
        if scenario.programmatic:
            for row in rows:
                row.bidder_delay_ms = float(self.args.bidder_delay_ms)

    def max_row(
        self, scenario: Scenario, subject: Subject, measured: Mapping[int, Mapping[str, list[WrkResult]]]
    ) -> Row:
        """One adslot server's max-rate row; with several connection counts, a "level" row per count (kept
        in the report) and the row of each server at its best count (report.capacity_row())."""
        rows = [
            report.max_row(
                scenario,
                subject.label,
                runs["bare"],
                runs[subject.target],
                connections,
                "level" if len(measured) > 1 else "max",
            )
            for connections, runs in measured.items()
        ]
        if len(rows) == 1:
            return rows[0]
        self.rows += rows
        return report.capacity_row(scenario, subject.label, rows)

    def calibrate(self, target: Target, scenario: Scenario, rate: float) -> float:
        """The per-connection delay (ms) that paces `target` at about `rate` req/s, at the first connection
        count.

        connections * 1000 / delay would be exact if answers took no time; a short trial run measures how
        long they do take at that pace, and the delay is shortened by that much.
        """
        connections = self.args.base_connections
        cycle_ms = connections * 1000 / rate
        trial_s = min(3, self.args.duration)
        trial = self.wrk_run(target, scenario, trial_s, {"delay_ms": f"{cycle_ms:.3f}"})
        if trial.rps <= 0:
            return cycle_ms
        answer_ms = connections * 1000 / trial.rps - cycle_ms
        return max(0.5, cycle_ms - max(0.0, answer_ms))

    def backend(self, backend: str, postgres_url: str | None, work: Path) -> None:
        work.mkdir(parents=True)
        self.processes = partial(processes, postgres=postgres_url is not None)
        self.postgres_url = postgres_url
        sizes = self.args.preload
        side_by_side = len(sizes) > 1
        schemas = {size: fresh_schemas() if postgres_url else None for size in sizes}
        workers = self.args.workers

        def adslot_launch(size: int) -> Launch:
            data = work / (f"data-{size}" if side_by_side else "data")

            def launch(port: int) -> tuple[list[str], dict[str, str]]:
                env = adslot_env(
                    data, port, postgres_url=postgres_url, schemas=schemas[size], extra=self.args.adslot_env
                )
                return adslot_command(port, workers), env

            return launch

        def bare_launch(port: int) -> tuple[list[str], dict[str, str]]:
            return bare_command(port, workers), bare_env(port)

        names = {size: f"adslot@{size:,}" if side_by_side else "adslot" for size in sizes}
        labels = {size: f"{backend}, {size:,} stored" if side_by_side else backend for size in sizes}
        bidders = ExitStack()  # the programmatic scenario's partner: up before it is registered, down last
        try:
            if any(scenario.programmatic for scenario in self.args.scenarios):
                self.bidder = bidders.enter_context(running_bidder(self.args.bidder_delay_ms, work))
                print(f"[{backend}] test bidder on {self.bidder.url}", flush=True)
            keys: dict[int, str] = {}
            admins: dict[int, str] = {}
            for size in sizes:
                launch = adslot_launch(size)
                env = launch(free_port())[1]
                keys[size] = setup_production(env, self.args.caps)
                admins[size] = admin_key(env)
                if self.bidder is not None:
                    setup_programmatic(env, self.bidder.url)
                print(f"[{labels[size]}] production set up through the CLI", flush=True)
                if size:
                    self.preload(labels[size], load_settings(env).environment("production"), size)
            with ExitStack() as stack:
                adslots = {
                    size: stack.enter_context(
                        running(names[size], adslot_launch(size), work / f"{names[size]}.log", keys[size])
                    )
                    for size in sizes
                }
                bare = stack.enter_context(running("bare", bare_launch, work / "bare.log", keys[sizes[0]]))
                servers = ", ".join(f"{names[size]} on {adslots[size].url}" for size in sizes)
                print(f"[{backend}] {servers}, bare app on {bare.url}, {workers} worker(s) each", flush=True)
                files: dict[str, dict[str, Path]] = {name: {} for name in names.values()}
                common = {"venue": VENUE_ID, "screen": SCREEN_ID}
                targets = [Target(BARE, bare, {**common, "key": "unused"})] + [
                    Target(names[size], adslots[size], {**common, "key": keys[size]}) for size in sizes
                ]
                for target in targets:
                    self.wrk_run(target, SCENARIOS[0], self.args.warmup, {})
                if self.bidder is not None:
                    for size in sizes:
                        self.probe_programmatic(labels[size], adslots[size].url, keys[size], self.bidder)
                # Whose uuid lists each target fires on: its own; the bare app (it answers any) the first's.
                files[BARE] = files[names[sizes[0]]]

                def with_lists(scenario: Scenario) -> list[Target]:
                    """The targets with the lists `scenario` uses, each adslot server's made on its first
                    need (the bare app answers any: it fires on the first server's)."""
                    for size in sizes:
                        url, key = adslots[size].url, keys[size]
                        self.uuids_for(files[names[size]], scenario, labels[size], url, key, work, size)
                    return [
                        Target(
                            t.name,
                            t.server,
                            {**t.script_args, "uuids": str(files[t.name][scenario.uuid_set])},
                        )
                        for t in targets
                    ]

                for scenario in self.args.scenarios:
                    with_uuids = with_lists(scenario)
                    subjects = [
                        Subject(
                            names[size],
                            labels[size],
                            partial(delivery_totals, adslots[size].url, admins[size])
                            if scenario.pixels
                            else None,
                        )
                        for size in sizes
                    ]
                    self.scenario(with_uuids, scenario, subjects, with_lists)
        finally:
            bidders.close()
            self.bidder = None
            if postgres_url:
                for pair in schemas.values():
                    if pair:
                        drop_schemas(postgres_url, pair)
                        print(f"[{backend}] dropped schemas {', '.join(pair)}")

    def probe_programmatic(self, label: str, url: str, key: str, bidder: BenchBidder) -> None:
        """Before the runs, note whether an ad request for the programmatic venue asks the bidder and fills:
        a server that asks no partner would measure its no-fill answer, not an auction."""
        status, logged = probe_programmatic(url, key, bidder)
        asked = logged.get("request", 0)
        note = (
            f"{label} programmatic: a first ad request for the venue answered {status}; the test bidder "
            f"received {asked} bid request(s) for it ({bidder.delay_ms} ms delay, always bids)"
        )
        if not asked:
            note += ": adslot asked no partner, so the programmatic rows measure no auction"
        print(f"[{note}]", flush=True)
        self.notes.append(note)

    def preload(self, label: str, env: EnvironmentSettings, size: int) -> None:
        took = growth.load(env, size, account_id=1, campaign_id=1, creative_id=1)
        # The loader writes without fsync: flush what the kernel still holds of it now, so that no writeback
        # of the loaded gigabytes can overlap the measured runs (the note records how long it took).
        started = time.monotonic()
        os.sync()
        flushed = time.monotonic() - started
        note = (
            f"{label}: {size:,} ad requests with events preloaded in {took:.0f} s, "
            f"then flushed to disk (sync) in {flushed:.0f} s before the runs"
        )
        print(f"[{note}]", flush=True)
        self.notes.append(note)


def exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def backend_plan(
    postgres: str | None, *, sqlite: bool = True
) -> tuple[dict[str, str], list[tuple[str, str | None]]]:
    """Each backend's status so far, and the (backend, PostgreSQL URL) runs to make: SQLite unless
    `sqlite` is off, then PostgreSQL when given and reachable (else its status says why not)."""
    backends: dict[str, str] = {"sqlite": "pending" if sqlite else "skipped (--no-sqlite)"}
    plan: list[tuple[str, str | None]] = [("sqlite", None)] if sqlite else []
    if postgres is None:
        backends["postgres"] = "skipped (--no-postgres)"
        return backends, plan
    reason = unreachable_reason(postgres)
    if reason:
        backends["postgres"] = f"skipped, unreachable at {redacted(postgres)} ({reason})"
        print(f"note: PostgreSQL {backends['postgres']}", flush=True)
    else:
        backends["postgres"] = "pending"
        plan.append(("postgres", postgres))
    return backends, plan


def run_backends(
    plan: list[tuple[str, str | None]],
    backends: dict[str, str],
    run: Callable[[str, str | None, Path], None],
    *,
    prefix: str,
) -> bool:
    """Run each backend in its own temporary directory, recording its status; True if one failed."""
    failed = False
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for backend, url in plan:
            try:
                run(backend, url, Path(tmp) / backend)
                backends[backend] = "ran"
            except Exception as exc:  # one backend failing must not lose the other's results
                failed = True
                backends[backend] = f"failed: {str(exc).splitlines()[0]}"
                print(f"[{backend}] FAILED: {exc}", file=sys.stderr, flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    wrk = wrk_binary()
    if wrk is None:
        print("wrk not found on PATH: install it (apt-get install wrk)", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, exit_on_signal)
    machine = report.machine_facts(argv, wrk_version(wrk))
    config = Config(
        duration_s=args.duration,
        warmup_s=args.warmup,
        connections=list(args.connections),
        threads=args.threads,
        rounds=args.rounds,
        workers=args.workers,
        uuids=args.uuids,
        scenarios=[s.name for s in args.scenarios],
        half_load=args.half_load,
        postgres_url=redacted(args.postgres),
        adslot_env=args.adslot_env,
        tally=args.tally,
        preload=list(args.preload),
        caps=args.caps,
        bidder_delay_ms=args.bidder_delay_ms if any(s.programmatic for s in args.scenarios) else None,
    )
    backends, plan = backend_plan(args.postgres, sqlite=args.sqlite)
    bench = Bench(args, wrk)
    try:
        failed = run_backends(plan, backends, bench.backend, prefix="adslot-bench-")
    finally:
        signal.signal(signal.SIGTERM, previous)
    report.finish(machine)
    bench.notes[:0] = (
        report.notes(bench.rows)
        + report.programmatic_notes(bench.rows)
        + report.growth_notes(bench.rows, args.preload)
    )
    if machine.loadavg_start and machine.loadavg_start[0] > 0.5 * machine.nproc:
        bench.notes.append(
            f"The machine was busy at the start (load average {machine.loadavg_start[0]} on "
            f"{machine.nproc} CPUs): absolute numbers are noisy; ratios, measured interleaved, less so."
        )
    result = report.Report(machine, config, backends, bench.rows, bench.notes)
    json_path, md_path = report.write(result, args.out)
    print()
    print(report.markdown(result))
    print(f"written: {json_path}, {md_path}")
    return 1 if failed else 0
