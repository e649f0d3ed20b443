"""The ceiling of a durable pixel on this machine: the bare app against itself plus adslot's hand-off.

    python -m bench.handoff                      # ~3 min on 2 cores
    python -m bench.handoff --quick              # smoke run: 2 s per run, 1 round
    python -m bench.handoff --variants 0+fsync,0+fsync+thread   # a writer process against a worker thread

adslot answers a pixel only after the ledger writer process has committed it. This measures what that
wait alone costs, with no storage and no adslot code: the bare app (bench/bare_app.py) against variants of
it (bench/handoff_app.py) whose pixels go through adslot's own GroupCommitter to a writer process that
spins for a given number of microseconds per pixel and, optionally, fdatasyncs each batch. All run on the
same uvicorn stack with one worker, driven by the benchmark's impression script, interleaved round by
round; the table gives medians, the ratio to the bare app and each server's CPU per request (its worker,
and its writer process where it has one) from /proc. Writes bench/results/handoff.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.cpu import process_cpu_seconds
from bench.report import finish, machine_facts, machine_lines
from bench.servers import Server, bare_command, bare_env, running
from bench.wrk import WrkResult, run_wrk, wrk_binary, wrk_version

UUIDS = 2000
CONNECTIONS, THREADS = 64, 2


@dataclass(frozen=True)
class Variant:
    name: str
    fire_us: float | None
    """None: the bare app itself; else the hand-off with this much writer CPU per pixel."""
    fsync: bool = False
    in_worker: bool = False
    """No writer process: the worker's own thread appends (and syncs) each batch."""

    def launch(self, port: int) -> tuple[list[str], dict[str, str]]:
        if self.fire_us is None:
            return bare_command(port, 1), bare_env(port)
        return bare_command(port, 1, "bench.handoff_app:app"), bare_env(port) | {
            "BENCH_HANDOFF_FIRE_US": str(self.fire_us),
            "BENCH_HANDOFF_FSYNC": "1" if self.fsync else "0",
            "BENCH_HANDOFF_IN_WORKER": "1" if self.in_worker else "0",
        }


FLAGS = ("fsync", "thread")


def parse_variants(raw: str) -> list[Variant]:
    """Variants like `0,0+fsync,10+fsync,0+fsync+thread`: writer µs per pixel, `+fsync` for an fdatasync per
    batch, `+thread` for the worker's own thread in place of a writer process."""
    variants = [Variant("bare app", None)]
    for part in raw.split(","):
        us, *flags = part.strip().split("+")
        unknown = [f for f in flags if f not in FLAGS]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown flag {unknown[0]!r} in {part!r} (+fsync, +thread)")
        fire_us = float(us)
        if fire_us < 0:
            raise argparse.ArgumentTypeError(f"negative microseconds in {part!r}")
        where = "worker thread" if "thread" in flags else "writer"
        sync = " + fdatasync per batch" if "fsync" in flags else ""
        label = f"hand-off, {where} {fire_us:g} µs/pixel{sync}"
        variants.append(Variant(label, fire_us, "fsync" in flags, "thread" in flags))
    return variants


@dataclass
class Measured:
    results: list[WrkResult]
    worker_us: list[float]
    writer_us: list[float]


def _writer_pid(server: Server) -> int | None:
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    pids = children.read_text().split() if children.exists() else []
    return int(pids[0]) if pids else None


def _cpu_us(pid: int | None, before: tuple[float, float] | None, requests: float) -> float:
    if pid is None or before is None:
        return 0.0
    after = process_cpu_seconds(pid)
    return (sum(after) - sum(before)) * 1e6 / requests


def impressions(wrk: str, server: Server, uuids: Path, duration: int) -> WrkResult:
    """The benchmark's impression script (it reads only the uuid list), as every row is driven."""
    return run_wrk(
        wrk,
        server.url,
        "impression.lua",
        duration_s=duration,
        connections=CONNECTIONS,
        threads=THREADS,
        script_args={"uuids": str(uuids)},
    )


def measure(wrk: str, server: Server, uuids: Path, duration: int, into: Measured) -> None:
    writer = _writer_pid(server)
    worker_before = process_cpu_seconds(server.process.pid)
    writer_before = process_cpu_seconds(writer) if writer is not None else None
    result = impressions(wrk, server, uuids, duration)
    requests = max(result.rps * duration, 1.0)
    into.results.append(result)
    into.worker_us.append(_cpu_us(server.process.pid, worker_before, requests))
    into.writer_us.append(_cpu_us(writer, writer_before, requests))


def table(variants: list[Variant], measured: dict[str, Measured]) -> list[str]:
    bare = statistics.median(r.rps for r in measured[variants[0].name].results)
    lines = [
        "| server | req/s | ratio | p50 µs | p99 µs | worker CPU µs/req | writer CPU µs/req |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for variant in variants:
        m = measured[variant.name]
        rps = statistics.median(r.rps for r in m.results)
        has_writer = variant.fire_us is not None and not variant.in_worker
        writer = f"{statistics.median(m.writer_us):.1f}" if has_writer else ""
        lines.append(
            f"| {variant.name} | {rps:,.0f} | {rps / bare:.2f} "
            f"| {statistics.median(r.p50_us for r in m.results):,.0f} "
            f"| {statistics.median(r.p99_us for r in m.results):,.0f} "
            f"| {statistics.median(m.worker_us):.1f} "
            f"| {writer} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handoff", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants", type=parse_variants, default=parse_variants("0,0+fsync,10+fsync,20+fsync")
    )
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--quick", action="store_true", help="2 s runs, 1 round")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.rounds = 2, 1
    wrk = wrk_binary()
    if wrk is None:
        print("wrk not found on PATH: install it (apt-get install wrk)", file=sys.stderr)
        return 2
    given = argv if argv is not None else sys.argv[1:]
    machine = machine_facts(given, wrk_version(wrk), "python -m bench.handoff")
    variants: list[Variant] = args.variants
    measured = {v.name: Measured([], [], []) for v in variants}
    with tempfile.TemporaryDirectory(prefix="adslot-handoff-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        uuids = work / "uuids.txt"
        uuids.write_text("".join(f"0190a0b1-0000-7000-8000-{n:012d}\n" for n in range(UUIDS)))
        servers = [
            stack.enter_context(running(v.name, v.launch, work / f"server-{i}.log", key="unused"))
            for i, v in enumerate(variants)
        ]
        for server in servers:  # warm-up
            impressions(wrk, server, uuids, 1)
        for round_ in range(1, args.rounds + 1):
            for variant, server in zip(variants, servers, strict=True):
                measure(wrk, server, uuids, args.duration, measured[variant.name])
                last = measured[variant.name].results[-1]
                print(
                    f"  round {round_}/{args.rounds} {variant.name:55s} {last.rps:>9,.0f} req/s", flush=True
                )
    finish(machine)
    lines = [
        "# The ceiling of a durable pixel: the bare app against itself plus adslot's hand-off",
        "",
        *machine_lines(machine),
        f"wrk -t{THREADS} -c{CONNECTIONS}, {args.duration} s per run, {args.rounds} round(s) interleaved, "
        "medians.",
        "",
        *table(variants, measured),
        "",
        "Every row runs bench/bare_app.py's pixel answer on one uvicorn worker. The hand-off rows first pass "
        "each pixel through adslot's GroupCommitter (2 batches in flight) to a writer process and wait for "
        "its answer; the writer stores nothing, it only spins the given CPU per pixel and, with fdatasync, "
        "appends each batch to a file and syncs it. A worker-thread row has no writer process: the worker's "
        "own thread does the same for each batch (its CPU is in the worker's column). CPU per request is "
        "user + system time from /proc.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "handoff.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
