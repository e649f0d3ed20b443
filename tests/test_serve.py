"""`adslot serve` as operators run it: graceful SIGTERM and several worker processes on one database."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from adslot.settings import Settings
from adslot.storage.database import is_sqlite
from tests.conftest import free_port
from tests.served import Acked, Server, load_until, records_via_api


def test_sigterm_drains_in_flight_writes_and_exits_cleanly(served: tuple[Server, str, Settings]) -> None:
    server, key, _ = served
    server.start()
    acked = Acked()
    code = load_until(server, key, acked, server.terminate, min_new=20)
    assert code in (0, -signal.SIGTERM), f"adslot exited with {code} on SIGTERM"
    assert server.clean_stops() == 1, "the ledger was not drained before exit"
    server.start()
    found = records_via_api(server, key, acked.requests)
    missing = [u for u in acked.requests if u not in found]
    assert not missing, f"{len(missing)} acknowledged ad requests lost on SIGTERM"
    server.terminate()


def test_two_workers_share_one_database_and_count_each_event_once(
    served: tuple[Server, str, Settings],
) -> None:
    server, key, settings = served
    server.start(workers=2)
    writers = [command for _, command in server.ledger_writers()]
    if is_sqlite(settings.environment("production").database_url):
        assert len(writers) == 2, f"one shared writer per environment, not one per worker: {writers}"
        assert all("--listen" in command for command in writers), writers
    else:
        assert writers == [], "each worker writes to PostgreSQL itself"
    uuids: list[str] = []
    for _ in range(40):  # a new connection each time spreads requests over both workers
        r = httpx.post(
            f"{server.url}/api/v1/ad/request",
            headers={"Ssp-Key": key},
            json={"venue_id": "lobby", "play_time": int(time.time()) + 30},
        )
        assert r.status_code == 200
        uuids.append(r.json()["data"]["ad_request_uuid"])

    def fire(uuid: str) -> list[str]:
        return [
            httpx.get(f"{server.url}/api/v1/ad/callback/?ad_request_uuid={uuid}").json()["data"]["result"]
            for _ in range(3)
        ]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(fire, uuids))
    for uuid, fired in zip(uuids, results, strict=True):
        assert sorted(fired) == ["counted", "duplicate", "duplicate"], uuid
        record = httpx.get(f"{server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": key}).json()["data"]
        assert record["state"] == "played" and record["duplicate_count"] == 2
    assert server.terminate() in (0, -signal.SIGTERM)
    assert server.clean_stops() == 2, "both workers must drain and stop cleanly"


def healthz_pids_over_fresh_connections(port: int, count: int) -> list[int]:
    """Open `count` connections at once, then ask /healthz on each: the worker pid that answered each."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(count)]
    try:
        for sock in sockets:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        pids = []
        for sock in sockets:
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            pids.append(json.loads(answer.split(b"\r\n\r\n", 1)[1])["worker_pid"])
        return pids
    finally:
        for sock in sockets:
            sock.close()


def listening_sockets(port: int) -> dict[int, set[int]]:
    """pid -> inodes of the listening TCP sockets on `port` that the process holds, from /proc."""
    listening = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # 0A: LISTEN
            listening.add(int(fields[9]))
    held: dict[int, set[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        inodes = {int(link[8:-1]) for link in links if link.startswith("socket:[")} & listening
        if inodes:
            held[int(proc.name)] = inodes
    return held


def test_two_workers_each_listen_on_a_socket_of_their_own_and_share_a_burst_of_connections(
    served: tuple[Server, str, Settings],
) -> None:
    server, _, _ = served
    server.start(workers=2)
    workers = {pid for pid, command in server.descendants() if "multiprocessing.spawn" in command}
    held = listening_sockets(server.port)
    # One shared socket (uvicorn's own supervisor) lets the first worker to wake take every queued
    # connection; with SO_REUSEPORT each worker has its own and the kernel spreads connections by hash.
    assert set(held) == workers and len(workers) == 2, held
    first, second = (held[pid] for pid in sorted(workers))
    assert len(first) == len(second) == 1 and not first & second, held
    pids = healthz_pids_over_fresh_connections(server.port, 64)
    shares = collections.Counter(pids)
    # Under 12 of 64 for either worker has a chance of about 3 in 10 million with an even hash.
    assert set(shares) == workers and min(shares.values()) >= 12, shares
    assert server.terminate() in (0, -signal.SIGTERM)


def test_workers_and_their_ledger_writers_stop_when_the_supervisor_is_killed(
    served: tuple[Server, str, Settings],
) -> None:
    server, key, settings = served
    server.start(workers=2)
    below = server.descendants()
    workers = [pid for pid, command in below if "multiprocessing.spawn" in command]
    writers = [pid for pid, _ in server.ledger_writers()]
    commands = [command for _, command in server.ledger_writers()]
    on_sqlite = is_sqlite(settings.environment("production").database_url)
    assert len(workers) == 2 and len(writers) == (2 if on_sqlite else 0), below
    r = httpx.post(
        f"{server.url}/api/v1/ad/request",
        headers={"Ssp-Key": key},
        json={"venue_id": "lobby", "play_time": int(time.time()) + 30},
    )
    assert r.status_code == 200
    server.kill()  # SIGKILL to the supervisor alone: its workers must not serve on as orphans
    deadline = time.monotonic() + 30
    alive = workers + writers
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
    assert not alive, f"still running after the supervisor died: {alive}"
    assert not any(Path(command.split("--listen ", 1)[1]).parent.exists() for command in commands), (
        "the last writer out removes the socket directory the dead supervisor left"
    )
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}/healthz", timeout=2)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def sqlite_environ(data_dir: Path) -> dict[str, str]:
    """This process's environment for an `adslot serve` on SQLite in `data_dir` (the embedded default)."""
    environ = {**os.environ, "ADSLOT_DATA_DIR": str(data_dir)}
    for name in ("ADSLOT_DATABASE_URL", "ADSLOT_SANDBOX_DATABASE_URL"):
        environ.pop(name, None)
    return environ


@pytest.mark.parametrize("workers", [1, 2])
def test_a_client_connecting_the_moment_the_banner_shows_is_served(tmp_path: Path, workers: int) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "adslot.cli", "serve", "--port", str(port), "--workers", str(workers)],
        env=sqlite_environ(tmp_path),
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "serve.log").open("ab"),
        text=True,
    )
    assert process.stdout is not None
    try:
        banner = []
        while not (banner and banner[-1].lstrip().startswith("data")):
            line = process.stdout.readline()
            assert line, f"adslot serve ended before its banner: {banner}"
            banner.append(line)
        # At once, as a script started by the banner would: queued until the app answers, never refused.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: adslot\r\nConnection: close\r\n\r\n")
            conn.settimeout(60)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    finally:
        process.terminate()
        process.wait(60)
        process.stdout.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_refuses_a_port_that_is_taken(tmp_path: Path, workers: int) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "adslot.cli", "serve", "--port", str(port), "--workers", str(workers)],
            env=sqlite_environ(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0
    assert f"127.0.0.1:{port}" in done.stderr and "in use" in done.stderr, done.stderr
