"""`python -m bench.nodes`: throughput of 1, 2 and 3 adslot nodes on one PostgreSQL, and who spends the CPU.

Three `adslot serve --workers 1` processes (the nodes) run side by side on one production in one pair of fresh
PostgreSQL schemas, each with its own data dir, as several hosts behind a load balancer would. A run with N
nodes drives the first N at once, one wrk per node with the run's connections split evenly (no proxy, so
no proxy's own cost is measured); its rate is the sum of theirs. Around every run, from /proc: each node's CPU
per request it answered, PostgreSQL's CPU (every postgres process on the machine) per request and per commit
(pg_stat_database's xact_commit), and wrk's. Rounds run the node counts in an order rotated by one each
round; medians over rounds.

Pixels fire, as the main benchmark's do, on real ad requests minted with wrk just before (each node on its
own list, so every fire is a first fire on the ad request's own node). It reuses the main benchmark's
machinery: servers and setup (bench/servers.py), wrk and its scripts (bench/wrk.py, bench/lua), scenarios,
CPU accounting (bench/cpu.py) and the machine facts (bench/report.py). See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import msgspec
import psycopg

from bench import report
from bench.cpu import cpu_by_pid, descendants, postgres_pids, used_between
from bench.postgres import drop_schemas, fresh_schemas, redacted, unreachable_reason
from bench.report import Machine
from bench.runner import DEFAULT_POSTGRES, RESULTS, exit_on_signal, parse_env_pair, parse_seconds
from bench.scenarios import SCENARIOS, Scenario, select
from bench.servers import (
    SCREEN_ID,
    VENUE_ID,
    Server,
    admin_key,
    adslot_command,
    adslot_env,
    delivery_totals,
    free_port,
    mint_ad_requests,
    mint_seconds,
    running,
    setup_production,
)
from bench.wrk import WrkResult, cpu_times, run_wrk, wrk_binary, wrk_version

PROG = "python -m bench.nodes"
DEFAULT_SCENARIOS = ("ad_request_json", "impression")
DEFAULT_NODES = (1, 2, 3)
DEFAULT_CONNECTIONS = 96
"""wrk connections per run, split evenly over its nodes (96, 48 each, 32 each): the same offered load
whatever the node count, enough for one node's group commits to reach its capacity (bench/README.md)."""
QUICK = {"duration": 2, "rounds": 1, "warmup": 1}
DEFAULTS = {"duration": 8, "rounds": 3, "warmup": 2}


@dataclass(frozen=True)
class NodesOptions:
    duration: int
    rounds: int
    warmup: int
    connections: int
    threads: int
    nodes: tuple[int, ...]
    scenarios: list[Scenario]
    postgres: str
    adslot_env: dict[str, str]
    out: Path


def parse_nodes(raw: str) -> tuple[int, ...]:
    try:
        counts = tuple(sorted({int(part) for part in raw.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError("expected N or N,N,... node counts") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("node counts must be at least 1")
    return counts


def parse_args(argv: list[str]) -> NodesOptions:
    p = argparse.ArgumentParser(
        prog=PROG, description="Throughput of 1, 2 and 3 adslot nodes on one PostgreSQL."
    )
    p.add_argument("--duration", type=parse_seconds, help="seconds per run (default 8)")
    p.add_argument("--rounds", type=int, help="rounds, node counts interleaved (default 3)")
    p.add_argument("--warmup", type=parse_seconds, help="seconds of ad requests per node first (default 2)")
    p.add_argument(
        "--connections",
        type=int,
        default=DEFAULT_CONNECTIONS,
        help=f"wrk connections per run, split over its nodes (default {DEFAULT_CONNECTIONS})",
    )
    p.add_argument(
        "--threads", type=int, default=2, help="wrk threads per run, split over its nodes (default 2)"
    )
    p.add_argument("--nodes", type=parse_nodes, default=DEFAULT_NODES, help="node counts (default 1,2,3)")
    p.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma-separated subset of: {', '.join(s.name for s in SCENARIOS)} "
        f"(default {','.join(DEFAULT_SCENARIOS)})",
    )
    p.add_argument("--postgres", default=DEFAULT_POSTGRES, metavar="URL", help=f"default {DEFAULT_POSTGRES}")
    p.add_argument(
        "--adslot-env",
        action="append",
        type=parse_env_pair,
        default=[],
        metavar="ADSLOT_NAME=value",
        help="extra setting for every node (repeatable)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="where nodes.json and nodes.md go")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 s runs, 1 round")
    args = p.parse_args(argv)
    for name, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.rounds < 1 or args.threads < 1:
        p.error("--rounds and --threads must be at least 1")
    if args.connections < max(args.nodes) * args.threads:
        p.error("--connections must be at least the largest node count times --threads")
    try:
        scenarios = select([n.strip() for n in args.scenarios.split(",") if n.strip()])
    except ValueError as exc:
        p.error(str(exc))
    if any(scenario.programmatic for scenario in scenarios):
        p.error("the programmatic scenario runs in `python -m bench` only, which starts its test bidder")
    return NodesOptions(
        duration=args.duration,
        rounds=args.rounds,
        warmup=args.warmup,
        connections=args.connections,
        threads=args.threads,
        nodes=args.nodes,
        scenarios=scenarios,
        postgres=args.postgres,
        adslot_env=dict(args.adslot_env),
        out=args.out,
    )


class NodeRun(msgspec.Struct):
    """One node's share of a run: what its wrk measured, and its processes' CPU per request it answered."""

    node: int
    rps: float
    requests: int
    p50_us: int
    p99_us: int
    errors: int
    cpu_us: float


class Run(msgspec.Struct):
    """One run of N nodes at once: the sum of their rates, and the CPU per request of each group."""

    rps: float
    requests: int
    nodes: list[NodeRun]
    node_cpu_us: float
    """Every node's CPU over every request: what a request costs adslot."""
    postgres_cpu_us: float
    """PostgreSQL's CPU (every postgres process on the machine) over every request."""
    commits: int
    """Transactions PostgreSQL committed meanwhile (pg_stat_database.xact_commit of the database)."""
    postgres_cpu_us_per_commit: float
    wrk_cpu_us: float
    cpu_busy: float
    """The share of the machine's CPU time busy during the run, from /proc/stat."""


class NodesRow(msgspec.Struct):
    """One scenario at one node count: medians over rounds, and every round."""

    scenario: str
    nodes: int
    connections_per_node: int
    rps: float
    per_node_rps: float
    speedup: float
    """rps / the 1-node rps of the scenario (0 without a 1-node row)."""
    node_cpu_us: float
    postgres_cpu_us: float
    postgres_cpu_us_per_commit: float
    requests_per_commit: float
    wrk_cpu_us: float
    cpu_busy: float
    p99_us: float
    """The slowest node's p99, median over rounds."""
    errors: int
    runs: list[Run]
    proof_of_play: dict[str, int] | None = None


class NodesConfig(msgspec.Struct):
    duration_s: int
    warmup_s: int
    rounds: int
    connections: int
    threads: int
    nodes: list[int]
    scenarios: list[str]
    postgres_url: str | None
    adslot_env: dict[str, str]
    split: str = "one wrk per node, the run's connections and threads split evenly over its nodes; no proxy"


class NodesReport(msgspec.Struct):
    machine: Machine
    config: NodesConfig
    status: str
    rows: list[NodesRow]
    notes: list[str]


def xact_commits(url: str) -> int:
    with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def split(total: int, parts: int) -> int:
    return max(1, total // parts)


def rotated(counts: tuple[int, ...], round_no: int) -> list[int]:
    """The node counts in the order round `round_no` (from 1) runs them: rotated by one each round, so no
    count always runs first (on a cold database) or right after another."""
    turn = (round_no - 1) % len(counts)
    return list(counts[turn:] + counts[:turn])


class NodesBench:
    def __init__(self, args: NodesOptions, wrk: str) -> None:
        self.args = args
        self.wrk = wrk
        self.rows: list[NodesRow] = []
        self.notes: list[str] = []
        self.offsets: dict[int, int] = {}
        """Where each node's next pixel run starts in its list."""

    def run(
        self, servers: list[Server], scenario: Scenario, count: int, script_args: list[dict[str, str]]
    ) -> Run:
        """The first `count` nodes under load at once, one wrk each, with the CPU each group spent."""
        args = self.args
        connections, threads = split(args.connections, count), split(args.threads, count)
        nodes = list(range(count))
        groups = {i: descendants(servers[i].process.pid) for i in nodes}
        results: dict[int, WrkResult] = {}
        failures: list[BaseException] = []

        def drive(i: int) -> None:
            extra = dict(script_args[i])
            if scenario.requests_per_uuid:
                extra["offset"] = str(self.offsets.get(i, 0))
            try:
                results[i] = run_wrk(
                    self.wrk,
                    servers[i].url,
                    scenario.script,
                    duration_s=args.duration,
                    connections=connections,
                    threads=threads,
                    script_args={**extra, **scenario.args},
                )
            except BaseException as exc:  # raised below, in the caller's thread
                failures.append(exc)

        commits = xact_commits(args.postgres)
        before = {i: cpu_by_pid(pids) for i, pids in groups.items()}
        postgres_before = cpu_by_pid(postgres_pids())
        children = os.times()
        busy, total = cpu_times()
        workers = [threading.Thread(target=drive, args=(i,)) for i in nodes]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        busy_after, total_after = cpu_times()
        children_after = os.times()
        postgres_after = cpu_by_pid(postgres_pids())
        after = {i: cpu_by_pid(pids) for i, pids in groups.items()}
        commits = xact_commits(args.postgres) - commits - 1  # less the first read's own transaction
        if failures:
            raise failures[0]
        requests = sum(r.requests for r in results.values())
        scale = 1e6 / requests if requests else 0.0
        runs = []
        node_cpu = 0.0
        for i in nodes:
            used = sum(used_between(before[i], after[i]))
            node_cpu += used
            r = results[i]
            cpu = round(used * 1e6 / r.requests, 1) if r.requests else 0.0
            runs.append(NodeRun(i + 1, r.rps, r.requests, r.p50_us, r.p99_us, r.error_count, cpu))
            if scenario.requests_per_uuid:
                self.offsets[i] = r.next_offset
        postgres_cpu = sum(used_between(postgres_before, postgres_after, started=True))
        wrk_cpu = (children_after.children_user - children.children_user) + (
            children_after.children_system - children.children_system
        )
        return Run(
            rps=sum(r.rps for r in results.values()),
            requests=requests,
            nodes=runs,
            node_cpu_us=round(node_cpu * scale, 1),
            postgres_cpu_us=round(postgres_cpu * scale, 1),
            commits=max(0, commits),
            postgres_cpu_us_per_commit=round(postgres_cpu * 1e6 / commits, 1) if commits > 0 else 0.0,
            wrk_cpu_us=round(wrk_cpu * scale, 1),
            cpu_busy=round((busy_after - busy) / (total_after - total), 4) if total_after > total else 0.0,
        )

    def lists(self, servers: list[Server], scenario: Scenario, key: str, work: Path) -> list[Path]:
        """Each node's own list of real ad requests for a pixel scenario, minted on it with wrk just before,
        long enough for every run it takes part in to fire first fires only."""
        paths = []
        args = self.args
        for i, server in enumerate(servers):
            runs = sum(1 for count in args.nodes if count > i)
            if not runs:
                break
            seconds = mint_seconds(args.rounds * runs * args.duration, scenario.requests_per_uuid)
            path = work / f"uuids-node{i + 1}-{scenario.uuid_set}.txt"
            minted = mint_ad_requests(
                self.wrk, server.url, key, seconds, path, connections=args.connections, threads=args.threads
            )
            self.offsets[i] = 0
            note = (
                f"{scenario.name}: node {i + 1} fires on {len(minted):,} ad requests it minted in {seconds} s"
            )
            self.notes.append(note)
            print(f"[{note}]", flush=True)
            paths.append(path)
        return paths

    def scenario(self, servers: list[Server], scenario: Scenario, key: str, admin: str, work: Path) -> None:
        common = {"key": key, "venue": VENUE_ID, "screen": SCREEN_ID}
        script_args = [dict(common) for _ in servers]
        if scenario.requests_per_uuid:
            for args, path in zip(script_args, self.lists(servers, scenario, key, work), strict=False):
                args["uuids"] = str(path)
        before = delivery_totals(servers[0].url, admin) if scenario.pixels else None
        measured: dict[int, list[Run]] = {count: [] for count in self.args.nodes}
        for round_no in range(1, self.args.rounds + 1):
            for count in rotated(self.args.nodes, round_no):
                run = self.run(servers, scenario, count, script_args)
                measured[count].append(run)
                errors = sum(n.errors for n in run.nodes)
                flag = f"  ERRORS {errors}" if errors else ""
                print(
                    f"    {scenario.name:<16} round {round_no}/{self.args.rounds} {count} node(s) "
                    f"{run.rps:>10,.0f} req/s  node CPU {run.node_cpu_us:>6,.0f} µs/req  "
                    f"PostgreSQL {run.postgres_cpu_us:>6,.0f} µs/req{flag}",
                    flush=True,
                )
        pop = None
        if before is not None:
            after = delivery_totals(servers[0].url, admin)
            pop = {name: after[name] - before.get(name, 0) for name in after}
        one = statistics.median(r.rps for r in measured[1]) if 1 in measured else 0.0
        for count, runs in measured.items():
            self.rows.append(make_row(scenario, count, runs, one, split(self.args.connections, count), pop))

    def backend(self, work: Path) -> None:
        args = self.args
        schemas = fresh_schemas()
        launches = []
        try:
            for i in range(max(args.nodes)):
                data = work / f"node{i + 1}"

                def launch(port: int, data: Path = data) -> tuple[list[str], dict[str, str]]:
                    env = adslot_env(
                        data, port, postgres_url=args.postgres, schemas=schemas, extra=args.adslot_env
                    )
                    return adslot_command(port, 1), env

                launches.append(launch)
            env = launches[0](free_port())[1]
            key, admin = setup_production(env), admin_key(env)
            print(f"[postgres] production set up through the CLI in schemas {', '.join(schemas)}", flush=True)
            with ExitStack() as stack:
                servers = [
                    stack.enter_context(running(f"node {i + 1}", launch, work / f"node{i + 1}.log", key))
                    for i, launch in enumerate(launches)
                ]
                print("[postgres] nodes on " + ", ".join(s.url for s in servers), flush=True)
                warm = {"key": key, "venue": VENUE_ID, "screen": SCREEN_ID, "format": "json"}
                for server in servers:
                    run_wrk(
                        self.wrk,
                        server.url,
                        "ad_request.lua",
                        duration_s=args.warmup,
                        connections=split(args.connections, len(servers)),
                        threads=1,
                        script_args=warm,
                    )
                for scenario in args.scenarios:
                    self.scenario(servers, scenario, key, admin, work)
        finally:
            drop_schemas(args.postgres, schemas)
            print(f"[postgres] dropped schemas {', '.join(schemas)}", flush=True)


def make_row(
    scenario: Scenario,
    count: int,
    runs: list[Run],
    one_node_rps: float,
    per_node: int,
    pop: dict[str, int] | None,
) -> NodesRow:
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    rps = median([r.rps for r in runs])
    return NodesRow(
        scenario=scenario.name,
        nodes=count,
        connections_per_node=per_node,
        rps=rps,
        per_node_rps=rps / count,
        speedup=rps / one_node_rps if one_node_rps else 0.0,
        node_cpu_us=median([r.node_cpu_us for r in runs]),
        postgres_cpu_us=median([r.postgres_cpu_us for r in runs]),
        postgres_cpu_us_per_commit=median([r.postgres_cpu_us_per_commit for r in runs]),
        requests_per_commit=median([r.requests / r.commits for r in runs if r.commits]),
        wrk_cpu_us=median([r.wrk_cpu_us for r in runs]),
        cpu_busy=median([r.cpu_busy for r in runs]),
        p99_us=median([max(n.p99_us for n in r.nodes) for r in runs]),
        errors=sum(n.errors for r in runs for n in r.nodes),
        runs=runs,
        proof_of_play=pop,
    )


def nodes_per_core(row: NodesRow) -> float:
    """Single-worker nodes, each busy on one core, that one PostgreSQL core carries: a node at its capacity
    answers 1e6 / node µs requests a second, and PostgreSQL's core answers 1e6 / PostgreSQL µs, so their
    ratio is node µs / PostgreSQL µs (0 when PostgreSQL's CPU was not measured)."""
    return row.node_cpu_us / row.postgres_cpu_us if row.postgres_cpu_us else 0.0


def notes(rows: list[NodesRow], machine: Machine) -> list[str]:
    out = [
        f"ERRORS in {r.scenario} with {r.nodes} node(s): {r.errors} answers above 399 or socket errors"
        for r in rows
        if r.errors
    ]
    for r in rows:
        if r.proof_of_play and r.nodes == min(x.nodes for x in rows if x.scenario == r.scenario):
            pop = r.proof_of_play
            out.append(
                f"{r.scenario}: over all its runs the shared database counted {pop.get('counted', 0):,} "
                f"events and {pop.get('duplicate', 0):,} duplicates (the delivery report before vs after)."
            )
    for r in rows:
        if r.nodes == 1 and r.postgres_cpu_us:
            out.append(
                f"{r.scenario}, on paper: a node spends {r.node_cpu_us:,.0f} µs of CPU per request and "
                f"PostgreSQL {r.postgres_cpu_us:,.0f} µs ({r.postgres_cpu_us_per_commit:,.0f} µs per commit, "
                f"{r.requests_per_commit:,.1f} requests per commit), so one PostgreSQL core carries "
                f"{nodes_per_core(r):.1f} single-worker nodes at their capacity, and a PostgreSQL host with "
                f"P cores P x {nodes_per_core(r):.1f}. That holds while each node batches as a node at its "
                "capacity does (requests per commit); nodes below it batch less, and cost PostgreSQL "
                "more per request (here the rows of 2 and 3 nodes, which share the machine's CPUs)."
            )
    if machine.nproc < 4:
        out.append(
            f"All nodes, PostgreSQL and wrk share this machine's {machine.nproc} CPU(s): more nodes cannot "
            "add CPU here, so the rates show what several nodes cost, not how they scale; the CPU per "
            "request of each group is what carries over to a fleet of separate hosts."
        )
    out.append(
        "PostgreSQL's CPU is that of every postgres process on the machine and its commits those of the "
        "whole database: other load on them during a run is counted too."
    )
    return out


def _n(x: float) -> str:
    return f"{x:,.0f}"


def table(rows: list[NodesRow]) -> str:
    lines = [
        "| scenario | nodes | connections per node | req/s (all nodes) | req/s per node | vs 1 node "
        "| node CPU µs/req | PostgreSQL CPU µs/req | PostgreSQL µs/commit | req/commit | wrk CPU µs/req "
        "| machine busy | p99 µs (slowest node) | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.scenario} | {r.nodes} | {r.connections_per_node} | {_n(r.rps)} | {_n(r.per_node_rps)} | "
            f"{r.speedup:.2f} | {_n(r.node_cpu_us)} | {_n(r.postgres_cpu_us)} | "
            f"{_n(r.postgres_cpu_us_per_commit)} | {r.requests_per_commit:.1f} | {_n(r.wrk_cpu_us)} | "
            f"{r.cpu_busy:.0%} | {_n(r.p99_us)} | {r.errors} |"
        )
    return "\n".join(lines)


def markdown(result: NodesReport) -> str:
    m, c = result.machine, result.config
    out = [
        "# adslot: 1, 2 and 3 nodes on one PostgreSQL",
        "",
        *report.machine_lines(m),
        f"Each run: {c.connections} wrk connections and {c.threads} threads split over its nodes "
        f"({c.split}); {c.duration_s} s per run, {c.rounds} round(s), node counts interleaved, medians "
        f"over rounds. PostgreSQL: {c.postgres_url}; {result.status}.",
        "",
        table(result.rows),
        "",
        "What is measured: separate `adslot serve --workers 1` processes (the nodes), each with its own "
        "data dir, on one production in one pair of PostgreSQL schemas, set up through the CLI. A run with N "
        "nodes drives the first N at once; its rate is the sum of theirs. CPU per request (user + system, "
        "from /proc): the nodes' processes over the requests they answered, PostgreSQL's server processes "
        "over all requests and over the commits the database counted, wrk's own. Pixels fire on real ad "
        "requests each node minted itself just before, so every fire is a first fire.",
        "",
    ]
    if result.notes:
        out += ["Notes:", "", *(f"- {note}" for note in result.notes), ""]
    return "\n".join(out)


def write(result: NodesReport, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "nodes.json", out_dir / "nodes.md"
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
    reason = unreachable_reason(args.postgres)
    if reason:
        print(f"PostgreSQL unreachable at {redacted(args.postgres)}: {reason}", file=sys.stderr)
        return 1
    previous = signal.signal(signal.SIGTERM, exit_on_signal)
    machine = report.machine_facts(argv, wrk_version(wrk), PROG)
    config = NodesConfig(
        duration_s=args.duration,
        warmup_s=args.warmup,
        rounds=args.rounds,
        connections=args.connections,
        threads=args.threads,
        nodes=list(args.nodes),
        scenarios=[s.name for s in args.scenarios],
        postgres_url=redacted(args.postgres),
        adslot_env=args.adslot_env,
    )
    bench = NodesBench(args, wrk)
    status, failed = "ran", False
    try:
        with tempfile.TemporaryDirectory(prefix="adslot-bench-nodes-") as tmp:
            bench.backend(Path(tmp))
    except Exception as exc:  # the report keeps what ran, and says why the rest did not
        status, failed = f"failed: {str(exc).splitlines()[0]}", True
        print(f"FAILED: {exc}", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    report.finish(machine)
    result = NodesReport(machine, config, status, bench.rows, notes(bench.rows, machine) + bench.notes)
    json_path, md_path = write(result, args.out)
    print()
    print(markdown(result))
    print(f"written: {json_path}, {md_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
