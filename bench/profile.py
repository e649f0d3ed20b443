"""Where each microsecond of a hot path goes: py-spy samples of adslot under wrk load, folded per request.

    python -m bench.profile --scenario impression            # or ad_request_json, vast, tracking
    python -m bench.profile --scenario impression --bare     # the bare app, for the uvicorn share
    python -m bench.profile --scenario impression --postgres postgresql://postgres@127.0.0.1:5432/test
    python -m bench.profile --scenario impression --perf     # and each process's CPU by layer (Linux perf)

Starts adslot on SQLite, or on PostgreSQL in fresh schemas with `--postgres` (set up through the CLI, as
`python -m bench` does), makes real ad requests, drives one scenario with wrk and records, at a low rate so as
not to slow what it measures: the worker's thread while it holds the GIL (`py-spy --gil`: the time the worker
is busy, including its socket system calls) and the ledger writer process, where there is one (busy
samples only; on PostgreSQL the worker applies its batches itself). Each sample is
put in a bucket by the code it is in; a bucket's share of the samples, divided by the requests served while
recording, is its microseconds per request.

Then it runs the same load again without py-spy and reads each process's CPU time from /proc (user and
system, which the samples cannot split and partly miss: socket and file system calls run in the kernel),
and wrk's own from the children's times: the exact CPU each request costs each process. With
`--postgres` the table adds every PostgreSQL server process of the machine (its backends, WAL writer and
checkpointer), as one row: their CPU comes off the same cores. `--perf` adds a third run of the same load
under Linux perf, which samples only time on a CPU and splits each process's by layer (perf_split.py).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from functools import cache
from pathlib import Path

from bench import perf_split
from bench.cpu import WRITER, Pids, cpu_during, postgres_pids, process_cpu_seconds
from bench.postgres import drop_schemas, fresh_schemas, unreachable_reason
from bench.scenarios import Scenario, select
from bench.servers import (
    SCREEN_ID,
    VENUE_ID,
    adslot_command,
    adslot_env,
    bare_command,
    bare_env,
    free_port,
    issue_ad_requests,
    mint_ad_requests,
    mint_seconds,
    parse_caps,
    running,
    setup_production,
)
from bench.wrk import WrkResult, run_wrk, wrk_binary

Rule = tuple[str, Callable[[str], bool]]
COMMIT = 'conn.execute("COMMIT")'
SQLITE_STORE = Path(__file__).resolve().parents[1] / "src" / "adslot" / "ledger" / "sqlite_store.py"


@cache
def _line_of(text: str) -> int:
    """The line of sqlite_store.py that runs `text` (py-spy names frames by file and line)."""
    for number, line in enumerate(SQLITE_STORE.read_text().splitlines(), start=1):
        if text in line and "execute" in line:
            return number
    return -1


ASYNCPG: Rule = ("asyncpg: statements out, rows in (PostgreSQL)", lambda f: "asyncpg/" in f)
RULES: Rule = (
    "Proof-of-Play rules and batch plan (resolve.py, store.py)",
    lambda f: "resolve.py" in f or "/store.py" in f,
)
"""In the writer process's samples, and in the worker's where it applies its batches itself (PostgreSQL's)."""
WORKER_BUCKETS: list[Rule] = [
    ("VAST building (vast/)", lambda f: "adslot/vast/" in f),
    (
        "write batches: group commit, pipe to the writer",
        lambda f: any(
            m in f for m in ("group_commit.py", "process_store.py", "wire.py", "asyncio/streams.py")
        ),
    ),
    (
        "decision, claims, slot clock (decision/, serving/)",
        lambda f: any(m in f for m in ("/decision/", "/serving/", "claims.py", "budget.py")),
    ),
    ("authentication (key hash lookup)", lambda f: "/auth" in f),
    ASYNCPG,
    RULES,
    ("ledger store: point reads (and PostgreSQL's batches)", lambda f: "_store.py" in f),
    (
        "handlers: validation, uuid, reply encoding",
        lambda f: (
            any(m in f for m in ("adslot/api/", "adslot/ids.py", "bench/bare_app.py"))
            and "hot_paths.py" not in f
            and "api/protocol.py" not in f
        ),
    ),
    ("hot paths: dispatch, query parsing", lambda f: "hot_paths.py" in f or "urllib/parse" in f),
    ("protocol lane: routing, task, answer encoding", lambda f: "api/protocol.py" in f),
]
WRITER_BUCKETS: list[Rule] = [
    ("COMMIT (WAL write + fsync)", lambda f: f"sqlite_store.py:{_line_of(COMMIT)})" in f),
    (
        "BEGIN IMMEDIATE (SQLite's write lock)",
        lambda f: f"sqlite_store.py:{_line_of('BEGIN IMMEDIATE')})" in f,
    ),
    ASYNCPG,
    ("reads: state of the named ad requests", lambda f: "_read_current" in f or "current_of" in f),
    RULES,
    (
        "writes: UPDATE/INSERT ad_requests (fired bits too), counters, stats",
        lambda f: ("sqlite_store.py" in f or "postgres_store.py" in f) and "_apply " in f,
    ),
    (
        "pipe to the worker: read a batch, send its answer (SQLite)",
        lambda f: "writer_loop.py" in f and any(name in f for name in ("_read (", "_send (", "run (")),
    ),
    ("frames: decode batch, encode verdicts", lambda f: "wire.py" in f),
    ("the rest of the batch in the store", lambda f: "sqlite_store.py" in f or "postgres_store.py" in f),
]


def _bucket(stack: list[str], rules: list[Rule], *, worker: bool) -> str:
    leaf = stack[-1]
    if worker and "httptools_impl.py" in leaf and "RequestResponseCycle.send" in leaf:
        return "uvicorn: socket writes (headers, body)"
    if worker and "protocol.py" in leaf and ("_respond" in leaf or "_answer" in leaf):
        return "protocol lane: the answer's one socket write"
    for frame in reversed(stack):
        for name, matches in rules:
            if matches(frame):
                return name
    if worker and any("uvicorn/" in f for f in stack):
        return "uvicorn: HTTP parsing, request tasks"
    return "event loop and the rest"


def fold(
    raw: Path, rules: list[Rule], *, worker: bool, rate: int, requests: float
) -> list[tuple[str, float]]:
    """µs per request per bucket from a py-spy raw (collapsed) file."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")[1:]  # the first is the thread
        if frames:
            counts[_bucket(frames, rules, worker=worker)] += int(n)
    per_sample_us = 1e6 / rate / max(requests, 1.0)
    return [(name, count * per_sample_us) for name, count in counts.most_common()]


def cpu_per_request(
    load: Callable[[int], WrkResult], seconds: int, pids: Mapping[str, Pids]
) -> tuple[WrkResult, list[tuple[str, float, float]]]:
    """One load run: (user µs, system µs) per request for each named group of processes, and for wrk."""
    result, used = cpu_during(lambda: load(seconds), pids)
    scale = 1e6 / (result.rps * seconds)
    names = {"wrk": "wrk, the load generator"}
    return result, [(names.get(name, name), u * scale, s * scale) for name, (u, s) in used.items()]


@cache
def _writer_pid(worker_pid: int) -> int | None:
    """The busiest of the worker's ledger writer processes (production's, under the benchmark's load)."""
    children = subprocess.run(["pgrep", "-P", str(worker_pid)], capture_output=True, text=True).stdout.split()
    busiest: tuple[float, int] | None = None
    for pid in map(int, children):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            used = sum(process_cpu_seconds(pid))
        except OSError:
            continue
        if WRITER in command and (busiest is None or used > busiest[0]):
            busiest = (used, pid)
    return None if busiest is None else busiest[1]


def _output(seconds: int, out: Path) -> list[str]:
    return ["-d", str(seconds), "-f", "raw", "-o", str(out), "--nonblocking"]


def profile(
    scenario: Scenario,
    seconds: int,
    rate: int,
    bare: bool,
    work: Path,
    postgres_url: str | None = None,
    perf_rate: int | None = None,
    caps: str | None = None,
) -> str:
    """With `perf_rate`, a third run under Linux perf adds each process's CPU by layer (perf_split.py);
    with `caps` (JSON, as `python -m bench --caps`), adslot's campaign is capped."""
    if perf_rate is not None:
        reason = perf_split.unavailable_reason()
        if reason is not None:
            raise SystemExit(f"--perf: {reason}")
    if postgres_url is None:
        return _profile(scenario, seconds, rate, bare, work, None, None, perf_rate, caps)
    reason = unreachable_reason(postgres_url)
    if reason is not None:
        raise SystemExit(f"PostgreSQL is not reachable at {postgres_url}: {reason}")
    schemas = fresh_schemas()
    try:
        return _profile(scenario, seconds, rate, bare, work, postgres_url, schemas, perf_rate, caps)
    finally:
        drop_schemas(postgres_url, schemas)


def _profile(
    scenario: Scenario,
    seconds: int,
    rate: int,
    bare: bool,
    work: Path,
    postgres_url: str | None,
    schemas: tuple[str, str] | None,
    perf_rate: int | None,
    caps: str | None,
) -> str:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    wrk = wrk_binary()
    if wrk is None:
        raise SystemExit("wrk not found on PATH: install it (apt-get install wrk)")

    def settings(port: int) -> dict[str, str]:
        return adslot_env(work / "data", port, postgres_url=postgres_url, schemas=schemas, extra={})

    key = setup_production(settings(free_port()), caps)

    def adslot_launch(port: int) -> tuple[list[str], dict[str, str]]:
        return adslot_command(port, 1), settings(port)

    def bare_launch(port: int) -> tuple[list[str], dict[str, str]]:
        return bare_command(port, 1), bare_env(port)

    with ExitStack() as stack:
        adslot = stack.enter_context(running("adslot", adslot_launch, work / "adslot.log", key))
        target = stack.enter_context(running("bare", bare_launch, work / "bare.log", key)) if bare else adslot
        uuid_file = work / "uuids.txt"
        if scenario.requests_per_uuid:
            # As in `python -m bench`: pixels fire on a list long enough that each is a first fire; the
            # warm-up, the recorded run and the /proc run each go on where the last one stopped.
            runs = 3 if perf_rate is not None else 2
            mint_s = mint_seconds(2 + runs * seconds, scenario.requests_per_uuid)
            mint_ad_requests(wrk, adslot.url, key, mint_s, uuid_file, connections=64, threads=2)
        else:
            uuid_file.write_text("\n".join(issue_ad_requests(adslot.url, key, 2000)) + "\n")
        args = {"venue": VENUE_ID, "screen": SCREEN_ID, "key": key, "uuids": str(uuid_file)}
        offset = 0

        def load(duration: int) -> WrkResult:
            nonlocal offset
            result = run_wrk(
                wrk,
                target.url,
                scenario.script,
                duration_s=duration,
                connections=64,
                threads=2,
                script_args={**args, **scenario.args, "offset": str(offset)},
            )
            offset = result.next_offset
            return result

        load(2)  # warm-up
        worker = target.process.pid  # one uvicorn worker serves in the process it was started as
        writer = None if bare else _writer_pid(worker)
        records: list[tuple[int, list[str], Path, list[Rule], bool]] = [
            (worker, ["--gil"], work / "worker.txt", WORKER_BUCKETS, True)
        ]
        if writer is not None:
            records.append((writer, [], work / "writer.txt", WRITER_BUCKETS, False))
        spies = [
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--threads",
                    *flags,
                    "-r",
                    str(rate),
                    *_output(seconds, out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for pid, flags, out, _, _ in records
        ]
        time.sleep(0.5)
        result = load(seconds)
        for spy_process in spies:
            spy_process.wait(timeout=seconds + 60)
        names: dict[str, Pids] = {"uvicorn worker": [worker]}
        if writer is not None:
            names["ledger writer"] = [writer]
        if postgres_url is not None and not bare:
            names["PostgreSQL server processes"] = postgres_pids  # listed at each end: pools reconnect
        measured, cpu_rows = cpu_per_request(load, seconds, names)
        layers = None
        if perf_rate is not None:
            roles = {pid: name for name, pids in names.items() if isinstance(pids, list) for pid in pids}
            comm_roles = {"wrk": "wrk, the load generator"}
            if postgres_url is not None and not bare:
                comm_roles["postgres"] = "PostgreSQL server processes"
            layers = _perf_run(load, seconds, perf_rate, work / "perf.data", roles, comm_roles)
    requests = result.rps * seconds
    who = "bare app" if bare else f"adslot ({'PostgreSQL' if postgres_url else 'SQLite'}, 1 worker)"
    lines = [f"### {scenario.name}: {who}, {result.rps:,.0f} req/s under wrk -c64, py-spy at {rate} Hz", ""]
    for pid, _, out, rules, is_worker in records:
        rows = fold(out, rules, worker=is_worker, rate=rate, requests=requests)
        total = sum(us for _, us in rows)
        title = "worker thread, GIL held" if is_worker else "ledger writer process, busy"
        lines += [f"| {title} (pid {pid}) | µs per request |", "|---|---:|"]
        lines += [f"| {name} | {us:.1f} |" for name, us in rows]
        lines += [f"| **total** | **{total:.1f}** |", ""]
    lines += [
        f"| CPU per request, from /proc (the same load without py-spy: {measured.rps:,.0f} req/s) "
        "| user µs | system µs | total µs |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {user:.1f} | {system:.1f} | {user + system:.1f} |" for name, user, system in cpu_rows
    ]
    server = sum(user + system for name, user, system in cpu_rows if not name.startswith("wrk"))
    lines += [f"| **server, all processes** | | | **{server:.1f}** |", ""]
    if layers is not None:
        perf_result, by_role = layers
        lines += [
            f"CPU by layer (Linux perf, cpu-clock at {perf_rate} Hz on every CPU, a third run of the same "
            f"load: {perf_result.rps:,.0f} req/s)",
            "",
        ]
        for role, rows in by_role.items():
            lines += perf_split.table(role, rows)
    return "\n".join(lines)


def _perf_run(
    load: Callable[[int], WrkResult],
    seconds: int,
    rate: int,
    data: Path,
    roles: Mapping[int, str],
    comm_roles: Mapping[str, str],
) -> tuple[WrkResult, dict[str, list[tuple[str, float]]]]:
    recorder = perf_split.record(data, rate)
    try:
        time.sleep(0.5)  # perf is sampling before the load starts
        result = load(seconds)
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=120)
    by_role = perf_split.fold(
        perf_split.script(data), roles, comm_roles, rate=rate, requests=result.rps * seconds
    )
    ordered = {
        role: by_role[role]
        for role in [*dict.fromkeys(roles.values()), *comm_roles.values()]
        if role in by_role
    }
    return result, ordered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="impression")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--bare", action="store_true", help="profile the bare app instead of adslot")
    parser.add_argument("--postgres", metavar="URL", help="run adslot on PostgreSQL at URL (fresh schemas)")
    parser.add_argument(
        "--perf",
        nargs="?",
        type=int,
        const=999,
        metavar="HZ",
        help="add a run under Linux perf: each process's CPU by layer (interpreter, SQLite, kernel calls)",
    )
    parser.add_argument(
        "--caps",
        type=parse_caps,
        metavar="JSON",
        help="cap adslot's campaign, as `python -m bench --caps` does (default uncapped)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="work in DIR and keep it: py-spy's raw stacks, the servers' logs, the uuid list",
    )
    args = parser.parse_args(argv)
    (scenario,) = select([args.scenario])
    with ExitStack() as stack:
        if args.keep is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="adslot-profile-")))
        else:
            work = args.keep
            work.mkdir(parents=True, exist_ok=True)
        print(
            profile(scenario, args.seconds, args.rate, args.bare, work, args.postgres, args.perf, args.caps)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
