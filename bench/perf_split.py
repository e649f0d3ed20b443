"""CPU by layer: Linux perf's samples of the whole machine, each put in the process and the layer it ran in.

py-spy sees Python frames and counts a thread blocked in a system call (the COMMIT's fdatasync) as busy;
/proc gives each process's exact CPU but not where inside it went. perf's `cpu-clock` sampler, with the
kernel's call chain, samples only what runs on a CPU and says in which layer: the Python interpreter, SQLite's
C library, the sqlite3 module's glue, msgspec, uvloop, httptools, libc, or the kernel (by system call, page
faults, or the rest: interrupts, the network stack's softirqs, scheduling). That is the split a question
like "what would a writer not written in Python save?" needs. Software sampling (no hardware counters
needed), so it runs in the VMs this benchmark runs in.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

SYSCALL_ENTRY = ("do_syscall_64", "entry_SYSCALL_64_after_hwframe", "el0_svc_common", "invoke_syscall")
SYSCALL_HANDLER = re.compile(
    r"^(?:__x64_sys_|__ia32_sys_|__arm64_sys_|__do_sys_|__se_sys_|ksys_|__sys_|do_sys_)"
)
"""A system call's handler, as the kernel's call chain names it (write is `ksys_write`, fdatasync
`__x64_sys_fdatasync`): the name after the prefix is the call."""
PAGE_FAULT = ("exc_page_fault", "handle_mm_fault", "do_user_addr_fault")
LIBRARIES: list[tuple[str, str]] = [
    ("/msgspec/", "msgspec"),
    ("/uvloop/", "uvloop"),
    ("/httptools/", "httptools"),
    ("libsqlite3", "SQLite (C library)"),
    ("/_sqlite3.", "sqlite3 module (C glue)"),
    ("/libc.so", "libc"),
    ("/libc-", "libc"),
    ("/wrk", "wrk and LuaJIT"),
    ("luajit", "wrk and LuaJIT"),
    ("/postgres", "PostgreSQL (C)"),
]
"""Markers in a native object's path, checked in order. The interpreter is told by its file's own name
(`libpython3.11.so`, `python3.11`): every extension module's path holds `python3.11` too (site-packages)."""
INTERPRETER = ("libpython", "python")
OTHER_NATIVE = "other native code"


def perf_binary() -> str | None:
    return shutil.which("perf")


def unavailable_reason() -> str | None:
    """Why this machine cannot sample with perf, or None."""
    perf = perf_binary()
    if perf is None:
        return "perf is not installed (Debian's linux-perf)"
    probe = subprocess.run(
        [perf, "stat", "-e", "cpu-clock", "true"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return f"perf cannot sample here: {probe.stderr.strip()[:200]}"
    return None


def record(out: Path, rate: int) -> subprocess.Popen[bytes]:
    """Sample every CPU until the process is interrupted (SIGINT), kernel call chains included."""
    perf = perf_binary()
    assert perf is not None, "check unavailable_reason() first"
    return subprocess.Popen(
        [perf, "record", "-e", "cpu-clock", "-F", str(rate), "-a", "-g", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def script(data: Path) -> str:
    perf = perf_binary()
    assert perf is not None, "check unavailable_reason() first"
    return subprocess.run(
        [perf, "script", "-i", str(data), "-F", "comm,pid,ip,sym,dso"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _symbol(frame: str) -> str:
    """`ffffffff821ef691 do_syscall_64 ([kernel.kallsyms])` -> `do_syscall_64`."""
    parts = frame.split()
    return parts[1] if len(parts) > 2 else ""


def layer(frames: list[str]) -> str:
    """The layer of one sample, from its call chain's lines (leaf first): `ip symbol (dso)`."""
    if not frames:
        return OTHER_NATIVE
    if "[kernel.kallsyms]" in frames[0]:
        symbols = [_symbol(frame) for frame in frames if "[kernel.kallsyms]" in frame]
        for inner, outer in itertools.pairwise(symbols):
            if outer in SYSCALL_ENTRY and inner not in SYSCALL_ENTRY:
                return f"kernel: {SYSCALL_HANDLER.sub('', inner)}"
        if any(name in frame for frame in frames for name in PAGE_FAULT):
            return "kernel: page faults"
        return "kernel: interrupts, network, scheduling"
    dso = frames[0].rsplit("(", 1)[-1].rstrip(")")
    for marker, name in LIBRARIES:
        if marker in dso:
            return name
    if dso.rsplit("/", 1)[-1].startswith(INTERPRETER):
        return "Python interpreter"
    return OTHER_NATIVE


def fold(
    text: str, roles: Mapping[int, str], comm_roles: Mapping[str, str], rate: int, requests: float
) -> dict[str, list[tuple[str, float]]]:
    """µs of CPU per request for each role's layers, most first, from `perf script` output.

    A sample belongs to the role of its pid (`roles`) or else of its command name (`comm_roles`: wrk, the
    PostgreSQL server's processes); the rest of the machine (perf itself, idle) is left out."""
    counts: dict[str, Counter[str]] = {}
    for block in text.split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines()]
        if not lines:
            continue
        comm, _, pid_text = lines[0].rpartition(" ")
        try:
            pid = int(pid_text)
        except ValueError:
            continue
        role = roles.get(pid) or comm_roles.get(comm.strip())
        if role is None:
            continue
        counts.setdefault(role, Counter())[layer(lines[1:])] += 1
    per_sample_us = 1e6 / rate / max(requests, 1.0)
    return {
        role: [(name, n * per_sample_us) for name, n in found.most_common()] for role, found in counts.items()
    }


def table(role: str, rows: list[tuple[str, float]], *, keep: int = 12) -> list[str]:
    """A Markdown table of one role's layers: the largest `keep`, the rest summed."""
    shown = rows[:keep]
    rest = sum(us for _, us in rows[keep:])
    lines = [f"| {role}: perf, CPU only | µs per request |", "|---|---:|"]
    lines += [f"| {name} | {us:.1f} |" for name, us in shown]
    if rest:
        lines.append(f"| the rest ({len(rows) - keep} layers) | {rest:.1f} |")
    lines += [f"| **total** | **{sum(us for _, us in rows):.1f}** |", ""]
    return lines
