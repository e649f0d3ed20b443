"""The shared ad request limit on a real Redis: two limiters (two nodes) together stay within the bound, a key
under its limit never waits on Redis, and a Redis that goes away leaves each process its own limit."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from adslot.limits.shared import SharedBuckets, lease_size
from tests.conftest import free_port

REDIS_URL = os.environ.get("ADSLOT_TEST_REDIS_URL")


def require_redis() -> str:
    if not REDIS_URL:
        if os.environ.get("CI"):
            pytest.fail("CI must run Redis tests: set ADSLOT_TEST_REDIS_URL")
        pytest.skip("Redis tests need ADSLOT_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    return REDIS_URL


def namespace() -> str:
    return f"test{secrets.token_hex(4)}:rl:production"


async def admit(limiter: SharedBuckets, key: int) -> bool:
    limited = limiter.check(key)
    if limited < 0:
        limited = await limiter.wait(key)
    return limited == 0


async def hammer(limiters: list[SharedBuckets], key: int, seconds: float) -> tuple[int, float]:
    """Ask as fast as the loop allows, round robin over the limiters: (admitted, elapsed seconds)."""
    admitted = 0
    started = time.monotonic()
    deadline = started + seconds
    asked = 0
    while time.monotonic() < deadline and asked < 1_000_000:
        for limiter in limiters:
            admitted += await admit(limiter, key)
            asked += 1
        if asked % 16 == 0:
            await asyncio.sleep(0)  # let the draws ahead of need run, as a server's loop would
    return admitted, time.monotonic() - started


def test_two_nodes_sharing_a_key_never_admit_more_than_the_bound() -> None:
    url = require_redis()

    async def run() -> tuple[int, float, SharedBuckets]:
        space = namespace()
        nodes = [SharedBuckets(url, space, rate=200, burst=20) for _ in range(2)]
        for node in nodes:
            await node.start()
        try:
            admitted, elapsed = await hammer(nodes, key=1, seconds=1.0)
        finally:
            for node in nodes:
                await node.stop()
        return admitted, elapsed, nodes[0]

    admitted, elapsed, node = asyncio.run(run())
    bound = node.rate * elapsed + node.burst + 2 * node.lease
    assert node.lease == lease_size(200) == 10
    assert admitted <= bound, (admitted, bound)
    # Each node on its own would have admitted rate * t + burst: together, twice the bound's main term.
    assert admitted > 0.8 * node.rate * elapsed, "the shared bucket admits about its rate"


def test_other_keys_are_served_while_one_is_limited() -> None:
    url = require_redis()

    async def run() -> tuple[list[bool], list[bool]]:
        limiter = SharedBuckets(url, namespace(), rate=1, burst=2)
        await limiter.start()
        try:
            first = [await admit(limiter, 1) for _ in range(4)]
            other = [await admit(limiter, 2) for _ in range(2)]
        finally:
            await limiter.stop()
        return first, other

    first, other = asyncio.run(run())
    assert first == [True, True, False, False]
    assert other == [True, True]


def test_a_key_under_its_limit_is_admitted_from_its_lease_without_waiting() -> None:
    url = require_redis()

    async def run() -> list[int]:
        limiter = SharedBuckets(url, namespace(), rate=1000)
        await limiter.start()
        try:
            assert await limiter.wait(5) == 0  # the first request draws the first lease
            answers = []
            for _ in range(200):
                answers.append(limiter.check(5))
                await asyncio.sleep(0.001)  # 1,000 a second at most: the draws keep ahead
            return answers
        finally:
            await limiter.stop()

    answers = asyncio.run(run())
    assert answers.count(-1) <= 2, answers  # at most a draw that was still on its way
    assert set(answers) <= {0, -1}


def test_a_refused_key_gets_retry_after_and_its_repeats_stay_local() -> None:
    url = require_redis()

    async def run() -> tuple[list[int], int]:
        space = namespace()
        limiter = SharedBuckets(url, space, rate=0.5, burst=1)
        await limiter.start()
        try:
            answers = [await limiter.wait(9) for _ in range(3)]
            before = redis.Redis.from_url(url).hget(f"{space}:9", "at")
            answers += [await limiter.wait(9) for _ in range(20)]
            after = redis.Redis.from_url(url).hget(f"{space}:9", "at")
            return answers, int(before == after)
        finally:
            await limiter.stop()

    answers, untouched = asyncio.run(run())
    assert answers[0] == 0
    assert all(answer in (1, 2) for answer in answers[1:]), answers
    assert untouched, "a refused key is answered from what Redis said, without asking it again"


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A private redis-server on a free loopback port, to stop and start again."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs redis-server on PATH")
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        processes.append(
            subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
            )
        )
        client = redis.Redis(port=port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    start()
    yield f"redis://127.0.0.1:{port}/0", processes
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def test_redis_down_falls_back_to_a_per_process_limit_and_comes_back(
    own_redis: tuple[str, list[subprocess.Popen[bytes]]], caplog: pytest.LogCaptureFixture
) -> None:
    url, processes = own_redis
    port = int(url.rsplit(":", 1)[1].split("/")[0])

    async def run() -> tuple[list[int], list[int], bool]:
        limiter = SharedBuckets(url, namespace(), rate=1, burst=2, retry_seconds=0.2)
        await limiter.start()
        try:
            processes[0].terminate()
            processes[0].wait(timeout=10)
            down = [await limiter.wait(3) for _ in range(3)]  # the local bucket: 2 admitted, then refused
            binary = shutil.which("redis-server")
            assert binary is not None
            processes.append(
                subprocess.Popen(
                    [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                    stdout=subprocess.DEVNULL,
                )
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)
            back: list[int] = []
            for _ in range(50):  # the first ask after the retry time probes Redis in the background
                back.append(await limiter.wait(4))
                if not limiter._down:
                    break
                await asyncio.sleep(0.05)
            shared_again = not limiter._down
            return down, back, shared_again
        finally:
            await limiter.stop()

    with caplog.at_level(logging.WARNING, logger="adslot.limits.shared"):
        down, back, shared_again = asyncio.run(run())
    assert down == [0, 0, 1]
    assert back[0] == 0, "never refused because Redis is down"
    assert shared_again
    messages = [record.getMessage() for record in caplog.records]
    assert sum("cannot be reached" in message for message in messages) == 1, messages
    assert any("reachable again" in message for message in messages), messages
