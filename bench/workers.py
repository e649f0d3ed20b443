"""`python -m bench.workers`: does `adslot serve --workers 2` beat `--workers 1` under load?

For each storage backend (SQLite in fresh data dirs; PostgreSQL in fresh schemas when reachable) it sets up
two productions through the CLI, one per server, starts adslot with 1 worker and adslot with 2 workers side by
side, makes real ad requests on each (their uuids feed the pixel scripts), then runs every scenario in rounds,
the 1-worker and the 2-worker server interleaved, at each of wrk's connection counts (64 and 256 by default),
and takes medians. speedup = req/s (2 workers) / req/s (1), at each count and of each server's best rate.
The bare app (bench/bare_app.py) runs first the same way, 1 worker against 2, as the machine's own answer:
what a second worker gives when nothing but the HTTP stack and the VAST and JSON work runs (`--no-bare`
skips it).

It reuses the main benchmark's machinery: the servers and their setup (bench/servers.py), wrk and its Lua
scripts (bench/wrk.py, bench/lua), the scenarios (bench/scenarios.py), the interleaved rounds
(bench/runner.py's Bench) and the medians and machine facts (bench/report.py). See bench/README.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import msgspec

from bench import report
from bench.postgres import drop_schemas, fresh_schemas, redacted
from bench.report import Machine, Side
from bench.runner import (
    DEFAULT_POSTGRES,
    RESULTS,
    Bench,
    Options,
    Records,
    Target,
    backend_plan,
    exit_on_signal,
    parse_connections,
    parse_env_pair,
    parse_seconds,
    pop_delta,
    processes,
    run_backends,
)
from bench.scenarios import SCENARIOS, Scenario, select
from bench.servers import (
    SCREEN_ID,
    VENUE_ID,
    Launch,
    Server,
    admin_key,
    adslot_command,
    adslot_env,
    bare_command,
    bare_env,
    delivery_totals,
    free_port,
    running,
    setup_production,
)
from bench.wrk import WrkResult, wrk_binary, wrk_version

PROG = "python -m bench.workers"
DEFAULT_SCENARIOS = ("ad_request_json", "impression", "mix")
DEFAULT_CONNECTIONS = (64, 256)
"""wrk's connection counts; each scenario's rounds run at each. A closed loop of C connections reaches at
most C / latency. At 64, one worker is at its capacity (its CPU busy all the run, the rate the same at 256);
two workers, each with half the connections and its requests waiting on group commits, are not: the machine
has CPU to spare (bench/README.md). So a second worker's gain is read from each server's best rate."""
QUICK = {"duration": 2, "rounds": 1, "warmup": 1, "uuids": 500}
DEFAULTS = {"duration": 8, "rounds": 3, "warmup": 2, "uuids": 2000}
ONE, TWO = "1 worker", "2 workers"
"""The two servers' names, in the order every round runs them."""
WORKERS = {ONE: 1, TWO: 2}


@dataclass(frozen=True)
class WorkersOptions:
    duration: int
    rounds: int
    warmup: int
    connections: tuple[int, ...]
    threads: int
    uuids: int
    scenarios: list[Scenario]
    postgres: str | None
    adslot_env: dict[str, str]
    out: Path
    bare: bool = True
    sqlite: bool = True

    def bench_options(self) -> Options:
        """The main benchmark's options for its interleaved rounds (no half load, no tally), at the first
        connection count; WorkersBench.scenario() sets each count in turn."""
        return Options(
            duration=self.duration,
            rounds=self.rounds,
            warmup=self.warmup,
            connections=self.connections[:1],
            threads=self.threads,
            workers=1,
            uuids=self.uuids,
            scenarios=self.scenarios,
            half_load=False,
            postgres=self.postgres,
            adslot_env=self.adslot_env,
            out=self.out,
            tally=False,
            sweeps=len(self.connections),
        )


def parse_args(argv: list[str]) -> WorkersOptions:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Load-test adslot with 1 worker against adslot with 2 workers, interleaved.",
    )
    p.add_argument("--duration", type=parse_seconds, help="seconds per wrk run (e.g. 8 or 8s; default 8)")
    p.add_argument("--rounds", type=int, help="rounds per scenario, 1 and 2 workers interleaved (default 3)")
    p.add_argument(
        "--warmup", type=parse_seconds, help="seconds of ad requests per server before measuring (default 2)"
    )
    p.add_argument(
        "--connections",
        type=parse_connections,
        default=DEFAULT_CONNECTIONS,
        help="wrk connection counts, each scenario run at each "
        f"(default {','.join(map(str, DEFAULT_CONNECTIONS))})",
    )
    p.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    p.add_argument(
        "--uuids",
        type=int,
        help="real ad requests made first on each server, for VAST and pixels (default 2000)",
    )
    p.add_argument(
        "--scenarios",
        action="append",
        help=f"comma-separated subset of: {', '.join(s.name for s in SCENARIOS)} "
        f"(default {','.join(DEFAULT_SCENARIOS)})",
    )
    p.add_argument("--postgres", default=DEFAULT_POSTGRES, metavar="URL", help=f"default {DEFAULT_POSTGRES}")
    p.add_argument("--no-postgres", action="store_true", help="SQLite only")
    p.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only (for A/B runs of its code)")
    p.add_argument("--no-bare", action="store_true", help="skip the bare app's 1 worker against 2")
    p.add_argument(
        "--adslot-env",
        action="append",
        type=parse_env_pair,
        default=[],
        metavar="ADSLOT_NAME=value",
        help="extra setting for both adslot servers (repeatable), e.g. ADSLOT_BATCH_MAX=1024",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="where workers.json and workers.md go")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 s runs, 1 round, 500 uuids")
    args = p.parse_args(argv)
    base = QUICK if args.quick else DEFAULTS
    for name, value in base.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.rounds < 1 or args.uuids < 1 or args.threads < 1:
        p.error("--rounds, --uuids and --threads must be at least 1")
    if min(args.connections) < args.threads:
        p.error("every --connections count must be at least --threads")
    names = [n.strip() for chunk in args.scenarios or [] for n in chunk.split(",") if n.strip()]
    try:
        selected = select(names or list(DEFAULT_SCENARIOS))
    except ValueError as exc:
        p.error(str(exc))
    if any(scenario.programmatic for scenario in selected):
        p.error("the programmatic scenario runs in `python -m bench` only, which starts its test bidder")
    return WorkersOptions(
        duration=args.duration,
        rounds=args.rounds,
        warmup=args.warmup,
        connections=args.connections,
        threads=args.threads,
        uuids=args.uuids,
        scenarios=selected,
        postgres=None if args.no_postgres else args.postgres,
        adslot_env=dict(args.adslot_env),
        out=args.out,
        bare=not args.no_bare,
        sqlite=not args.no_sqlite,
    )


BARE = "bare"
"""The rows' backend label of the bare app's pair."""


class WorkersRow(msgspec.Struct):
    """One scenario on one backend at one connection count: each server's medians over rounds (and every
    round), and the speedup."""

    scenario: str
    backend: str
    connections: int
    description: str
    one_worker: Side
    two_workers: Side
    speedup: float
    """req/s with 2 workers / req/s with 1 worker (medians over rounds); 0 when 1 worker reached 0 req/s."""
    flags: list[str]
    proof_of_play: dict[str, dict[str, int]] | None = None
    """Pixel scenarios: each server's records before vs after the rounds (counted, duplicate, late)."""


class Capacity(msgspec.Struct):
    """One scenario on one backend: each server's best rate over the connection counts, and their ratio."""

    scenario: str
    backend: str
    one_worker_rps: float
    one_worker_connections: int
    two_workers_rps: float
    two_workers_connections: int
    speedup: float
    errors: bool
    """Some run of the pair answered with errors: its rates do not count as capacity."""


def capacities(rows: list[WorkersRow]) -> list[Capacity]:
    """Per scenario and backend, in the rows' order: each server's highest median rate over the counts."""
    groups: dict[tuple[str, str], list[WorkersRow]] = {}
    for row in rows:
        groups.setdefault((row.scenario, row.backend), []).append(row)
    out = []
    for (scenario, backend), group in groups.items():
        one = max(group, key=lambda r: r.one_worker.rps)
        two = max(group, key=lambda r: r.two_workers.rps)
        best_one, best_two = one.one_worker.rps, two.two_workers.rps
        speedup = best_two / best_one if best_one else 0.0
        errors = any(r.flags for r in group)
        out.append(
            Capacity(scenario, backend, best_one, one.connections, best_two, two.connections, speedup, errors)
        )
    return out


class WorkersConfig(msgspec.Struct):
    duration_s: int
    warmup_s: int
    connections: list[int]
    threads: int
    rounds: int
    uuids: int
    scenarios: list[str]
    postgres_url: str | None
    adslot_env: dict[str, str]


class WorkersReport(msgspec.Struct):
    machine: Machine
    config: WorkersConfig
    backends: dict[str, str]
    capacity: list[Capacity]
    rows: list[WorkersRow]
    notes: list[str]


def _flags(sides: dict[str, Side]) -> list[str]:
    flags = []
    for name, side in sides.items():
        if side.errors:
            non2xx = sum(r.non2xx for r in side.rounds)
            sockets = {k: n for r in side.rounds for k, n in r.socket_errors.items() if n}
            flags.append(f"{name}: {non2xx} answers above 399, socket errors {sockets or 'none'}")
    return flags


def make_row(
    scenario: Scenario, backend: str, connections: int, measured: dict[str, list[WrkResult]]
) -> WorkersRow:
    one, two = Side.of(measured[ONE]), Side.of(measured[TWO])
    speedup = two.rps / one.rps if one.rps else 0.0
    flags = _flags({ONE: one, TWO: two})
    return WorkersRow(scenario.name, backend, connections, scenario.description, one, two, speedup, flags)


class WorkersBench:
    def __init__(self, args: WorkersOptions, wrk: str) -> None:
        self.args = args
        self.bench = Bench(args.bench_options(), wrk)
        self.rows: list[WorkersRow] = []

    def scenario(
        self, backend: str, targets: list[Target], scenario: Scenario, records: dict[str, Records]
    ) -> None:
        """The scenario's rounds at each connection count in turn, a row each; a pixel list minted for all
        of them walks on from one count to the next (Bench.offsets), so every fire stays a first fire."""
        base = self.bench.args
        try:
            for connections in self.args.connections:
                self.bench.args = replace(base, connections=(connections,))
                before = {name: read() for name, read in records.items()}
                measured = self.bench.run(targets, scenario)[connections]
                row = make_row(scenario, backend, connections, measured)
                if records:
                    row.proof_of_play = {
                        name: pop_delta(before[name], read()) or {} for name, read in records.items()
                    }
                self.rows.append(row)
                errors = "  ERRORS" if row.flags else ""
                print(
                    f"  {scenario.name} at {connections} connections: speedup {row.speedup:.2f} "
                    f"(2 workers / 1 worker){errors}",
                    flush=True,
                )
        finally:
            self.bench.args = base

    def backend(self, backend: str, postgres_url: str | None, work: Path) -> None:
        if backend == BARE:
            self.bare(work)
            return
        work.mkdir(parents=True)
        self.bench.processes = partial(processes, postgres=postgres_url is not None)
        schemas = {name: fresh_schemas() for name in WORKERS} if postgres_url else {}
        keys: dict[str, str] = {}
        admins: dict[str, str] = {}
        launches: dict[str, Launch] = {}
        try:
            for name, workers in WORKERS.items():
                launches[name] = self._launch(
                    work / f"data-{workers}w", workers, postgres_url, schemas.get(name)
                )
                env = launches[name](free_port())[1]
                where = (
                    f"schemas {', '.join(schemas[name])}" if postgres_url else str(work / f"data-{workers}w")
                )
                print(f"[{backend}] {name}: production set up through the CLI ({where})", flush=True)
                keys[name] = setup_production(env)
                admins[name] = admin_key(env)
            with ExitStack() as stack:
                servers: dict[str, Server] = {}
                for name, workers in WORKERS.items():
                    log = work / f"adslot-{workers}w.log"
                    servers[name] = stack.enter_context(
                        running(f"adslot {name}", launches[name], log, keys[name])
                    )
                    print(f"[{backend}] adslot with {name} on {servers[name].url}", flush=True)
                files: dict[str, dict[str, Path]] = {name: {} for name in WORKERS}
                common = {"venue": VENUE_ID, "screen": SCREEN_ID}
                targets = [Target(name, servers[name], {**common, "key": keys[name]}) for name in WORKERS]
                for target in targets:
                    self.bench.wrk_run(target, SCENARIOS[0], self.args.warmup, {})
                for scenario in self.args.scenarios:
                    for name in WORKERS:
                        label, url = f"{backend}, {name}", servers[name].url
                        self.bench.uuids_for(files[name], scenario, label, url, keys[name], work, name)
                    with_uuids = [
                        Target(
                            t.name,
                            t.server,
                            {
                                **t.script_args,
                                "uuids": str(files[t.name][scenario.uuid_set]),
                            },
                        )
                        for t in targets
                    ]
                    records: dict[str, Records] = {}
                    if scenario.pixels:
                        records = {
                            t.name: partial(delivery_totals, t.server.url, admins[t.name]) for t in targets
                        }
                    self.scenario(backend, with_uuids, scenario, records)
        finally:
            if postgres_url:
                for pair in schemas.values():
                    drop_schemas(postgres_url, pair)
                names = ", ".join(s for pair in schemas.values() for s in pair)
                print(f"[{backend}] dropped schemas {names}", flush=True)

    def bare(self, work: Path) -> None:
        """The bare app with 1 and with 2 workers, interleaved as adslot's pairs are. It stores nothing, so
        its pixels fire on random uuids (it only parses them) and it has no Proof of Play to report."""
        work.mkdir(parents=True)
        self.bench.processes = partial(processes, postgres=False)
        uuids = work / "uuids.txt"
        uuids.write_text("".join(f"{uuid.uuid4()}\n" for _ in range(self.args.uuids)))
        common = {"venue": VENUE_ID, "screen": SCREEN_ID, "key": BARE, "uuids": str(uuids)}
        with ExitStack() as stack:
            targets = []
            for name, workers in WORKERS.items():
                launch = partial(_bare_launch, workers)
                log = work / f"bare-{workers}w.log"
                server = stack.enter_context(running(f"bare {name}", launch, log, BARE))
                print(f"[bare] bare app with {name} on {server.url}", flush=True)
                targets.append(Target(name, server, common))
            for target in targets:
                self.bench.wrk_run(target, SCENARIOS[0], self.args.warmup, {})
            for scenario in self.args.scenarios:
                self.scenario(BARE, targets, scenario, {})

    def _launch(
        self, data_dir: Path, workers: int, postgres_url: str | None, schemas: tuple[str, str] | None
    ) -> Launch:
        def launch(port: int) -> tuple[list[str], dict[str, str]]:
            env = adslot_env(
                data_dir, port, postgres_url=postgres_url, schemas=schemas, extra=self.args.adslot_env
            )
            return adslot_command(port, workers), env

        return launch


def _bare_launch(workers: int, port: int) -> tuple[list[str], dict[str, str]]:
    return bare_command(port, workers), bare_env(port)


def notes(rows: list[WorkersRow], machine: Machine, threads: int) -> list[str]:
    """Errors first, then what adslot counted, then what limits the numbers on this machine."""
    out = [f"ERRORS in {r.backend} {r.scenario}: {flag}" for r in rows for flag in r.flags]
    pixels = []
    for r in rows:
        for name, pop in (r.proof_of_play or {}).items():
            if pop:
                pixels.append(
                    f"{r.backend} {r.scenario} at {r.connections} connections, {name}: "
                    f"{pop.get('counted', 0):,} counted, "
                    f"{pop.get('duplicate', 0):,} duplicates"
                )
    if pixels:
        out.append(
            "Each pixel scenario fires on its own list of each server's real ad requests, minted with wrk "
            "just before, walked latest first across rounds: every fire is a first fire until a list runs "
            "out, then they are duplicates (as player retries are). Each server's delivery report, before "
            "vs after the scenario's rounds: " + "; ".join(pixels) + "."
        )
    if machine.nproc < threads + 2:
        out.append(
            f"wrk's {threads} threads run on the same {machine.nproc} CPU(s) as the servers: the second "
            "worker gets only the CPU wrk (and each worker's ledger writer, database or other load) leaves, "
            "so the speedup here is bounded well below 2 and says more about contention than about what a "
            "second worker gives on a machine with cores to spare."
        )
    if machine.loadavg_start and machine.loadavg_start[0] > 0.5 * machine.nproc:
        out.append(
            f"The machine was busy at the start (load average {machine.loadavg_start[0]} on "
            f"{machine.nproc} CPUs): absolute numbers are noisy; the speedup, measured interleaved, less so."
        )
    return out


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _beats(speedup: float, errors: bool) -> str:
    if errors:
        return "no (errors)"
    return "yes" if speedup > 1 else "no"


def capacity_table(capacity: list[Capacity]) -> str:
    lines = [
        "| scenario | backend | 1 worker: best req/s (connections) | 2 workers: best req/s (connections) "
        "| speedup | 2 beat 1 |",
        "|---|---|---:|---:|---:|---|",
    ]
    for c in capacity:
        lines.append(
            f"| {c.scenario} | {c.backend} | {_n(c.one_worker_rps)} ({c.one_worker_connections}) | "
            f"{_n(c.two_workers_rps)} ({c.two_workers_connections}) | {c.speedup:.2f} | "
            f"{_beats(c.speedup, c.errors)} |"
        )
    return "\n".join(lines)


def table(rows: list[WorkersRow]) -> str:
    lines = [
        "| scenario | backend | connections | 1 worker req/s | 2 workers req/s | speedup | 2 beat 1 "
        "| 1 worker p50 / p99 µs | 2 workers p50 / p99 µs | machine CPU busy, 1 / 2 workers |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        one, two = r.one_worker, r.two_workers
        lines.append(
            f"| {r.scenario} | {r.backend} | {r.connections} | {_n(one.rps)} | {_n(two.rps)} | "
            f"{r.speedup:.2f} | {_beats(r.speedup, bool(r.flags))} | "
            f"{_n(one.p50_us)} / {_n(one.p99_us)} | {_n(two.p50_us)} / {_n(two.p99_us)} | "
            f"{one.cpu_busy:.0%} / {two.cpu_busy:.0%} |"
        )
    return "\n".join(lines)


def cpu_table(rows: list[WorkersRow]) -> str:
    """CPU µs per request of each server's processes and of wrk: where a second worker's cost goes."""
    lines = [
        "| scenario | backend | connections | server | req/s | workers | ledger writer | PostgreSQL | wrk "
        "| all |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for name, side in ((ONE, r.one_worker), (TWO, r.two_workers)):
            if not side.cpu_us:
                continue
            cells = report.cpu_cells(side)
            lines.append(
                f"| {r.scenario} | {r.backend} | {r.connections} | {name} | {_n(side.rps)} | {cells} |"
            )
    return "\n".join(lines)


def markdown(result: WorkersReport) -> str:
    m, c = result.machine, result.config
    out = [
        "# adslot: 1 worker against 2 workers",
        "",
        *report.machine_lines(m),
        f"wrk: {c.threads} threads, {' and '.join(map(str, c.connections))} connections, {c.duration_s} s "
        f"per run, {c.rounds} round(s) at each connection count (1 and 2 workers interleaved), medians over "
        "rounds; ledger writer: SQLite's one writer process per environment, PostgreSQL's workers.",
        "",
        "Capacity: each server's best rate over the connection counts (medians over rounds), and 2 ÷ 1.",
        "",
        capacity_table(result.capacity),
        "",
        "Each connection count:",
        "",
        table(result.rows),
        "",
        "What is measured: two real `adslot serve` processes on 127.0.0.1, one with `--workers 1` and "
        "one with `--workers 2`, running side by side, each on its own database (its own SQLite data dir, "
        "or its own PostgreSQL schemas) set up through the CLI. For each scenario wrk drives them in turn "
        "(1 worker, 2 workers, 1 worker ...) as fast as its connections go, at each connection count; the "
        "idle one meanwhile runs only its expiry sweep and catalog poll. wrk is a closed loop: C connections "
        "reach at most C ÷ latency, so a server whose requests wait on a group commit can be below its "
        "capacity at few connections, with CPU to spare; its best rate over the counts is what it can "
        "serve when players offer more than that. speedup = req/s with 2 workers / req/s with 1 worker "
        "(medians over rounds); p50/p99 are each server's medians. Machine CPU busy is the share of all "
        "CPUs' time that was busy (not idle) during the run, from /proc/stat, wrk included: when one worker "
        "already keeps it near 100%, a second worker can only take CPU from the first, its writer and wrk. "
        "Pixel scenarios fire on ad requests each server issued itself. The bare rows are the bare app "
        "(uvicorn on the same stack, the same VAST building and JSON encoding, no framework, decision or "
        "storage) with 1 and with 2 workers, measured the same way: what this machine lets a second worker "
        "give at all.",
        "",
    ]
    if any(r.one_worker.cpu_us for r in result.rows):
        out += [
            "CPU per request, µs (user + system, from /proc, medians over rounds): each server's worker "
            "processes (with 2 workers, their supervisor too), its ledger writer process(es), the machine's "
            "PostgreSQL server processes, and wrk. A second worker can beat one only if the CPU that all of "
            "them spend per request grows by less than the CPU left idle with one worker.",
            "",
            cpu_table(result.rows),
            "",
        ]
    out += ["Backends: " + "; ".join(f"{n}: {s}" for n, s in result.backends.items()) + ".", ""]
    if result.notes:
        out += ["Notes:", "", *(f"- {note}" for note in result.notes), ""]
    return "\n".join(out)


def write(result: WorkersReport, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "workers.json", out_dir / "workers.md"
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")
    md_path.write_text(markdown(result))
    return json_path, md_path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    wrk = wrk_binary()
    if wrk is None:
        print("wrk not found on PATH: install it (apt-get install wrk)", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, exit_on_signal)
    machine = report.machine_facts(argv, wrk_version(wrk), PROG)
    config = WorkersConfig(
        duration_s=args.duration,
        warmup_s=args.warmup,
        connections=list(args.connections),
        threads=args.threads,
        rounds=args.rounds,
        uuids=args.uuids,
        scenarios=[s.name for s in args.scenarios],
        postgres_url=redacted(args.postgres),
        adslot_env=args.adslot_env,
    )
    backends, plan = backend_plan(args.postgres, sqlite=args.sqlite)
    if args.bare:
        plan.insert(0, (BARE, None))
    backends = {BARE: "pending" if args.bare else "skipped (--no-bare)", **backends}
    bench = WorkersBench(args, wrk)
    try:
        failed = run_backends(plan, backends, bench.backend, prefix="adslot-bench-workers-")
    finally:
        signal.signal(signal.SIGTERM, previous)
    report.finish(machine)
    all_notes = notes(bench.rows, machine, args.threads) + bench.bench.notes
    result = WorkersReport(machine, config, backends, capacities(bench.rows), bench.rows, all_notes)
    json_path, md_path = write(result, args.out)
    print()
    print(markdown(result))
    print(f"written: {json_path}, {md_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
