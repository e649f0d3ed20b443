"""Advertiser users over HTTP, on SQLite and PostgreSQL: every console route, walked from the running
console's own route table (so a page added later is walked too), as advertiser A's user with a valid CSRF
token: what is not theirs answers 404 or is absent, and nothing changes."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.campaigns.repository import add_creative, create_advertiser, create_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version
from adslot.console import users
from adslot.console.scope import OPEN_TO_ADVERTISERS
from adslot.console.users import FREE_FAILURES
from adslot.environment import transact
from adslot.inventory.repository import add_screen, create_venue
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.storage.database import make_engine
from adslot.storage.tables import metadata
from tests.conftest import (
    PROD_VENUE,
    LiveServer,
    drop_schemas,
    eventually,
    free_port,
    make_keys,
    make_settings,
    seed_production,
)
from tests.console.conftest import PASSWORD, create_users, csrf_of, signed_in
from tests.reporting.support import insert, played

ADVERTISER_EMAIL = "proof@acme.example"
B_VENUE = "zenith-hall"
B_SCREEN = "hall-1"
B_CAMPAIGN = "Zenith winter"
A_PLAYS = 5
B_PLAYS = 3
PROGRAMMATIC_PLAYS = 2
MOVING_TABLES = frozenset(
    {
        "console_sessions",
        "console_sign_in_sources",
        "ad_requests",
        "delivery_counters",
        "key_stats",
        "request_stats",
        "ledger_answers",
    }
)
"""Written by sign-in and by the server's own background work, not by a console page."""


def seed_advertiser_b(live: LiveServer) -> dict[str, Any]:
    """Advertiser B (Zenith): a campaign on a venue and screen of its own, beside A's (Acme, seeded)."""
    engine = make_engine(live.settings.environment("production"))
    now = int(time.time())
    try:
        with engine.begin() as conn:
            create_venue(conn, VenueIn(venue_id=B_VENUE, name="Zenith hall", timezone="America/New_York"))
            add_screen(conn, B_VENUE, ScreenIn(screen_id=B_SCREEN, name="Hall one"))
            advertiser = create_advertiser(conn, AdvertiserIn(name="Zenith"))
            campaign = create_campaign(
                conn,
                CampaignIn(
                    advertiser_id=advertiser.id,
                    name=B_CAMPAIGN,
                    start_at=now - 3600,
                    end_at=now + 30 * 86400,
                    venue_ids=[B_VENUE],
                ),
            )
            creative = add_creative(
                conn,
                campaign.id,
                CreativeIn(
                    name="Zenith 15s",
                    media_url="https://cdn.example.test/zenith.mp4",
                    mime_type="video/mp4",
                    width=1920,
                    height=1080,
                    duration_seconds=15,
                ),
            )
            bump_version(conn)
    finally:
        engine.dispose()
    return {"advertiser_id": advertiser.id, "campaign_id": campaign.id, "creative_id": creative.id}


def create_advertiser_user(
    live: LiveServer, advertiser_ids: list[int], email: str = ADVERTISER_EMAIL
) -> None:
    engine = make_engine(live.settings.environment("production"))
    try:
        transact(
            engine,
            lambda c: users.create_user(c, email, "advertiser", PASSWORD, advertiser_ids),
            write=True,
        )
    finally:
        engine.dispose()


def advertiser_a_id(live: LiveServer) -> int:
    engine = make_engine(live.settings.environment("production"))
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT id FROM advertisers WHERE name = 'Acme'")).scalar_one()
            return int(found)
    finally:
        engine.dispose()


def start_advertisers_server(tmp: Any, backend: str) -> tuple[LiveServer, list[str], dict[str, Any]]:
    """adslot seeded with A's campaign (Acme on venue-1) and B's (Zenith on its own venue), users of every
    staff role, and A's advertiser user."""
    settings, schemas = make_settings(tmp, backend, free_port())
    keys = make_keys(settings)
    extra = seed_production(settings)
    server = LiveServer(settings, seed=1234, keys=keys, extra=extra).start()
    create_users(server)
    b = seed_advertiser_b(server)
    production = next(env for _, env in server.app.lanes() if env.name == "production")
    assert eventually(lambda: production.catalog is not None and B_VENUE in production.catalog.venues), (
        "the server's catalog took B's venue"  # before B's ad requests, which a stale one refuses
    )
    create_advertiser_user(server, [advertiser_a_id(server)])
    play(server, PROD_VENUE, None, A_PLAYS)
    play(server, B_VENUE, B_SCREEN, B_PLAYS)
    add_programmatic_plays(server, PROD_VENUE, PROGRAMMATIC_PLAYS)
    return server, schemas, {"a_campaign": extra["campaign_id"], **{f"b_{k}": v for k, v in b.items()}}


def add_programmatic_plays(live: LiveServer, venue_id: str, count: int) -> None:
    """Plays a demand partner won at A's venue (no campaign): the buyer's, never in A's figures."""
    engine = make_engine(live.settings.environment("production"))
    now = int(time.time())
    try:
        rows = [
            played(now + 120 + n, campaign_id=None, creative_id=None, venue_id=venue_id) for n in range(count)
        ]
        insert(engine, rows)
    finally:
        engine.dispose()


def play(live: LiveServer, venue_id: str, screen_id: str | None, count: int) -> None:
    """Ad requests through the public API, each filled and its impression fired; the first also completed."""
    assert live.keys is not None
    with httpx.Client(base_url=live.url, timeout=10) as http:
        for n in range(count):
            body: dict[str, Any] = {"venue_id": venue_id, "play_time": int(time.time()) + 60 + 30 * n}
            if screen_id:
                body["screen_id"] = screen_id
            answer = http.post("/api/v1/ad/request", headers={"Ssp-Key": live.keys.production}, json=body)
            assert answer.status_code == 200, answer.text
            uuid_text = answer.json()["data"]["ad_request_uuid"]
            fired = http.get("/api/v1/ad/callback/", params={"ad_request_uuid": uuid_text})
            assert fired.status_code in (200, 204)


def advertiser_signed_in(live: LiveServer) -> httpx.Client:
    http = httpx.Client(base_url=live.url, timeout=30)
    page = http.get("/console/sign-in")
    answer = http.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(page.text), "email": ADVERTISER_EMAIL, "password": PASSWORD},
    )
    assert answer.status_code == 303, answer.text
    return http


@pytest.fixture(scope="module")
def advertisers_live(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    server, schemas, ids = start_advertisers_server(tmp_path_factory.mktemp("advertisers"), backend)
    yield server, ids
    server.stop()
    if schemas:
        drop_schemas(schemas)


def snapshot(live: LiveServer) -> dict[str, list[Any]]:
    """Every row of every table a console page could change, in both environments."""
    out: dict[str, list[Any]] = {}
    for env in ("production", "sandbox"):
        engine = make_engine(live.settings.environment(env))
        try:
            with engine.connect() as conn:
                for table in metadata.sorted_tables:
                    if table.name not in MOVING_TABLES:
                        found = conn.execute(sa.select(table)).all()
                        out[f"{env}.{table.name}"] = sorted(map(repr, found))
        finally:
            engine.dispose()
    return out


def console_routes(live: LiveServer) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path template, handler options) of every route of the running console app."""
    assert live.app is not None
    app = live.app._console
    found = []
    for route in app.routes:  # type: ignore[attr-defined]
        for handler in route.route_handlers:
            for method in handler.http_methods:
                found.append((method, route.path, dict(handler.opt)))
    return found


def concrete(path: str, ids: dict[str, Any], env: str = "production") -> str:
    """A route's path with B's ids (and a real venue) for its parameters."""
    path = path.replace("{env_name:str}", env)
    path = path.replace("{campaign_id:int}", str(ids["b_campaign_id"]))
    path = path.replace("{creative_id:int}", str(ids["b_creative_id"]))
    path = path.replace("{venue_id:str}", B_VENUE).replace("{screen_id:str}", B_SCREEN)
    path = path.replace("{name:str}", "console.css")
    path = re.sub(r"\{[a-z_]+:int\}", "1", path)
    return re.sub(r"\{[a-z_]+:str\}", "x", path)


SESSION_ROUTES = {"/console/sign-in", "/console/sign-out"}
"""Signing in and out are every user's; sign-out is proved apart (it ends the walk's session)."""


def test_an_advertiser_user_walks_every_console_route_and_sees_nothing_not_theirs_and_changes_nothing(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    http = advertiser_signed_in(live)
    token = csrf_of(http.get("/console/production/campaigns").text)
    before = snapshot(live)
    routes = [r for r in console_routes(live) if r[1] not in SESSION_ROUTES]
    assert len(routes) >= 40, "the walk found the console's routes"
    walked = []
    for method, template, opt in routes:
        if method in ("HEAD", "OPTIONS"):
            continue
        for env in ("production", "sandbox"):
            path = concrete(template, ids, env)
            if method == "GET":
                answer = http.get(path)
            else:  # POST, and any other method a page may take: a form with a valid CSRF token
                form = {"csrf_token": token, "name": "forged", "status": "paused"}
                answer = http.request(method, path, data=form)
            walked.append(path)
            text = answer.text
            assert B_CAMPAIGN not in text and "Zenith" not in text, (method, path)
            if template.endswith("/static/{name:str}"):
                assert answer.status_code == 200
            elif template == "/console":
                assert answer.status_code == 303
                assert answer.headers["location"] == "/console/production/campaigns"
            elif template.endswith("/campaigns") and env == "production" and method == "GET":
                assert answer.status_code == 200, path  # their own list: B's campaign absent (above)
            else:
                assert answer.status_code == 404, (method, path, answer.status_code)
            if answer.status_code == 404 and not opt.get(OPEN_TO_ADVERTISERS):
                assert "Not found" in text
    assert len(walked) >= 80
    assert snapshot(live) == before


def test_an_advertiser_user_reads_their_own_campaign_and_cannot_act_on_it(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    http = advertiser_signed_in(live)
    own = http.get(f"/console/production/campaigns/{ids['a_campaign']}")
    assert own.status_code == 200 and "Acme spring" in own.text
    assert "Edit rules" not in own.text and "Pause" not in own.text
    listed = http.get("/console/production/campaigns")
    assert "Acme spring" in listed.text and 'href="/console/production/keys"' not in listed.text
    token = csrf_of(own.text)
    before = snapshot(live)
    base = f"/console/production/campaigns/{ids['a_campaign']}"
    for path in (f"{base}/edit", f"{base}/status", f"{base}/creatives", "/console/production/advertisers"):
        answer = http.post(path, data={"csrf_token": token, "status": "paused", "name": "forged"})
        assert answer.status_code == 404, path
    assert snapshot(live) == before


def test_the_api_answers_an_advertisers_console_session_with_401(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    http = advertiser_signed_in(live)
    now = int(time.time())
    window = {"from": str(now - 86400), "to": str(now + 86400)}
    for path, params in (
        ("/api/v1/reports/delivery", {**window, "campaign_id": str(ids["b_campaign_id"])}),
        ("/api/v1/reports/playlog", {**window, "venue_id": B_VENUE}),
        (f"/api/v1/campaigns/{ids['b_campaign_id']}", {}),
        ("/api/v1/campaigns", {}),
    ):
        answer = http.get(path, params=params)
        assert answer.status_code == 401, path


def test_an_advertiser_user_signs_out_like_any_user(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, _ = advertisers_live
    http = advertiser_signed_in(live)
    token = csrf_of(http.get("/console/production/campaigns").text)
    assert http.post("/console/sign-out", data={"csrf_token": token}).status_code == 303
    assert http.get("/console/production/campaigns").status_code == 303


def test_a_staff_user_still_reads_every_campaign(advertisers_live: tuple[LiveServer, dict[str, Any]]) -> None:
    live, ids = advertisers_live
    http = signed_in(live, "viewer")
    listed = http.get("/console/production/campaigns").text
    assert "Acme spring" in listed and B_CAMPAIGN in listed
    assert http.get(f"/console/production/campaigns/{ids['b_campaign_id']}").status_code == 200


def test_an_advertiser_user_is_bound_to_existing_advertisers_only(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    http = signed_in(live, "admin")
    page = http.get("/console/production/users")
    token = csrf_of(page.text)
    form = {"csrf_token": token, "email": "nobody@acme.example", "role": "advertiser", "password": PASSWORD}
    answer = http.post("/console/production/users", data=form)
    assert "an advertiser user needs at least one advertiser" in answer.text
    answer = http.post("/console/production/users", data={**form, "advertiser": "999999"})
    assert "no advertiser 999999" in answer.text
    answer = http.post("/console/production/users", data={**form, "role": "viewer", "advertiser": "1"})
    assert "only an advertiser user is bound to advertisers" in answer.text
    answer = http.post("/console/production/users", data={**form, "advertiser": str(ids["b_advertiser_id"])})
    assert answer.status_code == 303
    listed = http.get("/console/production/users").text
    assert re.search(r"nobody@acme.example</td><td>advertiser <small>of Zenith", listed)
    audit = http.get("/console/production/audit").text
    assert "user.create" in audit and "nobody@acme.example" in audit


def test_an_advertiser_user_is_locked_after_failed_sign_ins_like_any_user(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, _ = advertisers_live
    email = "locked@acme.example"
    create_advertiser_user(live, [advertiser_a_id(live)], email)
    with httpx.Client(base_url=live.url, timeout=30) as http:
        token = csrf_of(http.get("/console/sign-in").text)
        statuses = [
            http.post(
                "/console/sign-in", data={"csrf_token": token, "email": email, "password": "wrong guess!"}
            ).status_code
            for _ in range(FREE_FAILURES + 1)
        ]
        assert statuses == [401] * (FREE_FAILURES - 1) + [429, 429]
        right = http.post(
            "/console/sign-in", data={"csrf_token": token, "email": email, "password": PASSWORD}
        )
        assert right.status_code == 429
        forged = http.post("/console/sign-in", data={"email": email, "password": PASSWORD})
        assert forged.status_code == 403  # no CSRF token: refused before any password is checked
