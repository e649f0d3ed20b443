"""Programmatic fill through a real adslot: the test bidder wins a slot the open tier may sell, the player's
VAST resolves to its creative with adslot's pixels beside the buyer's, and its billing notice is sent once,
only after the impression is counted."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.demand.bidder import ADVERTISER_DOMAIN
from adslot.storage.database import make_engine
from adslot.storage.tables import demand_wins
from tests.conftest import PROD_VENUE, LiveServer, drop_schemas, eventually, play_time, start_server
from tests.demand.test_bidder import running
from tests.serving.test_misbehaving_partners import server_timing

PARTNER = "test-bidder"


@pytest.fixture(scope="module")
def bidder() -> Iterator[httpx.Client]:
    with running(price_cpm=4.2, seed=7) as client:
        yield client


@pytest.fixture(scope="module")
def exchange(
    backend: str, tmp_path_factory: pytest.TempPathFactory, bidder: httpx.Client
) -> Iterator[LiveServer]:
    """adslot with the test bidder as its only demand partner, on venue-empty (no campaign) and venue-1."""
    server, schemas = start_server(
        tmp_path_factory.mktemp("adslot"), backend, ADSLOT_DEMAND_BILLING_INTERVAL_MS="50"
    )
    answer = httpx.post(
        f"{server.url}/api/v1/demand/partners",
        headers={"Ssp-Key": server.keys.production_admin},
        json={
            "name": PARTNER,
            "endpoint": f"{bidder.base_url}/openrtb2/auction",
            "timeout_ms": 500,
            "venues": ["venue-empty", PROD_VENUE],
            "auto_approve": True,
        },
    )
    assert answer.status_code == 201, answer.text
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


def ad_request(server: LiveServer, venue: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/v1/ad/request",
        headers={"Ssp-Key": server.keys.production},
        json={"venue_id": venue, "play_time": play_time()},
        timeout=10,
    )


def win_row(server: LiveServer, ident: str) -> dict[str, Any] | None:
    engine = make_engine(server.settings.environment("production"))
    try:
        with engine.connect() as conn:
            row = conn.execute(
                sa.select(demand_wins).where(demand_wins.c.ad_request_id == uuid.UUID(ident))
            ).first()
            return dict(row._mapping) if row is not None else None
    finally:
        engine.dispose()


def test_a_slot_no_campaign_fills_is_sold_to_the_bidder_and_resolves_to_its_creative(
    exchange: LiveServer, bidder: httpx.Client
) -> None:
    answer = ad_request(exchange, "venue-empty")
    assert answer.status_code == 200, answer.text
    ident = answer.json()["data"]["ad_request_uuid"]
    vast = httpx.get(f"{exchange.url}/api/v1/ad/vast/{ident}").text
    assert f"{bidder.base_url}/media/creative.mp4" in vast
    assert f"/api/v1/ad/callback?ad_request_uuid={ident}&amp;layer=inline" in vast or (
        f"ad_request_uuid={ident}&layer=inline" in vast
    )
    assert f"{bidder.base_url}/pixel/" in vast
    record = httpx.get(
        f"{exchange.url}/api/v1/ad/request/{ident}", headers={"Ssp-Key": exchange.keys.production}
    ).json()["data"]
    assert record["campaign_id"] is None
    win = win_row(exchange, ident)
    assert win is not None and win["partner"] == PARTNER and win["price_micros"] == 4_200_000
    assert win["bill_due_at"] is None


def test_an_answer_tells_the_auctions_time_and_the_records_in_server_timing_once_partners_are_asked(
    exchange: LiveServer,
) -> None:
    for venue in ("venue-empty", PROD_VENUE):  # the bid fills the one, the direct campaign the other
        answer = ad_request(exchange, venue)
        assert answer.status_code == 200, answer.text
        metrics = server_timing(answer)
        assert set(metrics) == {"demand", "record"}, answer.headers["server-timing"]
        assert 0 < metrics["demand"] < 0.5  # the partner's timeout_ms: the bidder answered within it
        assert metrics["record"] > 0
    # A venue no partner may bid on asks no one: nothing to tell.
    venue_with_campaign(exchange, "no-partner-here", cpm=1)
    answer = ad_request(exchange, "no-partner-here")
    assert answer.status_code == 200, answer.text
    assert "server-timing" not in answer.headers


def test_the_billing_notice_is_sent_once_after_the_impression_counts_not_before(
    exchange: LiveServer, bidder: httpx.Client
) -> None:
    ident = ad_request(exchange, "venue-empty").json()["data"]["ad_request_uuid"]
    time.sleep(0.3)
    bills = [e for e in bidder.get("/log").json() if e["kind"] == "bill"]
    assert not [b for b in bills if ident in str(b)]
    for _ in range(5):
        httpx.get(f"{exchange.url}/api/v1/ad/callback", params={"ad_request_uuid": ident})
    assert eventually(lambda: (win_row(exchange, ident) or {}).get("billed_at") is not None)
    win = win_row(exchange, ident)
    assert win is not None
    auction_id = win["auction_id"]
    time.sleep(0.3)
    bills = [e for e in bidder.get("/log").json() if e["kind"] == "bill" and auction_id in str(e)]
    assert len(bills) == 1
    assert "macros_left" not in bills[0]  # every macro substituted
    assert bills[0]["query"]["price"] == "4.2"
    assert bills[0]["query"]["mult"] == "1"
    assert bills[0]["query"]["ts"] == str(win["bill_due_at"] * 1000)


@pytest.fixture(scope="module")
def rival() -> Iterator[httpx.Client]:
    """A second bidder, always bidding lower (3.0) than the first (4.2)."""
    with running(price_cpm=3.0, seed=8) as client:
        yield client


def manage(server: LiveServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(
        f"{server.url}{path}", headers={"Ssp-Key": server.keys.production_admin}, json=body, timeout=10
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def venue_with_campaign(server: LiveServer, venue: str, **campaign: Any) -> int:
    """A new venue with one campaign (with a creative) of the given tier, CPM, caps: its id."""
    manage(server, "/api/v1/venues", {"venue_id": venue, "name": venue})
    advertiser = manage(server, "/api/v1/advertisers", {"name": f"advertiser of {venue}"})
    now = int(time.time())
    made = manage(
        server,
        "/api/v1/campaigns",
        {
            "advertiser_id": advertiser["id"],
            "name": f"campaign of {venue}",
            "start_at": now - 60,
            "end_at": now + 86400,
            "venue_ids": [venue],
            **campaign,
        },
    )
    manage(
        server,
        f"/api/v1/campaigns/{made['id']}/creatives",
        {
            "name": "spot",
            "media_url": "https://cdn.example.test/spot.mp4",
            "mime_type": "video/mp4",
            "width": 1920,
            "height": 1080,
            "duration_seconds": 10,
        },
    )
    return int(made["id"])


def add_partner(server: LiveServer, name: str, bidder: httpx.Client, venues: list[str]) -> None:
    manage(
        server,
        "/api/v1/demand/partners",
        {
            "name": name,
            "endpoint": f"{bidder.base_url}/openrtb2/auction",
            "timeout_ms": 500,
            "venues": venues,
            "auto_approve": True,
        },
    )


def log_of(bidder: httpx.Client, kind: str, auction_id: str | None = None) -> list[dict[str, Any]]:
    entries = [e for e in bidder.get("/log").json() if e["kind"] == kind]
    return [e for e in entries if auction_id is None or auction_id in str(e)]


def record_of(server: LiveServer, ident: str) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/api/v1/ad/request/{ident}", headers={"Ssp-Key": server.keys.production})
    return dict(answer.json()["data"])


@pytest.mark.parametrize(
    ("venue", "campaign", "bids"),
    [
        ("tier-sponsorship", {"tier": "sponsorship", "cpm": 1}, False),
        (
            "tier-capped",
            {"cpm": 1, "caps": [{"period": "lifetime", "metric": "plays", "limit": 1000}]},
            False,
        ),
        ("tier-open-dear", {"cpm": 10}, True),
        ("tier-open-cheap", {"cpm": 1}, True),
        ("tier-house", {"tier": "house", "cpm": 50}, True),
    ],
)
def test_guaranteed_campaigns_keep_their_slot_unasked_and_open_ones_compete_on_cpm(
    exchange: LiveServer, bidder: httpx.Client, venue: str, campaign: dict[str, Any], bids: bool
) -> None:
    campaign_id = venue_with_campaign(exchange, venue, **campaign)
    add_partner(exchange, f"p-{venue}", bidder, [venue])
    asked_before = len([e for e in log_of(bidder, "request") if venue in str(e)])
    answer = ad_request(exchange, venue)
    assert answer.status_code == 200, answer.text
    record = record_of(exchange, answer.json()["data"]["ad_request_uuid"])
    asked = len([e for e in log_of(bidder, "request") if venue in str(e)]) - asked_before
    assert asked == (1 if bids else 0)
    # The bid is 4.2: it beats an open campaign's CPM of 1 and a house campaign at any CPM, not a CPM of 10.
    bid_wins = venue in ("tier-open-cheap", "tier-house")
    assert record["campaign_id"] == (None if bid_wins else campaign_id)
    assert record["source"] == ("programmatic" if bid_wins else "direct")


def test_the_winner_gets_one_win_notice_and_the_loser_one_loss_notice_with_its_reason(
    exchange: LiveServer, bidder: httpx.Client, rival: httpx.Client
) -> None:
    manage(exchange, "/api/v1/venues", {"venue_id": "duel", "name": "duel"})
    add_partner(exchange, "high", bidder, ["duel"])
    add_partner(exchange, "low", rival, ["duel"])
    seen = len(rival.get("/log").json())
    ident = ad_request(exchange, "duel").json()["data"]["ad_request_uuid"]
    win = win_row(exchange, ident)
    assert win is not None and win["partner"] == "high"
    assert win["price_micros"] == 4_200_000  # first price

    def rivals(kind: str) -> list[dict[str, Any]]:
        return [e for e in rival.get("/log").json()[seen:] if e["kind"] == kind]

    assert eventually(lambda: len(log_of(bidder, "win", win["auction_id"])) == 1 and len(rivals("loss")) == 1)
    time.sleep(0.3)
    assert len(log_of(bidder, "win", win["auction_id"])) == 1
    assert not log_of(bidder, "loss", win["auction_id"])
    (loss,) = rivals("loss")
    assert loss["query"]["reason"] == "102"  # lost to a higher bid
    (asked,) = rivals("request")
    assert loss["query"]["auction"] == asked["id"]
    assert not rivals("win")


def test_fifty_duplicate_impressions_at_once_send_one_billing_notice(
    exchange: LiveServer, bidder: httpx.Client
) -> None:
    ident = ad_request(exchange, "venue-empty").json()["data"]["ad_request_uuid"]
    url = f"{exchange.url}/api/v1/ad/callback"
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(lambda _: httpx.get(url, params={"ad_request_uuid": ident}), range(50)))
    assert all(a.status_code in (200, 204) for a in answers)
    assert eventually(lambda: (win_row(exchange, ident) or {}).get("billed_at") is not None)
    win = win_row(exchange, ident)
    assert win is not None
    time.sleep(0.5)
    assert len(log_of(bidder, "bill", win["auction_id"])) == 1
    assert win["bill_attempts"] == 1
    assert record_of(exchange, ident)["duplicate_count"] == 49


def test_a_released_ad_is_never_billed_even_if_its_impression_fires_after(
    exchange: LiveServer, bidder: httpx.Client
) -> None:
    ident = ad_request(exchange, "venue-empty").json()["data"]["ad_request_uuid"]
    released = httpx.post(
        f"{exchange.url}/api/v1/ad/request/{ident}/release", headers={"Ssp-Key": exchange.keys.production}
    )
    assert released.status_code == 200, released.text
    httpx.get(f"{exchange.url}/api/v1/ad/callback", params={"ad_request_uuid": ident})
    time.sleep(0.5)
    win = win_row(exchange, ident)
    assert win is not None and win["bill_due_at"] is None and win["billed_at"] is None
    assert not log_of(bidder, "bill", win["auction_id"])


def test_a_new_creative_waits_for_approval_plays_once_approved_and_never_once_rejected(
    exchange: LiveServer, bidder: httpx.Client
) -> None:
    manage(exchange, "/api/v1/venues", {"venue_id": "gallery", "name": "gallery"})
    manage(
        exchange,
        "/api/v1/demand/partners",
        {
            "name": "careful",
            "endpoint": f"{bidder.base_url}/openrtb2/auction",
            "timeout_ms": 500,
            "venues": ["gallery"],
        },
    )
    admin = {"Ssp-Key": exchange.keys.production_admin}

    def queue() -> list[dict[str, Any]]:
        answer = httpx.get(
            f"{exchange.url}/api/v1/demand/creatives", params={"partner": "careful"}, headers=admin
        )
        return list(answer.json())

    seen = len(bidder.get("/log").json())
    assert ad_request(exchange, "gallery").status_code == 204  # held for approval: no direct campaign either
    assert eventually(lambda: [c["status"] for c in queue()] == ["pending"])
    losses = [e for e in bidder.get("/log").json()[seen:] if e["kind"] == "loss"]
    assert [e["query"]["reason"] for e in losses] == ["201"]
    (creative,) = queue()
    approved = httpx.post(f"{exchange.url}/api/v1/demand/creatives/{creative['id']}/approve", headers=admin)
    assert approved.status_code == 200, approved.text
    answer = ad_request(exchange, "gallery")
    assert answer.status_code == 200
    win = win_row(exchange, answer.json()["data"]["ad_request_uuid"])
    assert win is not None and win["demand_creative_id"] == creative["id"]
    rejected = httpx.post(f"{exchange.url}/api/v1/demand/creatives/{creative['id']}/reject", headers=admin)
    assert rejected.status_code == 200, rejected.text
    assert ad_request(exchange, "gallery").status_code == 204


def test_metrics_count_each_partners_outcomes_and_show_its_breaker(exchange: LiveServer) -> None:
    ad_request(exchange, "venue-empty")
    text = httpx.get(f"{exchange.url}/metrics").text
    bids = [
        line
        for line in text.splitlines()
        if line.startswith("adslot_demand_requests_total{")
        and f'partner="{PARTNER}"' in line
        and 'outcome="bid"' in line
        and 'environment="production"' in line
    ]
    assert len(bids) == 1 and float(bids[0].rsplit(" ", 1)[1]) >= 1
    assert f'adslot_demand_breaker_open{{environment="production",partner="{PARTNER}"}} 0.0' in text


def test_a_partner_blocking_the_bidders_advertiser_gets_no_fill_and_a_loss_notice_205(
    exchange: LiveServer, bidder: httpx.Client
) -> None:
    manage(exchange, "/api/v1/venues", {"venue_id": "clean", "name": "clean"})
    manage(
        exchange,
        "/api/v1/demand/partners",
        {
            "name": "picky",
            "endpoint": f"{bidder.base_url}/openrtb2/auction",
            "timeout_ms": 500,
            "venues": ["clean"],
            "auto_approve": True,
            "blocked_domains": [ADVERTISER_DOMAIN.upper()],
        },
    )
    seen = len(bidder.get("/log").json())
    assert ad_request(exchange, "clean").status_code == 204
    assert len([e for e in bidder.get("/log").json()[seen:] if e["kind"] == "request"]) == 1
    assert eventually(lambda: any(e["kind"] == "loss" for e in bidder.get("/log").json()[seen:]))
    (loss,) = [e for e in bidder.get("/log").json()[seen:] if e["kind"] == "loss"]
    assert loss["query"]["reason"] == "205"
