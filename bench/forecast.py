"""What a forecast costs: CPU seconds of a console forecast over N screens and D days, the code as it was (a
git commit, `--before`) against the code as it is, run interleaved, and that both give the same report.

Run ``.venv/bin/python -m bench.forecast`` from the repository root (``--sizes 50x7 100x30``, ``--rounds 2``,
``--before <commit>``; ``--ledger`` adds the SQLite ledger's runs of the code as it is, which take minutes).
Each forecast runs in a process of its own: the "before" one imports the `src` of the `--before` commit
(extracted with git archive), the "after" one this tree's. Rounds alternate the order (before, after, then
after, before: ABBA), so a neighbour's load falls on both alike. Each process builds the simulator's synthetic
network (simulation/scenario.py: five screens a venue in five cities, 20 campaigns whose goals fit the supply,
caps, pacing, dayparts, frequency, separation), then forecasts one proposal (standard tier, every venue, a
daily plays cap) over it. The figure is the forecast call's process CPU time (user + system,
time.process_time: the machine is shared, so wall time says more about the neighbours than about the code);
wall time and the process's peak resident memory are shown beside, and the load average before and after.

Results are printed and written to ``bench/results/forecast.md`` and ``forecast.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from io import BytesIO
from pathlib import Path

import msgspec
import sqlalchemy as sa

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version
from adslot.simulation import forecast as forecast_module
from adslot.simulation.forecast import NewCampaign, forecast
from adslot.simulation.scenario import build_network
from adslot.storage.migrate import upgrade

START = 1_795_392_000  # 2026-11-23 00:00 UTC, a Monday
DAY = 86_400
RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).parent.parent
BEFORE = "fa00857"
"""The commit the forecast was measured at before it was made faster (issue 73)."""


@dataclass(frozen=True, slots=True)
class Run:
    screens: int
    days: int
    code: str
    """"before" (the --before commit), "after" (this tree) or "ledger" (this tree, SQLite ledger)."""
    cpu_seconds: float
    wall_seconds: float
    slots: int
    """Slot decisions in both runs (with and without the proposal)."""
    plays: int
    report: str
    """SHA-256 of the report's JSON: the same answer gives the same digest."""
    peak_mib: int
    """The process's peak resident memory."""


def network(folder: Path, screens: int, days: int) -> tuple[sa.Engine, NewCampaign]:
    engine = sa.create_engine(f"sqlite:///{folder / 'source.sqlite3'}")
    upgrade(engine, None)
    with engine.begin() as conn:
        build_network(
            conn, screens=screens, campaigns=20, start=START, hours=days * 24, slot_seconds=300, seed=7
        )
        brand = campaigns_repo.create_advertiser(conn, AdvertiserIn("Bench brand", "auto")).id
        bump_version(conn)
    body = {
        "advertiser_id": brand,
        "name": "Proposal",
        "start_at": START,
        "end_at": START + days * DAY,
        "caps": [{"period": "daily", "metric": "plays", "limit": screens * 100}],
    }
    creative = {
        "name": "spot",
        "media_url": "https://cdn.example.test/spot.mp4",
        "mime_type": "video/mp4",
        "width": 1920,
        "height": 1080,
        "duration_seconds": 10,
    }
    return engine, NewCampaign(msgspec.convert(body, CampaignIn), [msgspec.convert(creative, CreativeIn)])


def one(screens: int, days: int, code: str) -> Run:
    """One forecast in this process, with whichever adslot it imports."""
    # The bench times windows beyond the longest a forecast allows (7 days): it lifts the bound.
    forecast_module.MAX_HOURS = max(forecast_module.MAX_HOURS, days * 24)
    with tempfile.TemporaryDirectory(prefix="bench-forecast-") as tmp:
        folder = Path(tmp)
        engine, offer = network(folder, screens, days)
        cpu, wall = time.process_time(), time.perf_counter()
        with engine.connect() as conn:
            report = forecast(
                conn,
                offer,
                data_dir=folder,
                start=START,
                hours=days * 24,
                max_slots=10**10,
                on_ledger=code == "ledger",
            )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        engine.dispose()
    return Run(
        screens,
        days,
        code,
        round(cpu, 2),
        round(wall, 2),
        2 * report.screens * days * DAY // report.slot_seconds,
        report.plays,
        hashlib.sha256(msgspec.json.encode(report)).hexdigest()[:16],
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    )


def spawn(screens: int, days: int, code: str, before_src: Path) -> Run:
    """One forecast in a child process: the --before commit's src for "before", this tree's otherwise."""
    env = dict(os.environ)
    src = before_src if code == "before" else ROOT / "src"
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT)])
    out = subprocess.run(
        [sys.executable, "-m", "bench.forecast", "--child", str(screens), str(days), code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"{code} {screens}x{days} failed:\n{out.stderr}")
    return Run(**json.loads(out.stdout.strip().splitlines()[-1]))


def extract(commit: str, into: Path) -> Path:
    """The commit's src directory, written under `into`."""
    archive = subprocess.run(
        ["git", "archive", commit, "src"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", default=["50x7"], help="SCREENSxDAYS, e.g. 50x7 100x30")
    parser.add_argument("--rounds", type=int, default=2, help="before/after pairs, alternating the order")
    parser.add_argument("--before", default=BEFORE, help="the commit whose forecast is 'before'")
    parser.add_argument("--ledger", action="store_true", help="add SQLite ledger runs of this tree")
    parser.add_argument("--child", nargs=3, metavar=("SCREENS", "DAYS", "CODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        screens, days, code = args.child
        print(json.dumps(asdict(one(int(screens), int(days), code))), flush=True)
        return 0
    runs: list[Run] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-forecast-src-") as tmp:
        before_src = extract(args.before, Path(tmp))
        for size in args.sizes:
            screens, days = (int(n) for n in size.split("x"))
            order = []
            for round_ in range(args.rounds):
                order += ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
            if args.ledger:
                order.append("ledger")
            for code in order:
                run = spawn(screens, days, code, before_src)
                print(json.dumps(asdict(run)), flush=True)
                runs.append(run)
    load_after = os.getloadavg()
    write(runs, args.before, load_before, load_after)
    digests: dict[tuple[int, int], set[str]] = {}
    for run in runs:
        digests.setdefault((run.screens, run.days), set()).add(run.report)
    disagree = [f"{s}x{d}" for (s, d), found in digests.items() if len(found) > 1]
    if disagree:
        print(f"the reports differ at {', '.join(disagree)}", flush=True)
        return 1
    return 0


def write(
    runs: list[Run], before: str, load_before: tuple[float, ...], load_after: tuple[float, ...]
) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "forecast.json").write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")
    lines = [
        "# Forecast: CPU per forecast, before and after, interleaved",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}. Before = commit {before}, after = this "
        "tree, each forecast in a process of its own, ABBA. CPU = the forecast call's user + system seconds "
        "(copy, both runs, report). Load average (1, 5, 15 min): "
        f"{' '.join(f'{x:.2f}' for x in load_before)} at the start, "
        f"{' '.join(f'{x:.2f}' for x in load_after)} at the end.",
        "",
        "| screens | days | code | slot decisions | CPU s | wall s | µs CPU per decision | plays | peak MiB "
        "| report |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        per = r.cpu_seconds / r.slots * 1e6 if r.slots else 0.0
        lines.append(
            f"| {r.screens} | {r.days} | {r.code} | {r.slots:,} | {r.cpu_seconds:.2f} | {r.wall_seconds:.2f} "
            f"| {per:.1f} | {r.plays:,} | {r.peak_mib:,} | `{r.report}` |"
        )
    lines += ["", "| screens | days | code | runs | median CPU s | spread (min to max) | before / after |"]
    lines.append("|---:|---:|---|---:|---:|---|---:|")
    sizes = sorted({(r.screens, r.days) for r in runs})
    for screens, days in sizes:
        medians: dict[str, float] = {}
        for code in ("before", "after", "ledger"):
            cpu = [r.cpu_seconds for r in runs if (r.screens, r.days, r.code) == (screens, days, code)]
            if not cpu:
                continue
            medians[code] = statistics.median(cpu)
            ratio = ""
            if code == "after" and "before" in medians:
                ratio = f"{medians['before'] / medians['after']:.1f}x"
            lines.append(
                f"| {screens} | {days} | {code} | {len(cpu)} | {medians[code]:.2f} | "
                f"{min(cpu):.2f} to {max(cpu):.2f} | {ratio} |"
            )
    (RESULTS / "forecast.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
