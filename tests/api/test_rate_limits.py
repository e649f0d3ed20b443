"""Rate limits on live servers: a key over its ad request limit is answered 429 `rate_limited` with
Retry-After on both lanes while other keys are served; a flood of pixels on one uuid is refused the same way;
two servers on one PostgreSQL share a key's limit through Redis."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adslot.settings import load_settings
from tests.conftest import PROD_VENUE, LiveServer, drop_schemas, free_port, play_time, start_server

REDIS_URL = os.environ.get("ADSLOT_TEST_REDIS_URL")
LANES = {"hot lane": "true", "framework": "false"}


def require_redis() -> str:
    if not REDIS_URL:
        if os.environ.get("CI"):
            pytest.fail("CI must run Redis tests: set ADSLOT_TEST_REDIS_URL")
        pytest.skip("Redis tests need ADSLOT_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    return REDIS_URL


def ask(http: httpx.Client, url: str, key: str) -> httpx.Response:
    return http.post(
        f"{url}/api/v1/ad/request",
        headers={"Ssp-Key": key},
        json={"venue_id": PROD_VENUE, "play_time": play_time()},
    )


def assert_rate_limited(response: httpx.Response, field: str) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["cache-control"] == "no-store"
    assert int(response.headers["retry-after"]) >= 1
    body = response.json()
    assert body["status"] == 429
    assert body["error"]["code"] == "rate_limited"
    assert body["error"]["field"] == field
    assert body["error"]["message"]


@pytest.fixture(scope="module", params=list(LANES))
def limited(
    request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server whose keys may make 3 ad requests at once and then one every 2 s, and 5 fires a second per
    uuid, on the hot lane or through the framework."""
    server, schemas = start_server(
        tmp_path_factory.mktemp("limits"),
        backend,
        ADSLOT_FAST_LANE=LANES[request.param],
        ADSLOT_RATE_LIMIT_AD_REQUESTS="0.5",
        ADSLOT_RATE_LIMIT_BURST="3",
        ADSLOT_RATE_LIMIT_PIXELS="5",
    )
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


def test_a_key_over_its_limit_gets_429_rate_limited_while_another_key_is_served(
    limited: LiveServer, http: httpx.Client
) -> None:
    assert limited.keys
    answers = [ask(http, limited.url, limited.keys.production) for _ in range(4)]
    assert [a.status_code for a in answers[:3]] == [200, 200, 200]
    assert_rate_limited(answers[3], "Ssp-Key")
    assert answers[3].headers["retry-after"] == "2"  # one token every 2 s
    # Other keys are served meanwhile, each from its own bucket.
    assert ask(http, limited.url, limited.keys.other_account).status_code == 200
    assert ask(http, limited.url, limited.keys.production_admin).status_code == 200
    assert ask(http, limited.url, limited.keys.production).status_code == 429
    time.sleep(2.1)
    assert ask(http, limited.url, limited.keys.production).status_code == 200


def test_a_bad_key_is_still_401_not_429(limited: LiveServer, http: httpx.Client) -> None:
    response = ask(http, limited.url, "ssp_live_unknown")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_a_flood_of_fires_on_one_uuid_gets_429_beyond_the_limit_and_counts_once(
    limited: LiveServer, http: httpx.Client
) -> None:
    assert limited.keys
    created = ask(http, limited.url, limited.keys.other_account)
    assert created.status_code == 200, created.text
    uuid_text = created.json()["data"]["ad_request_uuid"]
    pixel = f"{limited.url}/api/v1/ad/callback/?ad_request_uuid={uuid_text}"
    second = int(time.time())
    answers = [http.get(pixel) for _ in range(8)]
    if int(time.time()) != second:  # the window turned mid-way: take one second of its own
        time.sleep(1 - time.time() % 1)
        answers = [http.get(pixel) for _ in range(8)]
    assert [a.status_code for a in answers].count(200) == 5, [a.status_code for a in answers]
    refused = [a for a in answers if a.status_code == 429]
    assert len(refused) == 3
    for answer in refused:
        assert_rate_limited(answer, "ad_request_uuid")
        assert answer.headers["retry-after"] == "1"
    record = http.get(
        f"{limited.url}/api/v1/ad/request/{uuid_text}", headers={"Ssp-Key": limited.keys.other_account}
    ).json()["data"]
    assert record["state"] == "played"
    assert record["events"]["impression"] is not None
    assert record["duplicate_count"] >= 4  # this test's own repeats that were let through


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two adslot servers on one PostgreSQL database, sharing one Redis (with a key prefix of their own)."""
    redis_url = require_redis()
    prefix = f"test{secrets.token_hex(4)}"
    limits = {
        "ADSLOT_RATE_LIMIT_AD_REQUESTS": "0.2",
        "ADSLOT_RATE_LIMIT_BURST": "4",
        "ADSLOT_REDIS_URL": redis_url,
        "ADSLOT_REDIS_KEY_PREFIX": prefix,
    }
    first, schemas = start_server(tmp_path / "a", "postgres", **limits)
    production = first.settings.environment("production")
    sandbox = first.settings.environment("sandbox")
    port = free_port()
    environ: dict[str, Any] = {
        "ADSLOT_DATA_DIR": str(tmp_path / "b"),
        "ADSLOT_PORT": str(port),
        "ADSLOT_CATALOG_POLL_MS": "100",
        "ADSLOT_DATABASE_URL": production.database_url,
        "ADSLOT_DATABASE_SCHEMA": production.database_schema,
        "ADSLOT_SANDBOX_DATABASE_SCHEMA": sandbox.database_schema,
        **limits,
    }
    second = LiveServer(load_settings(environ), seed=99, keys=first.keys).start()
    yield first, second
    second.stop()
    first.stop()
    drop_schemas(schemas)


def test_two_nodes_on_one_postgresql_share_a_keys_limit_through_redis(
    two_nodes: tuple[LiveServer, LiveServer], http: httpx.Client
) -> None:
    first, second = two_nodes
    assert first.keys
    key = first.keys.production
    # The burst of 4 is the key's, not each node's: spent half on each node, then both refuse.
    answers = [ask(http, node.url, key) for node in (first, second, first, second)]
    assert [a.status_code for a in answers] == [200] * 4
    for node in (first, second):
        assert_rate_limited(ask(http, node.url, key), "Ssp-Key")
    # Another key is served on both meanwhile.
    assert ask(http, first.url, first.keys.other_account).status_code == 200
    assert ask(http, second.url, first.keys.other_account).status_code == 200
