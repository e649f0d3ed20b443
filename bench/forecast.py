"""What a forecast costs: CPU seconds of a console forecast over N screens and D days, on the SQLite
ledger (the forecast's runs as they were) and on the ledger's rules in memory (as they are), and that both
give one answer.

Run ``.venv/bin/python -m bench.forecast`` from the repository root (``--sizes 50x7`` etc.;
``--no-ledger`` skips the SQLite runs, which take minutes). It builds the simulator's synthetic network
(simulation/scenario.py: five screens a venue in five cities, 20 campaigns whose goals fit the supply, caps,
pacing, dayparts), then forecasts one proposal (standard tier, every venue, a daily plays cap) over it, once
per mode per round, alternating the modes. The figure is the forecast's process CPU time (user + system,
time.process_time: the machine is shared, so wall time says more about the neighbours than about the code);
wall time is shown beside.

Results are printed and written to ``bench/results/forecast.md`` and ``forecast.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec
import sqlalchemy as sa

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version
from adslot.simulation.forecast import ForecastReport, NewCampaign, forecast
from adslot.simulation.scenario import build_network
from adslot.storage.migrate import upgrade

START = 1_795_392_000  # 2026-11-23 00:00 UTC, a Monday
DAY = 86_400
RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True, slots=True)
class Run:
    screens: int
    days: int
    mode: str
    """"ledger" (SQLite, as before) or "memory"."""
    cpu_seconds: float
    wall_seconds: float
    slots: int
    """Slot decisions in both runs."""
    plays: int


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


def measure(
    engine: sa.Engine, offer: NewCampaign, folder: Path, screens: int, days: int, on_ledger: bool
) -> tuple[Run, ForecastReport]:
    cpu, wall = time.process_time(), time.perf_counter()
    with engine.connect() as conn:
        report = forecast(
            conn, offer, data_dir=folder, start=START, hours=days * 24, max_slots=10**9, on_ledger=on_ledger
        )
    run = Run(
        screens,
        days,
        "ledger" if on_ledger else "memory",
        round(time.process_time() - cpu, 2),
        round(time.perf_counter() - wall, 2),
        2 * report.screens * days * DAY // report.slot_seconds,
        report.plays,
    )
    return run, report


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", default=["50x7"], help="SCREENSxDAYS, e.g. 50x7 200x7")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-ledger", action="store_true", help="only the in-memory runs")
    args = parser.parse_args()
    runs: list[Run] = []
    for size in args.sizes:
        screens, days = (int(n) for n in size.split("x"))
        with tempfile.TemporaryDirectory(prefix="bench-forecast-") as tmp:
            folder = Path(tmp)
            engine, offer = network(folder, screens, days)
            modes = [False] if args.no_ledger else [True, False]
            answers: dict[bool, ForecastReport] = {}
            for _ in range(args.rounds):
                for on_ledger in modes:
                    run, report = measure(engine, offer, folder, screens, days, on_ledger)
                    print(json.dumps(asdict(run)), flush=True)
                    runs.append(run)
                    answers[on_ledger] = report
            if len(answers) == 2 and answers[True] != answers[False]:
                print(f"{size}: the two modes disagree", flush=True)
                return 1
            engine.dispose()
    write(runs)
    return 0


def write(runs: list[Run]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "forecast.json").write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")
    lines = [
        "# Forecast: CPU per forecast, SQLite ledger (as before) against the ledger's rules in memory",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}. "
        "CPU = the process's user + system seconds for the whole forecast (copy, both runs, report); "
        "the two modes gave the same report.",
        "",
        "| screens | days | mode | slot decisions | CPU s | wall s | µs CPU per decision | plays |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        per = r.cpu_seconds / r.slots * 1e6 if r.slots else 0.0
        lines.append(
            f"| {r.screens} | {r.days} | {r.mode} | {r.slots:,} | {r.cpu_seconds:.2f} | {r.wall_seconds:.2f} "
            f"| {per:.0f} | {r.plays:,} |"
        )
    (RESULTS / "forecast.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
