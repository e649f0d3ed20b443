"""Helpers shared by the contract tests: requests, error envelopes, VAST parsing and direct database reads."""

from __future__ import annotations

import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

import httpx
import sqlalchemy as sa

from adslot.auth.keys import hash_key
from adslot.storage.tables import accounts, ad_requests, api_keys
from tests.conftest import PROD_VENUE, LiveServer, eventually, play_time

AD_REQUEST = "/api/v1/ad/request"
PATHS = ("/api/v1/ad/request", "/ad/request")
QUARTILES = ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")
ENVIRONMENTS = ("production", "sandbox")
EMPTY_VAST = '<?xml version="1.0" encoding="UTF-8"?>\n<VAST version="2.0"/>'


def base_of(live: LiveServer, env: str) -> str:
    return live.url if env == "production" else live.sandbox_url


def key_of(live: LiveServer, env: str) -> str:
    """The ordinary ad-request key of each environment (the shared testing key in the sandbox)."""
    assert live.keys
    return live.keys.production if env == "production" else live.keys.sandbox


def venue_of(env: str) -> str:
    """A venue that fills: the seeded production venue; in the sandbox any id fills."""
    return PROD_VENUE if env == "production" else "sandbox-venue-42"


def request_ad(
    http: httpx.Client,
    live: LiveServer,
    *,
    env: str = "production",
    body: dict[str, Any] | None = None,
    fmt: str | None = None,
    path: str = AD_REQUEST,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    if body is None:
        body = {"venue_id": venue_of(env), "play_time": play_time()}
    params = {"format": fmt} if fmt is not None else None
    return http.post(
        f"{base_of(live, env)}{path}",
        params=params,
        headers=headers if headers is not None else {"Ssp-Key": key_of(live, env)},
        json=body,
    )


def issue(http: httpx.Client, live: LiveServer, env: str = "production", **fields: Any) -> dict[str, Any]:
    """Make an ad request that fills and return its `data`."""
    body = {"venue_id": venue_of(env), "play_time": play_time(), **fields}
    response = request_ad(http, live, env=env, body=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def assert_error(response: httpx.Response, status: int, code: str, field: str | None) -> dict[str, Any]:
    """The error envelope of architecture.md, exactly: {"status", "error": {"code", "message", "field"}}."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"status", "error"}, body
    assert body["status"] == status, body
    error = body["error"]
    assert set(error) == {"code", "message", "field"}, body
    assert (error["code"], error["field"]) == (code, field), body
    assert isinstance(error["message"], str) and error["message"].strip(), body
    return dict(error)


def assert_empty_vast_error(response: httpx.Response, status: int, code: str) -> None:
    """VAST URL errors stay parseable by players: an empty VAST 2.0 document plus x-adslot-error."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/xml"), response.headers
    assert response.headers["x-adslot-error"] == code
    root = ET.fromstring(response.text)
    assert root.tag == "VAST" and root.attrib == {"version": "2.0"} and len(root) == 0
    assert response.text == EMPTY_VAST


def record_of(
    http: httpx.Client, live: LiveServer, uuid_text: str, env: str = "production"
) -> dict[str, Any]:
    response = http.get(
        f"{base_of(live, env)}/api/v1/ad/request/{uuid_text}", headers={"Ssp-Key": key_of(live, env)}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == 200
    data: dict[str, Any] = body["data"]
    return data


def fire(http: httpx.Client, base: str, uuid_text: str, event: str, method: str = "GET") -> httpx.Response:
    if event == "impression":
        return http.request(method, f"{base}/api/v1/ad/callback/", params={"ad_request_uuid": uuid_text})
    return http.request(
        method, f"{base}/api/v1/ad/tracking/video/", params={"ad_request_uuid": uuid_text, "event": event}
    )


def wait_until(check: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    if not eventually(check, timeout):
        raise AssertionError(f"timed out waiting for {what}")


# --- direct database access (the environment's own database, as the server sees it) -------------------------


def count_rows(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def stored_row(engine: sa.Engine, ad_request_id: uuid.UUID) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(sa.select(ad_requests).where(ad_requests.c.id == ad_request_id)).mappings().first()
        return {str(k): v for k, v in row.items()} if row else None


def stored_fires(conn: sa.Connection, *where: sa.ColumnElement[bool]) -> int:
    """How many (event, layer) fires the matching ad requests hold: the set bits of their `fired` columns."""
    bits = conn.execute(sa.select(ad_requests.c.fired).where(ad_requests.c.fired != 0, *where)).scalars()
    return sum(bin(fired).count("1") for fired in bits)


def fires_of(engine: sa.Engine, ad_request_id: uuid.UUID) -> int:
    with engine.connect() as conn:
        return stored_fires(conn, ad_requests.c.id == ad_request_id)


def account_id_of_key(engine: sa.Engine, key: str) -> int:
    """The account that owns a key, looked up by its hash."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(accounts.c.id)
                .join(api_keys, api_keys.c.account_id == accounts.c.id)
                .where(api_keys.c.key_hash == hash_key(key))
            ).scalar_one()
        )


def insert_expired(
    engine: sa.Engine, live: LiveServer, *, account_id: int, expired_seconds_ago: int
) -> uuid.UUID:
    """An ad request whose play window closed `expired_seconds_ago` seconds ago, written into the ledger.

    The play window is at least 60 s, so a test cannot wait for a real one to lapse.
    """
    now = int(time.time())
    ad_request_id = uuid.uuid4()
    expires_at = now - expired_seconds_ago
    when = expires_at - live.settings.play_window_seconds
    with engine.begin() as conn:
        conn.execute(
            sa.insert(ad_requests).values(
                id=ad_request_id,
                account_id=account_id,
                venue_id=PROD_VENUE,
                screen_id="late-screen",
                play_time=when,
                created_at=when - 60,
                expires_at=expires_at,
                campaign_id=live.extra["campaign_id"],
                creative_id=live.extra["creative_id"],
            )
        )
    return ad_request_id
