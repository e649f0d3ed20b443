"""The benchmark's results: medians over rounds, ratios and targets, machine facts, JSON and Markdown."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import msgspec

from bench.hostcost import APPEND_BYTES, SyncCost, steal_share, steal_ticks, sync_cost
from bench.scenarios import HALF_LOAD_P99_OVER_P50, Scenario
from bench.wrk import WrkResult

GROWTH_SPREAD = 0.10
"""The growth target: adslot's rates at every stored size within 10% of each other."""

REPO = Path(__file__).resolve().parents[1]


class Side(msgspec.Struct):
    """One server's runs of one scenario: medians over rounds, and every round as measured."""

    rps: float
    p50_us: float
    p99_us: float
    errors: int
    statuses: dict[str, int]
    results: dict[str, int]
    """Pixel answers over all rounds by result: counted (first fires), duplicate, echo."""
    bytes_per_response: float
    rounds: list[WrkResult]
    cpu_busy: float = 0.0
    """Median over rounds of the share of the machine's CPU time busy during the run."""
    cpu_us: dict[str, float] = msgspec.field(default_factory=dict)
    """Median over rounds of each process group's CPU µs per request, where the runs measured it."""
    postgres: dict[str, int] = msgspec.field(default_factory=dict)
    """PostgreSQL's counters moved during these runs, summed over rounds (bench.postgres.activity)."""
    bidder: dict[str, int] = msgspec.field(default_factory=dict)
    """What the programmatic scenario's test bidder logged during these runs, by kind, summed over rounds."""

    @classmethod
    def of(cls, rounds: list[WrkResult]) -> Side:
        requests = sum(r.requests for r in rounds)
        return cls(
            rps=statistics.median(r.rps for r in rounds),
            p50_us=statistics.median(r.p50_us for r in rounds),
            p99_us=statistics.median(r.p99_us for r in rounds),
            errors=sum(r.error_count for r in rounds),
            statuses=_sum(r.statuses for r in rounds),
            results=_sum(r.results for r in rounds),
            bytes_per_response=sum(r.bytes for r in rounds) / requests if requests else 0.0,
            rounds=rounds,
            cpu_busy=statistics.median(r.cpu_busy for r in rounds),
            cpu_us={
                name: statistics.median(r.cpu_us[name] for r in rounds)
                for name in rounds[0].cpu_us
                if all(name in r.cpu_us for r in rounds)
            },
            postgres=_sum(r.postgres for r in rounds),
            bidder=_sum(r.bidder for r in rounds),
        )

    @property
    def tail_ratio(self) -> float:
        return self.p99_us / self.p50_us if self.p50_us else float("inf")

    @property
    def cpu_all_us(self) -> float:
        """CPU µs per request of every measured process, wrk's included: one request's cost to the machine."""
        return sum(self.cpu_us.values())


CPU_GROUPS = ("workers", "ledger writer", "PostgreSQL", "wrk")
"""The process groups a run's CPU is read for (bench.cpu), in the order the CPU tables show them."""


def cpu_cells(side: Side) -> str:
    """One table row's CPU µs per request cells, CPU_GROUPS then all; "—" for a group not measured."""
    cells = [f"{side.cpu_us[g]:.1f}" if g in side.cpu_us else "—" for g in CPU_GROUPS]
    return f"{' | '.join(cells)} | {side.cpu_all_us:.1f}"


def _sum(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            total[k] = total.get(k, 0) + n
    return total


class Row(msgspec.Struct):
    scenario: str
    backend: str
    kind: str
    """"max": as fast as wrk's connections go (with several connection counts, each server at its best
    count: capacity_row()); "level": as fast as one of several connection counts goes; "half_load": paced
    at about half of the measured maximum."""
    description: str
    bare: Side
    adslot: Side
    ratio: float | None
    """max: adslot req/s / bare req/s. half_load: adslot p99 / p50."""
    target: str
    met: bool | None
    flags: list[str]
    target_rps: dict[str, float] | None = None
    delay_ms: dict[str, float] | None = None
    proof_of_play: dict[str, int] | None = None
    """adslot's records before vs after the rounds: counted (first fires), duplicates, late."""
    connections: dict[str, int] = msgspec.field(default_factory=dict)
    """wrk's connection count each side's figures were measured at ("bare", "adslot")."""
    bidder_delay_ms: float | None = None
    """A programmatic row's: how long the test bidder waits before every answer (added_latency_us())."""


class Machine(msgspec.Struct):
    nproc: int
    cpu_count: int | None
    cpu_model: str
    python: str
    platform: str
    wrk: str
    command: str
    date: str
    git_commit: str
    git_dirty: bool | None
    loadavg_start: list[float]
    loadavg_end: list[float] = msgspec.field(default_factory=list)
    git_diff_sha256: str | None = None
    """Identifies the uncommitted changes (tracked files) the run measured, when the tree was dirty."""
    sync: SyncCost | None = None
    """The cost of an append and fdatasync where the SQLite databases live, measured before the run."""
    steal_ticks_start: tuple[int, int] = (0, 0)
    """(steal, all) CPU ticks when the run began, for `steal`; (0, 0) without /proc/stat."""
    steal: float | None = None
    """The share of all CPUs' time the hypervisor gave to other guests during the run (0 on bare metal)."""


class Config(msgspec.Struct):
    duration_s: int
    warmup_s: int
    connections: list[int]
    """wrk's connection counts: every max-rate round runs each server at each, and the table compares each
    server's best (capacity_row())."""
    threads: int
    rounds: int
    workers: int
    uuids: int
    scenarios: list[str]
    half_load: bool
    postgres_url: str | None
    adslot_env: dict[str, str]
    tally: bool
    preload: list[int] = msgspec.field(default_factory=lambda: [0])
    """Stored ad requests loaded before the runs, one adslot server per size (side by side when several)."""
    caps: str | None = None
    """The benchmark campaign's caps (JSON); None: uncapped."""
    bidder_delay_ms: int | None = None
    """The programmatic scenario's test bidder delay (ms); None when that scenario did not run."""


class Report(msgspec.Struct):
    machine: Machine
    config: Config
    backends: dict[str, str]
    rows: list[Row]
    notes: list[str]


def max_row(
    scenario: Scenario,
    backend: str,
    bare: list[WrkResult],
    adslot: list[WrkResult],
    connections: int | None = None,
    kind: str = "max",
) -> Row:
    b, a = Side.of(bare), Side.of(adslot)
    flags = _error_flags(b, a)
    if kind == "level":
        flags = [f"at {connections} connections, {flag}" for flag in flags]
    row = _rate_row(scenario, backend, kind, b, a, flags)
    if connections is not None:
        row.connections = {"bare": connections, "adslot": connections}
    return row


def _rate_row(scenario: Scenario, backend: str, kind: str, b: Side, a: Side, flags: list[str]) -> Row:
    ratio = a.rps / b.rps if b.rps else 0.0
    if scenario.target_ratio is None:
        target, met = "—", None
    else:
        target, met = f">= {scenario.target_ratio:g}", ratio >= scenario.target_ratio and not flags
    return Row(scenario.name, backend, kind, scenario.description, b, a, ratio, target, met, flags)


def capacity_row(scenario: Scenario, backend: str, levels: list[Row]) -> Row:
    """The max-rate row of a scenario run at several connection counts ("level" rows): each server at the
    count where its median rate was highest, as bench.workers reads capacity.

    A closed loop of C connections reaches at most C / latency. A server that acknowledges a write only once
    its group commit is durable has each answer wait for a commit, so at few connections it leaves CPU idle
    that more connections (larger batches, the commit's cost shared by more writes) would use; the bare app
    has nothing to wait for and is at its best sooner. Comparing both at one count measures adslot's
    latency as much as its throughput; each at its best compares maximum rates, which is what the targets
    are stated in. Errors at any count flag the row."""
    bare = max(levels, key=lambda r: r.bare.rps)
    adslot = max(levels, key=lambda r: r.adslot.rps)
    flags = [flag for r in levels for flag in r.flags]
    row = _rate_row(scenario, backend, "max", bare.bare, adslot.adslot, flags)
    row.connections = {"bare": bare.connections["bare"], "adslot": adslot.connections["adslot"]}
    return row


def half_load_row(
    scenario: Scenario,
    backend: str,
    bare: list[WrkResult],
    adslot: list[WrkResult],
    target_rps: dict[str, float],
    delay_ms: dict[str, float],
) -> Row:
    b, a = Side.of(bare), Side.of(adslot)
    flags = _error_flags(b, a)
    met = a.tail_ratio <= HALF_LOAD_P99_OVER_P50 and not flags
    return Row(
        scenario.name,
        backend,
        "half_load",
        scenario.description,
        b,
        a,
        a.tail_ratio,
        f"p99 <= {HALF_LOAD_P99_OVER_P50:g} x p50",
        met,
        flags,
        target_rps,
        delay_ms,
    )


def _error_flags(bare: Side, adslot: Side) -> list[str]:
    flags = []
    for name, side in (("bare", bare), ("adslot", adslot)):
        if side.errors:
            non2xx = sum(r.non2xx for r in side.rounds)
            bad = {s: n for s, n in side.statuses.items() if not s.startswith("2")}
            sockets = _sum(r.socket_errors for r in side.rounds)
            detail = f"statuses {bad}" if bad else "statuses above 399 (--tally breaks them down)"
            flags.append(
                f"{name}: {non2xx} non-2xx answers ({detail}), "
                f"socket errors {({k: n for k, n in sockets.items() if n}) or 'none'}"
            )
    return flags


def notes(rows: list[Row]) -> list[str]:
    """What a reader of the table needs to know: errors, duplicates, answer sizes, the bare app's tails."""
    out = [
        f"ERRORS in {r.backend} {r.scenario} ({r.kind}): {flag}"
        for r in rows
        if r.kind != "level"  # its flags are its scenario's max row's too
        for flag in r.flags
    ]
    pixels = []
    for r in rows:
        pop = r.proof_of_play
        answered = sum(pop.values()) if pop else 0
        if pop and answered:
            dup = pop.get("duplicate", 0)
            pixels.append(
                f"{r.backend} {r.scenario}{' @ half load' if r.kind == 'half_load' else ''}: "
                f"{pop.get('counted', 0):,} counted, {dup:,} duplicates ({dup / answered:.0%})"
                + (f", {pop['late']:,} late" if pop.get("late") else "")
            )
    if pixels:
        out.append(
            "Each pixel scenario fires on its own list of real ad requests, minted with wrk just before "
            "(see below), walking it latest first across rounds: every fire is a first fire until the list "
            "runs out, then they are duplicates (as player retries are). adslot's delivery report, before "
            "vs after each scenario's rounds: " + "; ".join(pixels) + "."
        )
    for r in rows:
        if r.kind == "level":
            continue
        b, a = r.bare.bytes_per_response, r.adslot.bytes_per_response
        if b and abs(a - b) > 0.1 * b:
            out.append(
                f"{r.backend} {r.scenario}: adslot answers {a:,.0f} bytes on average, the bare app {b:,.0f}: "
                "they do not do the same serialization work."
            )
    busy = [postgres_line(r) for r in rows if r.kind != "level" and (r.adslot.postgres or r.bare.postgres)]
    if busy:
        out.append(
            "What PostgreSQL did during each scenario's runs, adslot's / the bare app's (which leave it "
            "idle: what shows there is work left behind by adslot's run before), summed over rounds: "
            + "; ".join(busy)
            + "."
        )
    tails = [f"{r.backend} {r.scenario} {r.bare.tail_ratio:.1f}" for r in rows if r.kind == "half_load"]
    if tails:
        out.append("The bare app's own p99/p50 at half load, for comparison: " + "; ".join(tails) + ".")
    flushes = [disk_line(r) for r in rows if r.kind != "level" and any(x.disk for x in r.adslot.rounds)]
    if flushes:
        out.append(
            "The disk's own flushes during the runs (bench.hostcost.SyncProbe: a 16 KiB overwrite and "
            "fdatasync every 50 ms beside the servers), p99 / longest in ms by round, adslot's runs | the "
            "bare app's. A durable answer waits for a flush: compare these with 4 x adslot's p50, what the "
            "half-load target allows its p99: " + "; ".join(flushes) + "."
        )
    return out


def disk_line(row: Row) -> str:
    """One row's probed flushes (WrkResult.disk): each round's p99 / longest in ms, adslot's | the bare
    app's."""

    def rounds(side: Side) -> str:
        return " · ".join(
            f"{r.disk['p99_us'] / 1000:.1f} / {r.disk['max_us'] / 1000:.1f}" if r.disk else "—"
            for r in side.rounds
        )

    half = " @ half load" if row.kind == "half_load" else ""
    return f"{row.backend} {row.scenario}{half}: {rounds(row.adslot)} | {rounds(row.bare)}"


def postgres_line(row: Row) -> str:
    """One row's PostgreSQL counters (bench.postgres.activity), adslot's runs / the bare app's."""
    a, b = row.adslot.postgres, row.bare.postgres

    def pair(name: str, scale: float = 1.0, unit: str = "") -> str:
        return f"{a.get(name, 0) / scale:,.0f} / {b.get(name, 0) / scale:,.0f}{unit}"

    return (
        f"{row.backend} {row.scenario}{' @ half load' if row.kind == 'half_load' else ''}: "
        f"checkpoints {pair('checkpoints')} ({pair('checkpoint buffers')} buffers), "
        f"WAL {pair('WAL bytes', 2**20, ' MiB')} ({pair('full-page images')} full-page images), "
        f"blocks read {pair('blocks read')}"
    )


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


MEASURED = ("--", ".", ":(exclude)bench/results")
"""What a run measures: the tree but the benchmark's own reports, which every run rewrites and which
change nothing measured (so a worktree holding a fresh report does not call itself dirty)."""


def _diff_digest() -> str | None:
    try:
        command = ["git", "--no-optional-locks", "diff", "HEAD", *MEASURED]
        out = subprocess.run(command, cwd=REPO, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return hashlib.sha256(out.stdout).hexdigest()[:16] if out.returncode == 0 else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine_facts(argv: list[str], wrk: str, program: str = "python -m bench") -> Machine:
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count() or 0
    status = _git("status", "--porcelain", "--untracked-files=no", *MEASURED)
    return Machine(
        nproc=nproc,
        cpu_count=os.cpu_count(),
        cpu_model=_cpu_model(),
        python=sys.version.split()[0],
        platform=platform.platform(),
        wrk=wrk,
        command=" ".join([program, *argv]),
        date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        git_commit=_git("rev-parse", "HEAD") or "unknown",
        git_dirty=None if status is None else bool(status),
        git_diff_sha256=_diff_digest() if status else None,
        loadavg_start=_loadavg(),
        sync=sync_cost(),
        steal_ticks_start=steal_ticks(),
    )


def finish(machine: Machine) -> None:
    machine.loadavg_end = _loadavg()
    machine.steal = steal_share(machine.steal_ticks_start, steal_ticks())


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _met(row: Row) -> str:
    if row.met is None:
        return "—" if not row.flags else "no (errors)"
    if row.flags:
        return "no (errors)"
    return "yes" if row.met else "no"


def round_ratios(row: Row) -> list[float]:
    """A max-rate row's ratio in each round (adslot's run / the bare app's run that began the round, just
    before it when there is one adslot server; each at its row's connection count): how far the median
    could move on this machine."""
    if row.kind not in ("max", "level"):
        return []
    return [a.rps / b.rps if b.rps else 0.0 for b, a in zip(row.bare.rounds, row.adslot.rounds, strict=True)]


def _counts(row: Row) -> str:
    """The connection counts of a row's two sides, "64" or "256 / 64" (bare / adslot)."""
    bare, adslot = row.connections.get("bare"), row.connections.get("adslot")
    if bare is None or adslot is None:
        return "—"
    return str(bare) if bare == adslot else f"{bare} / {adslot}"


def table(rows: list[Row]) -> str:
    lines = [
        "| scenario | backend | bare req/s | adslot req/s | ratio | p50 µs | p99 µs | target | met "
        "| ratio by round | wrk -c (bare / adslot) |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for row in rows:
        if row.kind == "level":
            continue
        if row.kind == "max":
            name, ratio = row.scenario, f"{row.ratio:.2f}" if row.ratio is not None else "—"
        else:
            name, ratio = (
                f"{row.scenario} @ half load",
                f"p99/p50 {row.ratio:.1f}" if row.ratio is not None else "—",
            )
        each = " · ".join(f"{r:.2f}" for r in round_ratios(row)) or "—"
        lines.append(
            f"| {name} | {row.backend} | {_n(row.bare.rps)} | {_n(row.adslot.rps)} | {ratio} | "
            f"{_n(row.adslot.p50_us)} | {_n(row.adslot.p99_us)} | {row.target} | {_met(row)} | {each} | "
            f"{_counts(row)} |"
        )
    return "\n".join(lines)


def added_latency_us(row: Row) -> tuple[float, float] | None:
    """adslot's (p50, p99) less the bidder's configured delay: what asking a partner costs adslot on top of
    the partner's own answer time (the bidder's own work per request is in it, a few hundred µs at most).
    None for a row without a bidder."""
    if row.bidder_delay_ms is None:
        return None
    delay_us = row.bidder_delay_ms * 1000
    return row.adslot.p50_us - delay_us, row.adslot.p99_us - delay_us


def asked_share(side: Side) -> float | None:
    """Bid requests the test bidder received per request the server answered: 1 when every ad request held
    an auction, less when the partner was skipped (its circuit breaker open after timeouts, its max_qps)."""
    requests = sum(r.requests for r in side.rounds)
    return side.bidder.get("request", 0) / requests if requests else None


def fill_share(side: Side) -> float | None:
    """The share of answers that were 200 (filled) rather than 204; None without the status tally."""
    answered = sum(side.statuses.values())
    return side.statuses.get("200", 0) / answered if answered else None


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


ASKED_AT_LEAST = 0.9
"""Below this share of ad requests asking the bidder, a programmatic row is noted as mixing answers without
an auction into its figures."""


def programmatic_table(rows: list[Row]) -> str:
    """The programmatic rows: the rates beside the bare app's (which asks no bidder), adslot's latency and
    the latency it adds to the bidder's delay, and how many of its ad requests asked the bidder, filled and
    won."""
    lines = [
        "| scenario | backend | bidder delay ms | bare req/s | adslot req/s | ratio | adslot p50 µs "
        "| adslot p99 µs | added p50 µs | added p99 µs | asked | filled | wins | wrk -c |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        added = added_latency_us(row)
        if added is None or row.kind == "level":
            continue
        name = row.scenario + (" @ half load" if row.kind == "half_load" else "")
        paced = row.kind == "half_load"  # paced rates: their ratio says nothing
        ratio = f"{row.adslot.rps / row.bare.rps:.2f}" if row.bare.rps and not paced else "—"
        a = row.adslot
        lines.append(
            f"| {name} | {row.backend} | {row.bidder_delay_ms:g} | {_n(row.bare.rps)} | {_n(a.rps)} "
            f"| {ratio} | {_n(a.p50_us)} | {_n(a.p99_us)} | {_n(added[0])} | {_n(added[1])} "
            f"| {_share(asked_share(a))} | {_share(fill_share(a))} | {_n(a.bidder.get('win', 0))} "
            f"| {_counts(row)} |"
        )
    return "\n".join(lines)


def programmatic_notes(rows: list[Row]) -> list[str]:
    """A programmatic row whose ad requests mostly asked no bidder measured little or no auction: say so."""
    out = []
    for row in rows:
        if row.bidder_delay_ms is None or row.kind == "level":
            continue
        name = f"{row.backend} {row.scenario}{' @ half load' if row.kind == 'half_load' else ''}"
        asked = asked_share(row.adslot)
        if not row.adslot.bidder.get("request"):
            out.append(
                f"{name}: the test bidder received no bid request during adslot's runs, so adslot held no "
                "auction: the figures are its answer without demand, not the cost of an auction."
            )
        elif asked is not None and asked < ASKED_AT_LEAST:
            out.append(
                f"{name}: only {asked:.0%} of adslot's ad requests asked the test bidder; the others were "
                "answered without an auction (a partner that times out 5 times in a row is skipped for 10 s "
                "by its circuit breaker), so the rate and the latencies mix both."
            )
    return out


def levels_table(rows: list[Row]) -> str:
    """The max-rate runs at each connection count, both servers at the same count: what the main table's
    best-of rows were chosen from, and how each server's rate moves with the count."""
    lines = [
        "| scenario | backend | wrk -c | bare req/s | adslot req/s | ratio | adslot p50 µs | adslot p99 µs "
        "| machine busy (bare / adslot) | ratio by round |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        if row.kind != "level":
            continue
        each = " · ".join(f"{r:.2f}" for r in round_ratios(row)) or "—"
        lines.append(
            f"| {row.scenario} | {row.backend} | {_counts(row)} | {_n(row.bare.rps)} | {_n(row.adslot.rps)} "
            f"| {row.ratio or 0.0:.2f} | {_n(row.adslot.p50_us)} | {_n(row.adslot.p99_us)} "
            f"| {row.bare.cpu_busy:.0%} / {row.adslot.cpu_busy:.0%} | {each} |"
        )
    return "\n".join(lines)


def cpu_table(rows: list[Row]) -> str:
    """Each max-rate row's CPU µs per request by process, bare app and adslot: what its ratio is made of,
    which req/s alone cannot say."""
    lines = [
        "| scenario | backend | server | req/s | workers | ledger writer | PostgreSQL | wrk | all "
        "| machine busy | all, bare ÷ adslot |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row.kind != "max" or not (row.bare.cpu_us and row.adslot.cpu_us):
            continue
        cost = row.adslot.cpu_all_us
        ratio = f"{row.bare.cpu_all_us / cost:.2f}" if cost else "—"
        for name, side, share in (("bare", row.bare, "—"), ("adslot", row.adslot, ratio)):
            lines.append(
                f"| {row.scenario} | {row.backend} | {name} | {_n(side.rps)} | {cpu_cells(side)} | "
                f"{side.cpu_busy:.0%} | {share} |"
            )
    return "\n".join(lines)


def growth_notes(rows: list[Row], sizes: tuple[int, ...]) -> list[str]:
    """With several preloaded sizes side by side: per backend and scenario, adslot's rate at each size and
    the spread, (fastest - slowest) / fastest, which the growth target holds within 10%; where the runs
    measured it, adslot's CPU per request at each size and its spread too."""
    if len(sizes) < 2:
        return []
    out = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        if row.kind == "max" and ", " in row.backend:
            groups.setdefault((row.backend.split(", ")[0], row.scenario), []).append(row)
    for (backend, scenario), group in groups.items():
        apart = spread([r.adslot.rps for r in group])
        each = " / ".join(f"{r.adslot.rps:,.0f}" for r in group)
        stored = " / ".join(f"{n:,}" for n in sizes)
        verdict = "within" if apart <= GROWTH_SPREAD else "NOT within"
        note = (
            f"Growth, {backend} {scenario}: {each} req/s with {stored} stored ad requests, measured side by "
            f"side; spread {apart:.1%}, {verdict} {GROWTH_SPREAD:.0%}."
        )
        costs = [r.adslot.cpu_all_us for r in group]
        if all(costs):
            note += (
                f" CPU per request (adslot's processes and wrk): {' / '.join(f'{c:.1f}' for c in costs)} µs, "
                f"spread {spread(costs):.1%}."
            )
        out.append(note)
    return out


def spread(values: list[float]) -> float:
    """(largest - smallest) / largest: how far apart a measure is across the stored sizes."""
    largest = max(values, default=0.0)
    return (largest - min(values)) / largest if largest else 0.0


def machine_lines(m: Machine) -> list[str]:
    """The command, commit and machine a report was measured with, as every bench report opens."""
    dirty = f" (with uncommitted changes, diff sha256 {m.git_diff_sha256})" if m.git_dirty else ""
    return [
        f"`{m.command}` on {m.date}, commit `{m.git_commit[:12]}`{dirty}.",
        f"{m.nproc} CPUs ({m.cpu_model}), Python {m.python}, {m.wrk.split(' Copyright')[0]}, {m.platform}; "
        f"load average {m.loadavg_start} at the start, {m.loadavg_end} at the end.",
        *_host_cost(m),
    ]


def _host_cost(m: Machine) -> list[str]:
    """The disk flush and the stolen CPU, which decide how far a durable pixel can come on this machine."""
    parts = []
    if m.sync is not None:
        parts.append(
            f"a {APPEND_BYTES // 1024} KiB append + fdatasync where the databases live: "
            f"p50 {m.sync.p50_us:,.0f} µs, p99 {m.sync.p99_us:,.0f} µs, {m.sync.cpu_us:,.0f} µs of CPU each"
        )
    if m.steal is not None:
        parts.append(f"CPU time taken by the hypervisor (steal) during the run: {m.steal:.1%}")
    return [f"Host cost: {'; '.join(parts)}."] if parts else []


def markdown(report: Report) -> str:
    m, c = report.machine, report.config
    out = [
        "# adslot benchmark",
        "",
        *machine_lines(m),
        f"wrk: {c.threads} threads, {' and '.join(map(str, c.connections))} connections, "
        f"{c.duration_s} s per run, {c.rounds} round(s) (bare and adslot interleaved"
        + (", at each connection count in turn" if len(c.connections) > 1 else "")
        + f"), medians over rounds; {c.workers} worker(s) for both servers.",
        f"adslot's campaign: caps {c.caps} (every ad request reserves, every impression delivers)."
        if c.caps
        else "adslot's campaign: uncapped (no reservation on the measured path; `--caps` measures one).",
        "",
        table(report.rows),
        "",
        "ratio = adslot req/s / bare req/s at the maximum rate wrk reaches (with several connection counts, "
        "each server's best count, last column: a durable server's answers wait for group commits, so it "
        "needs more connections in flight than the bare app to reach its maximum); p50/p99 are adslot's. "
        "Half-load rows pace each server at about half of its own measured maximum (their req/s "
        "columns are the rates reached) and compare adslot's p99 with its p50. Ratio by round: each "
        "round's adslot run over the bare app's run that began the round (just before it with one adslot "
        "server; with several, as in growth runs, they follow it in an order rotated each round).",
        "",
    ]
    if any(row.bidder_delay_ms is not None for row in report.rows):
        out += [
            "Programmatic: adslot answers ad requests for a venue whose only demand is the test bidder "
            "(`adslot demand test-bidder`, always bidding after its delay, on the same machine); the bare "
            "app answers the same requests asking nobody. Added p50/p99 = adslot's p50/p99 less the "
            "bidder's delay: what the auction costs on top of the partner's own answer time. Asked: bid "
            "requests the bidder received per ad request adslot answered; filled: answers 200 rather than "
            "204; wins: win notices the bidder received.",
            "",
            programmatic_table(report.rows),
            "",
        ]
    if any(row.kind == "level" for row in report.rows):
        out += [
            "Each connection count, both servers at the same count (the rows above take each server's best):",
            "",
            levels_table(report.rows),
            "",
        ]
    if any(row.bare.cpu_us and row.adslot.cpu_us for row in report.rows):
        out += [
            "CPU per request, µs (user + system, from /proc, medians over rounds): the server's worker "
            "processes, its ledger writer process (on PostgreSQL, by default, none: each worker writes to "
            "the database itself, and that CPU is the worker's), the machine's PostgreSQL server processes "
            "(busy only for the server under load) and wrk, which shares the CPUs. Machine busy is the share "
            "of all CPUs' time not idle during the run. all, bare ÷ adslot is the ratio the two would reach "
            "if each kept the machine equally busy: unlike req/s it does not depend on how much of the "
            "machine each run kept busy, though it moves with the CPU's speed from round to round.",
            "",
            cpu_table(report.rows),
            "",
        ]
    backends = [f"{name}: {state}" for name, state in report.backends.items()]
    out += ["Backends: " + "; ".join(backends) + ".", ""]
    if report.notes:
        out += ["Notes:", "", *(f"- {note}" for note in report.notes), ""]
    return "\n".join(out)


def write(report: Report, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "latest.json", out_dir / "latest.md"
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
    md_path.write_text(markdown(report))
    return json_path, md_path
