"""perf's samples put in the right process and layer, and turned into µs per request (bench/perf_split.py)."""

from __future__ import annotations

import pytest
from bench.perf_split import fold, layer, table, unavailable_reason

from tests.bench.test_bench_smoke import require_wrk, run_bench

SCRIPT = """\
python 100
\t          10403e _PyEval_EvalFrameDefault (/usr/lib/libpython3.11.so.1.0)
\t    7f655a9ac480 [unknown] ([unknown])

python 200
\t           5a1f0 sqlite3VdbeExec (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
\t           60f00 sqlite3_step (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)

python 200
\tffffffff81a0e0b0 ext4_sync_file ([kernel.kallsyms])
\tffffffff81a0f000 __x64_sys_fdatasync ([kernel.kallsyms])
\tffffffff821ef691 do_syscall_64 ([kernel.kallsyms])
\t          10aba4 fdatasync (/usr/lib/x86_64-linux-gnu/libc.so.6)

python 100
\tffffffff82036901 tcp_v4_rcv ([kernel.kallsyms])
\tffffffff81e695bb net_rx_action ([kernel.kallsyms])
\tffffffff8201030f tcp_sendmsg_locked ([kernel.kallsyms])
\tffffffff816bba2a ksys_write ([kernel.kallsyms])
\tffffffff821ef691 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           f838f __GI___libc_write (/usr/lib/x86_64-linux-gnu/libc.so.6)

python 200
\t           2a1f0 pysqlite_cursor_executemany (/usr/lib/python3.11/lib-dynload/_sqlite3.cpython-311.so)

python 100
\tffffffff8160a000 filemap_map_pages ([kernel.kallsyms])
\tffffffff8160b000 handle_mm_fault ([kernel.kallsyms])
\tffffffff8160c000 exc_page_fault ([kernel.kallsyms])

wrk 300
\tffffffff81e0c000 net_rx_action ([kernel.kallsyms])
\tffffffff81e0d000 __do_softirq ([kernel.kallsyms])

perf 400
\t          10aba4 write (/usr/lib/x86_64-linux-gnu/libc.so.6)

swapper 0
\tffffffff821f4dab pv_native_safe_halt ([kernel.kallsyms])
"""


def test_a_sample_s_layer_is_its_system_call_or_its_native_library() -> None:
    assert layer(
        [
            "ff ext4_sync_file ([kernel.kallsyms])",
            "ff __x64_sys_fdatasync ([kernel.kallsyms])",
            "ff do_syscall_64 ([kernel.kallsyms])",
        ]
    ) == ("kernel: fdatasync")
    # write's handler is ksys_write; the loopback peer's receive, run inside the send, is the send's cost.
    assert layer(
        [
            "ff tcp_v4_rcv ([kernel.kallsyms])",
            "ff net_rx_action ([kernel.kallsyms])",
            "ff ksys_write ([kernel.kallsyms])",
            "ff do_syscall_64 ([kernel.kallsyms])",
        ]
    ) == ("kernel: write")
    # A chain with no system call entry: an interrupt or softirq, whatever names a frame carries.
    assert layer(["ff ext4_sync_file ([kernel.kallsyms])", "ff __x64_sys_fdatasync ([kernel.kallsyms])"]) == (
        "kernel: interrupts, network, scheduling"
    )
    assert layer(["ff exc_page_fault ([kernel.kallsyms])"]) == "kernel: page faults"
    assert layer(["ff net_rx_action ([kernel.kallsyms])"]) == "kernel: interrupts, network, scheduling"
    assert layer(["5a1f0 sqlite3VdbeExec (/usr/lib/libsqlite3.so.0)"]) == "SQLite (C library)"
    assert layer(["5a1f0 x (/usr/lib/python3.11/lib-dynload/_sqlite3.cpython-311.so)"]) == (
        "sqlite3 module (C glue)"
    )
    # Extension modules live under python3.11/site-packages: their package names them, not the interpreter.
    site = "/work/.venv/lib/python3.11/site-packages"
    assert layer([f"5a1f0 x ({site}/msgspec/_core.cpython-311-x86_64-linux-gnu.so)"]) == "msgspec"
    assert layer([f"5a1f0 x ({site}/uvloop/loop.cpython-311-x86_64-linux-gnu.so)"]) == "uvloop"
    assert layer([f"5a1f0 x ({site}/httptools/parser/parser.cpython-311-x86_64-linux-gnu.so)"]) == "httptools"
    assert layer(["5a1f0 x (/usr/lib/python3.11/lib-dynload/_json.cpython-311.so)"]) == "other native code"
    assert layer(["5a1f0 _PyEval_EvalFrameDefault (/usr/bin/python3.11)"]) == "Python interpreter"
    assert layer(["5a1f0 x (/opt/lib/libfoo.so)"]) == "other native code"
    # A user-space leaf is not a system call, whatever kernel frame a stale chain may show after it.
    assert layer(["5a1f0 x (/usr/lib/libpython3.11.so.1.0)", "ff __x64_sys_read ([kernel.kallsyms])"]) == (
        "Python interpreter"
    )


def test_samples_are_folded_by_process_role_into_microseconds_per_request() -> None:
    # 1,000 Hz: a sample is 1,000 µs; over 100 requests, 10 µs per request.
    found = fold(
        SCRIPT,
        {100: "uvicorn worker", 200: "ledger writer"},
        {"wrk": "wrk, the load generator"},
        rate=1000,
        requests=100,
    )
    assert found == {
        "uvicorn worker": [
            ("Python interpreter", 10.0),
            ("kernel: write", 10.0),
            ("kernel: page faults", 10.0),
        ],
        "ledger writer": [
            ("SQLite (C library)", 10.0),
            ("kernel: fdatasync", 10.0),
            ("sqlite3 module (C glue)", 10.0),
        ],
        "wrk, the load generator": [("kernel: interrupts, network, scheduling", 10.0)],
    }  # perf itself and the idle CPU are nobody's


def test_a_role_s_table_keeps_its_largest_layers_and_sums_the_rest() -> None:
    rows = [("a", 5.0), ("b", 3.0), ("c", 1.5), ("d", 0.5)]
    lines = table("ledger writer", rows, keep=2)
    assert lines[2:5] == ["| a | 5.0 |", "| b | 3.0 |", "| the rest (2 layers) | 2.0 |"]
    assert lines[5] == "| **total** | **10.0** |"


@pytest.mark.timeout(900)
def test_profile_with_perf_splits_the_worker_and_the_writer_by_layer() -> None:
    require_wrk()
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"Linux perf cannot sample on this machine: {reason}")
    stdout = run_bench(
        "bench.profile", "--scenario", "impression", "--seconds", "2", "--perf", "499", timeout=840
    )
    assert "CPU by layer (Linux perf, cpu-clock at 499 Hz" in stdout
    for role in ("uvicorn worker", "ledger writer", "wrk, the load generator"):
        assert f"| {role}: perf, CPU only | µs per request |" in stdout, stdout
    # The writer commits every batch with an fdatasync and runs SQLite's C code and the interpreter.
    writer = stdout.split("| ledger writer: perf, CPU only |")[1].split("**total**")[0]
    for name in ("Python interpreter", "SQLite (C library)"):
        assert f"| {name} |" in writer, writer
