"""Storage that fails under a running adslot: every endpoint answers 503 storage_unavailable with
Retry-After (never a 500), and once the cause goes adslot serves again by itself with nothing it
acknowledged lost. Disk full: the data folder on a small tmpfs that the test fills (root only, as in CI)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROD_VENUE, LiveServer, play_time, start_server


@contextlib.contextmanager
def small_filesystem(path: Path, megabytes: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the data folder needs root (CI runs as root)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)], check=False
    )
    if mounted.returncode != 0:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, filler: Path | None = None) -> Path:
    """Write (or add to) a file until the filesystem is full; return it."""
    filler = filler or path / "filler"
    with filler.open("ab", buffering=0) as out:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


def ad_request(client: httpx.Client, live: LiveServer) -> httpx.Response:
    assert live.keys
    return client.post(
        f"{live.url}/api/v1/ad/request",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": PROD_VENUE, "play_time": play_time()},
    )


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["code"] == "storage_unavailable"


def test_a_full_disk_is_answered_503_everywhere_then_served_again_with_nothing_acknowledged_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_filesystem(tmp_path / "data", 24) as data:
        live, _ = start_server(data, "sqlite")
        try:
            with httpx.Client(timeout=30) as client:
                acked = [ad_request(client, live).json()["data"]["ad_request_uuid"] for _ in range(5)]
                filler = fill(data)
                assert live.keys
                admin = {"Ssp-Key": live.keys.production_admin}
                pixels = iter(acked[:3])
                fired: list[str] = []

                def fill_then(send: Callable[[], httpx.Response]) -> httpx.Response:
                    """Until SQLite needs a page it cannot have, a write may still fit in what its files
                    hold: every answer is then a durable success, the disk is topped up, and it is sent again
                    until the 503 comes (never a 500)."""
                    for _ in range(200):
                        fill(data, filler)
                        response = send()
                        if response.status_code < 300:
                            continue
                        assert_unavailable(response)
                        return response
                    raise AssertionError("no 503 on a full disk")

                def ask() -> httpx.Response:
                    response = ad_request(client, live)
                    if response.status_code == 200:
                        acked.append(response.json()["data"]["ad_request_uuid"])
                    return response

                def fire() -> httpx.Response:
                    uuid = next(pixels)
                    response = client.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                    if response.status_code == 200:
                        fired.append(uuid)
                    return response

                made = iter(range(1000))

                def add_venue() -> httpx.Response:
                    venue = {"venue_id": f"full-{next(made)}", "name": "Full", "timezone": "UTC"}
                    return client.post(f"{live.url}/api/v1/venues", headers=admin, json=venue)

                fill_then(ask)
                fill_then(add_venue)
                with contextlib.suppress(StopIteration):
                    fill_then(fire)

                filler.unlink()  # the cause goes: adslot serves again by itself
                deadline = time.monotonic() + 30
                while (response := ad_request(client, live)).status_code != 200:
                    assert_unavailable(response)
                    assert time.monotonic() < deadline, "adslot did not recover"
                    time.sleep(0.2)
                acked.append(response.json()["data"]["ad_request_uuid"])
                assert add_venue().status_code == 201
                for uuid in acked[:3]:  # each pixel fired once: counted then, or now
                    again = client.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                    assert again.json()["data"]["result"] == ("duplicate" if uuid in fired else "counted")
                for uuid in acked:  # nothing acknowledged was lost
                    record = client.get(
                        f"{live.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": live.keys.production}
                    )
                    assert record.status_code == 200, (uuid, record.text)
        finally:
            live.stop()
    assert "Traceback" not in caplog.text
