"""Three adslot nodes on one PostgreSQL: separate `adslot serve` processes, each on its own port and data dir,
sharing one database (and Redis when the tests have one).

Any node answers any ad request's inline VAST and pixels, a capped campaign never over-delivers whatever node
issues its ad requests, catalog and key changes reach every node within a second, and a node SIGKILLed under
load loses nothing it acknowledged. The nodes start at once on fresh schemas, as a fleet does: they migrate
the database together.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import drop_schemas, free_port, require_postgres
from tests.ledger.test_restart_durability import check_consistent
from tests.served import Acked, Server, load_until, records_via_api

pytestmark = pytest.mark.postgres

LOBBY = "lobby"
"""Where the uncapped campaign plays: spread, pixels on other nodes, the kill."""
CAPPED = "capped-venue"
CAP = 50
"""Lifetime plays of the capped campaign: each ad request reserves one play when it is issued."""
PAUSED = "pause-me"
PROPAGATION_LIMIT_S = 1.0


@dataclass
class Fleet:
    nodes: list[Server]
    environ: dict[str, str]
    """Node 1's environment, for the CLI (keys are created with it, as an operator on node 1 would)."""
    key: str
    admin: str
    campaigns: dict[str, int]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "adslot.cli", *args],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done


def node_environ(base: dict[str, str], data_dir: Path, port: int) -> dict[str, str]:
    data_dir.mkdir(parents=True)
    return base | {"ADSLOT_DATA_DIR": str(data_dir), "ADSLOT_PORT": str(port)}


def shared_environ(schemas: list[str]) -> dict[str, str]:
    """What every node shares: the database and its schemas, Redis when there is one; nothing inherited."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ADSLOT_")}
    environ |= {
        "ADSLOT_HOST": "127.0.0.1",
        "ADSLOT_DATABASE_URL": require_postgres(),
        "ADSLOT_DATABASE_SCHEMA": schemas[0],
        "ADSLOT_SANDBOX_DATABASE_SCHEMA": schemas[1],
    }
    redis = os.environ.get("ADSLOT_TEST_REDIS_URL")
    if redis:
        environ["ADSLOT_REDIS_URL"] = redis
    return environ


def start_all(nodes: list[Server]) -> None:
    """Start the nodes at once (on fresh schemas they migrate the database together) and wait for each."""
    with ThreadPoolExecutor(len(nodes)) as pool:
        for started in [pool.submit(node.start) for node in nodes]:
            started.result()


def created(response: httpx.Response) -> dict[str, Any]:
    """The management API's answer to a write: the record it stored, as it stored it."""
    assert response.status_code in (200, 201), response.text
    data: dict[str, Any] = response.json()
    return data


def seed(url: str, admin: str) -> dict[str, int]:
    """Through node 1's management API: three venues, an advertiser, and a campaign with a creative in each
    venue (the one in CAPPED capped at CAP lifetime plays)."""
    now = int(time.time())
    headers = {"Ssp-Key": admin}
    campaigns = {}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for venue in (LOBBY, CAPPED, PAUSED):
            created(client.post("/api/v1/venues", json={"venue_id": venue, "name": venue}))
        advertiser = created(client.post("/api/v1/advertisers", json={"name": "Fleet Inc"}))
        for venue in (LOBBY, CAPPED, PAUSED):
            caps = [{"period": "lifetime", "metric": "plays", "limit": CAP}] if venue == CAPPED else []
            campaign = created(
                client.post(
                    "/api/v1/campaigns",
                    json={
                        "advertiser_id": advertiser["id"],
                        "name": f"in {venue}",
                        "start_at": now - 3600,
                        "end_at": now + 86400,
                        "venue_ids": [venue],
                        "caps": caps,
                    },
                )
            )
            creative = {
                "name": "spot",
                "media_url": "https://media.example.test/spot.mp4",
                "mime_type": "video/mp4",
                "width": 1920,
                "height": 1080,
                "duration_seconds": 1,  # the test fires its quartiles at once: a real 1 s play
            }
            created(client.post(f"/api/v1/campaigns/{campaign['id']}/creatives", json=creative))
            campaigns[venue] = campaign["id"]
    return campaigns


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tag = secrets.token_hex(4)
    schemas = [f"nodes{tag}_production", f"nodes{tag}_sandbox"]
    base = shared_environ(schemas)
    root = tmp_path_factory.mktemp("nodes")
    ports = [free_port() for _ in range(3)]
    nodes = [Server(node_environ(base, root / f"node{i}", port), port) for i, port in enumerate(ports, 1)]
    try:
        start_all(nodes)
        first = Fleet(nodes, nodes[0].environ, "", "", {})
        first.admin = first.cli("keys", "create", "--account", "ops", "--scope", "admin").stdout.strip()
        first.key = first.cli("keys", "create", "--account", "player").stdout.strip()
        first.campaigns = seed(nodes[0].url, first.admin)
        # every node has the seeded catalog before the tests start
        until_all(
            nodes, lambda n: ad_request(n.url, first.key, LOBBY).status_code == 200, time.monotonic(), 30
        )
        yield first
    finally:
        for node in nodes:
            if node.process is not None and node.process.poll() is None:
                node.kill()
        drop_schemas(schemas)


def ad_request(url: str, key: str, venue: str, client: httpx.Client | None = None) -> httpx.Response:
    body = {"venue_id": venue, "play_time": int(time.time()) + 30}
    post = client.post if client else httpx.post
    return post(f"{url}/api/v1/ad/request?format=json", json=body, headers={"Ssp-Key": key}, timeout=30)


def pixel_paths(vast: str) -> list[str]:
    """The wrapper's impression and tracking URLs, as paths: the player's fires, sent to any node."""
    urls = re.findall(r"<!\[CDATA\[(http[^\]]+)\]\]>", vast)
    paths = [re.sub(r"^https?://[^/]+", "", u).replace("&amp;", "&") for u in urls if "/ad/vast/" not in u]
    assert len(paths) == 6, vast
    return paths


def test_ad_requests_spread_over_three_nodes_and_any_node_answers_their_vast_and_pixels(fleet: Fleet) -> None:
    """Each node issues ad requests; the next node serves their inline VAST and counts their pixels, the
    third reads the record. The issuing node, which remembers its row as unfired, and the third node both
    answer a repeat impression as a duplicate: counted once in the shared database."""
    nodes = fleet.nodes
    issued: list[tuple[int, str, str]] = []
    for i in range(30):
        origin = nodes[i % 3]
        answer = ad_request(origin.url, fleet.key, LOBBY)
        assert answer.status_code == 200, answer.text
        data = answer.json()["data"]
        assert f"{origin.url}/api/v1/ad/vast/" in data["vast_tag"], "the node that issued it made its VAST"
        issued.append((i % 3, data["ad_request_uuid"], data["vast_tag"]))
    assert {n for n, _, _ in issued} == {0, 1, 2}

    def play(item: tuple[int, str, str]) -> dict[str, Any]:
        n, uuid, wrapper = item
        issuer, other, third = nodes[n], nodes[(n + 1) % 3], nodes[(n + 2) % 3]
        with httpx.Client(timeout=30) as client:
            inline = client.get(f"{other.url}/api/v1/ad/vast/{uuid}")
            assert inline.status_code == 200 and "<InLine>" in inline.text, inline.text
            for path in pixel_paths(wrapper):
                fired = client.get(other.url + path)
                assert fired.status_code == 200 and fired.json()["data"]["result"] == "counted", fired.text
            for again in (issuer, third):
                repeat = client.get(f"{again.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                assert repeat.json()["data"]["result"] == "duplicate", (again.url, repeat.text)
            record = client.get(f"{third.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": fleet.key})
            assert record.status_code == 200, record.text
            data: dict[str, Any] = record.json()["data"]
            return data

    with ThreadPoolExecutor(6) as pool:
        records = list(pool.map(play, issued))
    for record in records:
        assert record["state"] == "played"
        assert all(at is not None for at in record["events"].values()), record["events"]
        assert record["duplicate_count"] == 2, record


def test_concurrent_ad_requests_on_three_nodes_never_pass_a_cap(fleet: Fleet) -> None:
    """300 ad requests at once, spread over the nodes, for a campaign capped at CAP plays: at most CAP are
    issued (each reserved its play when issued), the rest get no ad; once they are played the record and
    the delivery report count at most CAP, and no node issues one more."""
    nodes = fleet.nodes
    local = threading.local()
    clients: list[httpx.Client] = []

    def request(i: int) -> httpx.Response:
        if not hasattr(local, "client"):  # a client per thread: 30 requests in flight at once
            local.client = httpx.Client(timeout=60)
            clients.append(local.client)
        return ad_request(nodes[i % 3].url, fleet.key, CAPPED, local.client)

    with ThreadPoolExecutor(30) as pool:
        answers = list(pool.map(request, range(300)))
    for client in clients:
        client.close()
    statuses = sorted({a.status_code for a in answers})
    assert set(statuses) <= {200, 204}, [a.text for a in answers if a.status_code not in (200, 204)][:3]
    filled = [a.json()["data"]["ad_request_uuid"] for a in answers if a.status_code == 200]
    by_node = [sum(1 for i, a in enumerate(answers) if a.status_code == 200 and i % 3 == n) for n in range(3)]
    assert len(filled) <= CAP, f"{len(filled)} issued against a cap of {CAP} (by node: {by_node})"
    assert len(filled) == CAP, f"the cap left room: {len(filled)} issued of {CAP} (by node: {by_node})"
    assert all(by_node), f"every node issued some: {by_node}"

    def impression(item: tuple[int, str]) -> str:
        i, uuid = item
        fired = httpx.get(f"{nodes[(i + 1) % 3].url}/api/v1/ad/callback/?ad_request_uuid={uuid}", timeout=30)
        assert fired.status_code == 200, fired.text
        result: str = fired.json()["data"]["result"]
        return result

    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(impression, enumerate(filled)))
    assert results.count("counted") == len(filled)
    for node in nodes:
        assert ad_request(node.url, fleet.key, CAPPED).status_code == 204, "the cap is reached on every node"
    now = int(time.time())
    report = httpx.get(
        f"{nodes[2].url}/api/v1/reports/delivery",
        params={"from": now - 3600, "to": now + 3600, "campaign_id": fleet.campaigns[CAPPED]},
        headers={"Ssp-Key": fleet.admin},
        timeout=30,
    )
    assert report.status_code == 200, report.text
    totals = report.json()["data"]["totals"]
    assert totals["fills"] == totals["plays"] == CAP, totals


def until_all(
    nodes: list[Server], check: Callable[[Server], bool], since: float, limit: float = 10
) -> list[float]:
    """Seconds after `since` at which each node first passed `check` (polled in turn, about every 20 ms);
    fails if a node does not within `limit`."""
    seen: dict[int, float] = {}
    deadline = since + limit
    while len(seen) < len(nodes) and time.monotonic() < deadline:
        for i, node in enumerate(nodes):
            if i not in seen and check(node):
                seen[i] = time.monotonic() - since
        time.sleep(0.02)
    assert len(seen) == len(nodes), f"nodes {sorted(set(range(len(nodes))) - set(seen))} never saw the change"
    return [seen[i] for i in range(len(nodes))]


def test_a_catalog_change_on_node_one_reaches_every_node_within_a_second(fleet: Fleet) -> None:
    nodes = fleet.nodes
    for node in nodes:
        assert ad_request(node.url, fleet.key, PAUSED).status_code == 200
        assert ad_request(node.url, fleet.key, "added-later").status_code == 422, "unregistered"
    with httpx.Client(base_url=nodes[0].url, headers={"Ssp-Key": fleet.admin}, timeout=30) as client:
        patched = client.patch(f"/api/v1/campaigns/{fleet.campaigns[PAUSED]}", json={"status": "paused"})
        paused_at = time.monotonic()
        assert patched.status_code == 200, patched.text
        pause = until_all(nodes, lambda n: ad_request(n.url, fleet.key, PAUSED).status_code == 204, paused_at)
        created(client.post("/api/v1/venues", json={"venue_id": "added-later", "name": "New"}))
        added_at = time.monotonic()
        added = until_all(
            nodes, lambda n: ad_request(n.url, fleet.key, "added-later").status_code == 204, added_at
        )
    print(f"seen on nodes 1, 2, 3 after (s): pause {pause}, new venue {added}")  # shown with -s
    assert max(pause) < PROPAGATION_LIMIT_S, f"pause seen after {pause} s on nodes 1, 2, 3"
    assert max(added) < PROPAGATION_LIMIT_S, f"new venue seen after {added} s on nodes 1, 2, 3"


def test_a_new_key_works_at_once_and_a_revoked_key_is_refused_on_every_node_within_a_second(
    fleet: Fleet,
) -> None:
    made = fleet.cli("keys", "create", "--account", "newcomer")
    key = made.stdout.strip()
    key_id = re.search(r"key id (\d+)", made.stderr)
    assert key_id, made.stderr
    for node in reversed(fleet.nodes):  # node 3 first: its catalog has not reloaded yet
        answer = ad_request(node.url, key, LOBBY)
        assert answer.status_code == 200, f"{node.url}: {answer.text}"
    fleet.cli("keys", "revoke", key_id.group(1))
    revoked_at = time.monotonic()
    refused = until_all(fleet.nodes, lambda n: ad_request(n.url, key, LOBBY).status_code == 401, revoked_at)
    print(f"revocation seen on nodes 1, 2, 3 after (s): {refused}")  # shown with -s
    assert max(refused) < PROPAGATION_LIMIT_S, f"revocation seen after {refused} s on nodes 1, 2, 3"
    for node in fleet.nodes:
        for _ in range(3):
            assert ad_request(node.url, key, LOBBY).status_code == 401, "refused for good"


def test_a_node_killed_under_load_loses_nothing_it_acknowledged(fleet: Fleet) -> None:
    """Eight players load node 3 with ad requests and impressions; it is SIGKILLed mid-load. Every ad request
    and impression it acknowledged is found through node 1's record endpoint, and counted once; nodes 1 and
    2 serve on, and node 3 started again serves the same records."""
    victim, survivor = fleet.nodes[2], fleet.nodes[0]
    acked = Acked()

    def kill() -> None:
        time.sleep(0.5)
        victim.kill()

    load_until(victim, fleet.key, acked, kill, min_new=20)
    assert len(acked.requests) >= 20 and acked.impressions, "the load got going before the kill"
    check_consistent(records_via_api(survivor, fleet.key, acked.requests), acked)
    for node in fleet.nodes[:2]:
        assert ad_request(node.url, fleet.key, LOBBY).status_code == 200, "the others serve on"
    victim.start()
    again = records_via_api(victim, fleet.key, acked.requests)
    check_consistent(again, acked)
