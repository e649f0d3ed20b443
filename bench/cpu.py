"""CPU time of processes, from /proc: what one request costs each process of a server, kernel included.

Samples (py-spy) show where inside a process the time goes; these counters say exactly how much each process
used, which is what decides a ratio when the load generator shares the CPUs with the server.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from bench.wrk import WrkResult

WRITER = b"adslot.ledger.writer_process"


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (which may hold spaces): state, ppid, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def process_cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds a process has used so far, from /proc/PID/stat."""
    fields = _stat(pid)
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_by_pid(pids: list[int]) -> dict[int, tuple[float, float]]:
    """(user, system) CPU seconds of each process that is still there."""
    found = {}
    for pid in pids:
        try:
            found[pid] = process_cpu_seconds(pid)
        except OSError:
            continue
    return found


def used_between(
    before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]], *, started: bool = False
) -> tuple[float, float]:
    """(user, system) CPU seconds the processes read at both ends used in between. One that exited meanwhile
    (a PostgreSQL backend whose connection closed) is left out, its last CPU gone with it (summing the group
    at each end would subtract its whole lifetime's CPU and could give negative figures). With `started`,
    one read only at the end started in between, so all its CPU counts: the group was listed again at the end
    (a connection pool replaces its PostgreSQL connections, asyncpg's after 50,000 queries each)."""
    user = system = 0.0
    for pid, (u, s) in after.items():
        if pid in before:
            user += u - before[pid][0]
            system += s - before[pid][1]
        elif started:
            user += u
            system += s
    return user, system


def postgres_pids() -> list[int]:
    """Every PostgreSQL server process on this machine (the server runs beside the benchmark, on loopback)."""
    found = []
    for pid in _pids():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "postgres":
                found.append(pid)
        except OSError:
            continue
    return found


def _parents() -> dict[int, int]:
    parents = {}
    for pid in _pids():
        try:
            parents[pid] = int(_stat(pid)[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def descendants(root: int) -> list[int]:
    """`root` and every process below it, now."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def server_groups(root: int) -> dict[str, list[int]]:
    """An `adslot serve` process tree split into its ledger writer processes and the rest (its workers, and
    with several workers their supervisor, which does next to nothing under load)."""
    groups: dict[str, list[int]] = {"workers": [], "ledger writer": []}
    for pid in descendants(root):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        groups["ledger writer" if WRITER in command else "workers"].append(pid)
    return groups


Pids = list[int] | Callable[[], list[int]]
"""A group's processes: fixed, or listed again at each end of a run (processes that come and go)."""


def _listed(pids: Pids) -> list[int]:
    return pids() if callable(pids) else pids


def cpu_during(
    load: Callable[[], WrkResult], groups: Mapping[str, Pids]
) -> tuple[WrkResult, dict[str, tuple[float, float]]]:
    """Run `load` (one wrk run): its result, and the (user, system) CPU seconds each group used meanwhile, and
    "wrk" its own: our only child that runs and is reaped meanwhile, so the children's times are its."""
    before = {name: cpu_by_pid(_listed(pids)) for name, pids in groups.items()}
    children = os.times()
    result = load()
    after = {name: cpu_by_pid(_listed(pids)) for name, pids in groups.items()}
    children_after = os.times()
    used = {name: used_between(before[name], after[name], started=callable(groups[name])) for name in groups}
    used["wrk"] = (
        children_after.children_user - children.children_user,
        children_after.children_system - children.children_system,
    )
    return result, used


def measure_cpu(load: Callable[[], WrkResult], groups: Mapping[str, Pids]) -> WrkResult:
    """`load`'s result with each group's CPU µs (user + system) per request, wrk's included."""
    result, used = cpu_during(load, groups)
    if not result.requests:
        return result
    scale = 1e6 / result.requests
    return msgspec.structs.replace(
        result, cpu_us={name: round((user + system) * scale, 1) for name, (user, system) in used.items()}
    )
