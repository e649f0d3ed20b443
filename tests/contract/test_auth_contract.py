"""The spec's authentication (section 5): the Ssp-Key header, per-environment keys, revocation, scopes."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from adslot.auth.keys import LIVE_PREFIX
from adslot.auth.repository import create_key, revoke_key
from adslot.catalog import bump_version
from adslot.environment import prepare_database
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, api_keys
from tests.conftest import LiveServer, free_port, make_settings, play_time
from tests.contract.support import (
    ENVIRONMENTS,
    PATHS,
    assert_error,
    base_of,
    count_rows,
    key_of,
    request_ad,
    venue_of,
    wait_until,
)


@pytest.mark.parametrize("header", ["Ssp-Key", "ssp-key", "SSP-KEY", "sSp-kEy"])
@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_key_header_name_is_matched_in_any_case(
    live: LiveServer, http: httpx.Client, header: str, env: str
) -> None:
    response = request_ad(http, live, env=env, headers={header: key_of(live, env)})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("path", PATHS)
def test_missing_key_is_401_missing_api_key_with_a_challenge(
    live: LiveServer, http: httpx.Client, env: str, path: str
) -> None:
    response = request_ad(http, live, env=env, path=path, headers={})
    assert_error(response, 401, "missing_api_key", "Ssp-Key")
    assert response.headers["www-authenticate"] == 'ApiKey header="Ssp-Key"'


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_unknown_key_is_401_invalid_api_key(live: LiveServer, http: httpx.Client, env: str) -> None:
    own_prefix = live.settings.environment(env).key_prefix
    for key in (own_prefix + "0" * 32, "not-a-key-at-all", key_of(live, env) + "x", key_of(live, env)[:-1]):
        response = request_ad(http, live, env=env, headers={"Ssp-Key": key})
        error = assert_error(response, 401, "invalid_api_key", "Ssp-Key")
        assert key not in error["message"], "the refused key is never echoed"


def test_revoked_key_is_refused_with_401_once_the_catalog_reloads(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine]
) -> None:
    engine = make_engine(live.settings.environment("production"))
    try:
        with engine.begin() as conn:
            key, info = create_key(
                conn, account="acct", prefix=LIVE_PREFIX, scopes="ad_request", label="to revoke"
            )
            bump_version(conn)
        wait_until(
            lambda: request_ad(http, live, headers={"Ssp-Key": key}).status_code == 200,
            what="the new key to work",
        )
        with engine.begin() as conn:
            assert revoke_key(conn, info.id)
            bump_version(conn)
        wait_until(
            lambda: request_ad(http, live, headers={"Ssp-Key": key}).status_code == 401, what="the revocation"
        )
    finally:
        engine.dispose()
    before = count_rows(dbs["production"], ad_requests)
    response = request_ad(http, live, headers={"Ssp-Key": key})
    assert_error(response, 401, "invalid_api_key", "Ssp-Key")
    assert count_rows(dbs["production"], ad_requests) == before
    assert request_ad(http, live).status_code == 200, "other keys of the account keep working"


def test_sandbox_key_on_production_is_401_wrong_environment_naming_the_sandbox_base_url(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    for key in (live.keys.sandbox, live.keys.sandbox_admin_only):
        response = request_ad(
            http,
            live,
            env="production",
            body={"venue_id": venue_of("production"), "play_time": play_time()},
            headers={"Ssp-Key": key},
        )
        error = assert_error(response, 401, "wrong_environment", "Ssp-Key")
        assert live.sandbox_url in error["message"]
        assert "sandbox" in error["message"]


def test_production_key_on_sandbox_is_401_wrong_environment_naming_the_production_base_url(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    for key in (live.keys.production, live.keys.production_admin, live.keys.other_account):
        response = request_ad(http, live, env="sandbox", headers={"Ssp-Key": key})
        error = assert_error(response, 401, "wrong_environment", "Ssp-Key")
        assert f"base URL {live.url}" in error["message"]
        assert live.sandbox_url not in error["message"]
        assert "production" in error["message"]


@pytest.mark.parametrize(
    ("env", "key_name"),
    [("production", "production_admin_only"), ("sandbox", "sandbox_admin_only")],
)
def test_key_without_the_ad_request_permission_is_403_insufficient_scope(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine], env: str, key_name: str
) -> None:
    assert live.keys
    before = count_rows(dbs[env], ad_requests)
    response = request_ad(http, live, env=env, headers={"Ssp-Key": getattr(live.keys, key_name)})
    error = assert_error(response, 403, "insufficient_scope", "Ssp-Key")
    assert "ad_request" in error["message"]
    assert "www-authenticate" not in response.headers
    assert count_rows(dbs[env], ad_requests) == before


def test_key_with_admin_and_ad_request_permissions_may_request_ads(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    response = request_ad(http, live, headers={"Ssp-Key": live.keys.production_admin})
    assert response.status_code == 200, response.text


def test_authentication_is_checked_before_the_body(live: LiveServer, http: httpx.Client) -> None:
    response = http.post(
        f"{live.url}/api/v1/ad/request?format=html",
        content=b"{not json",
        headers={"Content-Type": "text/plain"},
    )
    assert_error(response, 401, "missing_api_key", "Ssp-Key")


def test_record_lookup_and_pixels_follow_the_same_key_rules(live: LiveServer, http: httpx.Client) -> None:
    """The record lookup needs a key of the right environment; pixels and VAST need none (the uuid is the
    capability)."""
    assert live.keys
    data = request_ad(http, live).json()["data"]
    uuid_text = data["ad_request_uuid"]
    record_url = f"{base_of(live, 'production')}/api/v1/ad/request/{uuid_text}"
    assert_error(http.get(record_url), 401, "missing_api_key", "Ssp-Key")
    error = assert_error(
        http.get(record_url, headers={"Ssp-Key": live.keys.sandbox}), 401, "wrong_environment", "Ssp-Key"
    )
    assert live.sandbox_url in error["message"]
    assert_error(
        http.get(record_url, headers={"Ssp-Key": live.keys.production_admin_only}),
        403,
        "insufficient_scope",
        "Ssp-Key",
    )
    assert http.get(f"{live.url}/api/v1/ad/vast/{uuid_text}").status_code == 200
    assert (
        http.get(f"{live.url}/api/v1/ad/callback/", params={"ad_request_uuid": uuid_text}).status_code == 200
    )


def test_the_shared_sandbox_testing_key_is_refused_403_on_every_management_and_report_endpoint(
    live: LiveServer, http: httpx.Client
) -> None:
    """The shared key is published on the playground page: anyone could pause the demo campaign or read
    every sandbox account's play log with it, were it an admin key."""
    from tests.api.test_openapi_document import MANAGEMENT

    assert live.keys
    document = http.get(f"{live.sandbox_url}/openapi.json").json()
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert documented >= MANAGEMENT
    for method, template in sorted(MANAGEMENT):
        path = template.format(
            campaign_id=1, creative_id=1, venue_id="lobby", screen_id="s1", name="dsp-one", id=1, webhook_id=1
        )
        response = http.request(
            method.upper(),
            f"{live.sandbox_url}{path}",
            headers={"Ssp-Key": live.keys.sandbox, "Content-Type": "application/json"},
            content=b"{}",
        )
        assert_error(response, 403, "insufficient_scope", "Ssp-Key")
    # What it is for still works: an ad request and its own record.
    filled = request_ad(http, live, env="sandbox", body={"venue_id": "lobby", "play_time": play_time()})
    assert filled.status_code == 200


def test_a_testing_key_made_admin_before_is_narrowed_to_ad_requests_at_the_next_start(tmp_path: Path) -> None:
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    sandbox = settings.environment("sandbox")
    key = prepare_database(sandbox)
    assert key is not None
    engine = make_engine(sandbox)
    try:
        with engine.begin() as conn:
            conn.execute(sa.update(api_keys).values(scopes="ad_request,admin"))
        assert prepare_database(sandbox) == key
        with engine.connect() as conn:
            assert conn.execute(sa.select(api_keys.c.scopes)).scalars().all() == ["ad_request"]
    finally:
        engine.dispose()
