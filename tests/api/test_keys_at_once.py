"""A key created or revoked while adslot serves takes effect at once on every worker.

A key created since a worker loaded its catalog is looked up in the database before it is refused; a revoked
key is refused once the worker's next catalog check swaps in the keys, within a second with the default poll.
Unknown keys are looked up in batches, spaced, and remembered as absent for a moment, so a flood of them costs
the database a few queries, not one each.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from adslot.auth.keys import LIVE_PREFIX
from adslot.auth.lookup import SPACING_SECONDS
from adslot.settings import Settings
from tests.conftest import BACKENDS, PROD_VENUE, LiveServer, free_port, play_time
from tests.served import Server, cli, served_setup

AD_REQUEST = "/api/v1/ad/request"
REVOCATION_DEADLINE_SECONDS = 1.0
PLAYERS = 32
SOME_UUID = "0193a1b2-0000-7000-8000-000000000000"


@pytest.fixture(params=BACKENDS)
def two_workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, Settings]]:
    """A real `adslot serve` set up through the CLI, not started yet (its environ may be changed first)."""
    for server, _, settings in served_setup(str(request.param), tmp_path):
        yield server, settings


@dataclass(frozen=True)
class Answer:
    pid: int
    status: int
    code: str | None
    sent: float
    answered: float


def ask(url: str, key: str, path: str = AD_REQUEST) -> Answer:
    """On a new connection (the kernel picks the worker): which worker it is, then its answer to `key`."""
    with httpx.Client(base_url=url, timeout=10, verify=False) as client:
        pid = int(client.get("/healthz").json()["worker_pid"])
        sent = time.monotonic()
        if path == AD_REQUEST:
            response = client.post(
                path, headers={"Ssp-Key": key}, json={"venue_id": "lobby", "play_time": play_time()}
            )
        else:
            response = client.get(path, headers={"Ssp-Key": key})
        answered = time.monotonic()
    code = response.json()["error"]["code"] if response.status_code >= 400 else None
    return Answer(pid, response.status_code, code, sent, answered)


def ask_until_both_workers_answered(url: str, key: str, path: str = AD_REQUEST) -> list[Answer]:
    """At least 20 answers, over new connections, until both workers have answered (at most 80)."""
    answers: list[Answer] = []
    while len(answers) < 20 or (len({a.pid for a in answers}) < 2 and len(answers) < 80):
        answers.append(ask(url, key, path))
    return answers


def test_keys_created_with_the_cli_work_on_every_worker_from_their_first_request(
    two_workers: tuple[Server, Settings],
) -> None:
    server, _ = two_workers
    # No catalog reload while the test runs: only the lookup can know the keys.
    server.environ["ADSLOT_CATALOG_POLL_MS"] = "600000"
    server.start(workers=2)
    key = cli(server.environ, "keys", "create", "--account", "newcomer").strip()
    answers = ask_until_both_workers_answered(server.url, key)
    assert [(a.status, a.code) for a in answers] == [(200, None)] * len(answers)
    assert len({a.pid for a in answers}) == 2, "both workers answered the new key"

    admin = cli(server.environ, "keys", "create", "--account", "ops", "--scope", "admin").strip()
    refused = ask(server.url, admin)
    assert (refused.status, refused.code) == (403, "insufficient_scope"), "a key found keeps its scopes"
    answers = ask_until_both_workers_answered(server.url, admin, "/api/v1/venues")
    assert [(a.status, a.code) for a in answers] == [(200, None)] * len(answers)
    assert len({a.pid for a in answers}) == 2


def test_a_key_revoked_with_the_cli_is_refused_by_every_worker_within_a_second(
    two_workers: tuple[Server, Settings],
) -> None:
    server, _ = two_workers
    server.environ.pop("ADSLOT_CATALOG_POLL_MS", None)  # the default poll, as operators run it
    server.start(workers=2)
    key = cli(server.environ, "keys", "create", "--account", "leaver", "--label", "to revoke").strip()
    (key_id,) = [
        k["id"] for k in json.loads(cli(server.environ, "keys", "list")) if k["label"] == "to revoke"
    ]
    before = ask_until_both_workers_answered(server.url, key)
    assert {a.status for a in before} == {200} and len({a.pid for a in before}) == 2

    cli(server.environ, "keys", "revoke", str(key_id))
    revoked = time.monotonic()
    until = revoked + REVOCATION_DEADLINE_SECONDS + 0.3
    samples: list[Answer] = []
    lock = threading.Lock()

    def player() -> None:
        while time.monotonic() < until:
            answer = ask(server.url, key)
            with lock:
                samples.append(answer)

    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(player) for _ in range(4)]:
            done.result()

    assert {(a.status, a.code) for a in samples} <= {(200, None), (401, "invalid_api_key")}
    refused_by: dict[int, float] = {}
    for pid in {a.pid for a in before}:
        mine = sorted((a for a in samples if a.pid == pid), key=lambda a: a.sent)
        late = [a.status for a in mine if a.sent - revoked >= REVOCATION_DEADLINE_SECONDS]
        assert late and set(late) == {401}, f"worker {pid} after the deadline: {late}"
        accepted = [i for i, a in enumerate(mine) if a.status == 200]
        first_refusal = mine[accepted[-1] + 1] if accepted else mine[0]
        refused_by[pid] = first_refusal.answered - revoked
    print(f"revoked key refused by every worker after {max(refused_by.values()) * 1000:.0f} ms: {refused_by}")
    assert max(refused_by.values()) < REVOCATION_DEADLINE_SECONDS, refused_by


def test_a_key_in_the_snapshot_is_answered_without_a_lookup(live: LiveServer, http: httpx.Client) -> None:
    assert live.app and live.keys
    lookups = live.app.environments["production"].key_lookup
    before = lookups.queries
    for _ in range(20):
        response = http.post(
            f"{live.url}{AD_REQUEST}",
            headers={"Ssp-Key": live.keys.production},
            json={"venue_id": PROD_VENUE, "play_time": play_time()},
        )
        assert response.status_code == 200, response.text
    assert lookups.queries == before


def test_a_flood_of_garbage_keys_is_refused_401_at_a_small_fraction_of_a_lookup_query_each(
    live: LiveServer,
) -> None:
    assert live.app
    lookups = live.app.environments["production"].key_lookup
    distinct = [LIVE_PREFIX + secrets.token_hex(16) for _ in range(300)]
    flood = distinct + [distinct[0]] * 100 + ["not-a-key"] * 100
    body = {"venue_id": PROD_VENUE, "play_time": play_time()}

    def player(keys: list[str]) -> list[tuple[int, str]]:
        with httpx.Client(base_url=live.url, timeout=30, verify=False) as client:
            answers = [client.post(AD_REQUEST, headers={"Ssp-Key": key}, json=body) for key in keys]
        return [(r.status_code, r.json()["error"]["code"]) for r in answers]

    before = lookups.queries
    began = time.monotonic()
    with ThreadPoolExecutor(PLAYERS) as pool:
        answers = [
            a for share in pool.map(player, [flood[i::PLAYERS] for i in range(PLAYERS)]) for a in share
        ]
    elapsed = time.monotonic() - began
    queries = lookups.queries - before
    print(
        f"{len(flood)} garbage keys ({len(set(flood))} distinct) in {elapsed:.2f} s: {queries} lookup queries"
    )
    assert answers == [(401, "invalid_api_key")] * len(flood)
    assert 1 <= queries <= 1 + elapsed / SPACING_SECONDS, "one lookup query per spacing at most"
    assert queries <= len(set(flood)) // 5, "concurrent misses share a query"


def test_a_lookup_the_storage_cannot_serve_is_answered_503_storage_unavailable_on_every_lane(
    live: LiveServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert live.app and live.keys
    env = live.app.environments["production"]
    unreachable = sa.create_engine(f"postgresql+psycopg://adslot@127.0.0.1:{free_port()}/none")
    monkeypatch.setattr(env, "engine", unreachable)  # what the lookup (and the catalog check) connect with
    unknown = {"Ssp-Key": LIVE_PREFIX + secrets.token_hex(16)}
    answers = {
        "ad request (hot lane)": http.post(
            f"{live.url}{AD_REQUEST}",
            headers=unknown,
            json={"venue_id": PROD_VENUE, "play_time": play_time()},
        ),
        "record": http.get(f"{live.url}{AD_REQUEST}/{SOME_UUID}", headers=unknown),
        "management": http.get(f"{live.url}/api/v1/venues", headers=unknown),
    }
    for lane, response in answers.items():
        assert response.status_code == 503, (lane, response.text)
        assert response.json()["error"]["code"] == "storage_unavailable", lane
        assert response.headers["retry-after"] == "1", lane
    known = http.post(
        f"{live.url}{AD_REQUEST}",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": PROD_VENUE, "play_time": play_time()},
    )
    assert known.status_code == 200, "a key in the snapshot needs no database to be recognised"
    unreachable.dispose()
