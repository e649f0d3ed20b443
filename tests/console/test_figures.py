"""Every figure the console shows, read from its rendered HTML, against the reporting API's answer for the
same question (SQLite and PostgreSQL): the dashboard, the campaigns list, campaign pages of 10-day, 400-day
and 10-year flights (longer than the API reads at once: summed over its windows), the reports page grouped by
campaign and local day with its invalid-traffic columns, and the Health page, in production and the sandbox.
Traffic is a player's: ad requests, no-fills, impressions and quartiles through the real endpoints."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from functools import partial
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.campaigns.repository import create_advertiser, create_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, Cap
from adslot.reporting.query import DELIVERY_MAX_DAYS
from adslot.retention.rollup import cutoff, roll_batch
from adslot.storage.database import make_engine
from tests.conftest import LiveServer, eventually, live_server
from tests.console.conftest import create_users, signed_in
from tests.reporting.support import ad_request, insert, played

DAY = 86_400
DELIVERY = "/api/v1/reports/delivery"
FLIGHTS = {"ten-days": 10, "four-hundred-days": 400, "ten-years": 3652}
QUARTILES = ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")
VOID = frozenset({"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})


class Figures(HTMLParser):
    """Each element with a data- attribute, with its ancestors' data- attributes and its own text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.found: list[dict[str, str]] = []
        self.open: list[tuple[int, dict[str, str]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        own = {k: v or "" for k, v in attrs if k.startswith("data-")}
        context: dict[str, str] = {}
        for _, outer in self.stack:
            context |= outer
        if own:
            element = context | own | {"text": ""}
            self.found.append(element)
            if tag not in VOID:
                self.open.append((len(self.stack), element))
        if tag not in VOID:
            self.stack.append((tag, own))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            popped, _ = self.stack.pop()
            while self.open and self.open[-1][0] >= len(self.stack):
                self.open.pop()
            if popped == tag:
                return

    def handle_data(self, data: str) -> None:
        for _, element in self.open:
            element["text"] += data

    def where(self, **match: str) -> list[dict[str, str]]:
        keys = {k.replace("_", "-"): v for k, v in match.items()}
        return [e for e in self.found if all(e.get(f"data-{k}") == v for k, v in keys.items())]

    def value(self, **match: str) -> str:
        found = self.where(**match)
        assert len(found) == 1, f"{match}: {found}"
        return found[0]["data-value"]


def page(client: httpx.Client, path: str, **params: Any) -> Figures:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return Figures(answer.text)


def api(live: LiveServer, env: str, start: int, end: int, **params: Any) -> dict[str, Any]:
    """The API's delivery report, over windows of at most DELIVERY_MAX_DAYS summed (what a user of the API
    does for a longer range); the rows of a single window."""
    assert live.keys
    url = live.url if env == "production" else live.sandbox_url
    key = live.keys.production_admin if env == "production" else live.keys.sandbox_admin
    totals: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for first in range(start, end, DELIVERY_MAX_DAYS * DAY):
        query = {"from": first, "to": min(first + DELIVERY_MAX_DAYS * DAY, end)} | params
        answer = httpx.get(url + DELIVERY, params=query, headers={"Ssp-Key": key}, timeout=30)
        assert answer.status_code == 200, answer.text
        data = answer.json()["data"]
        rows = data["rows"]
        for name, value in data["totals"].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                totals[name] = totals.get(name, 0) + value
            elif isinstance(value, dict):
                totals[name] = {k: totals.get(name, {}).get(k, 0) + v for k, v in value.items()}
            else:
                totals[name] = value
    return {"totals": totals, "rows": rows}


def flight(live: LiveServer, campaign: dict[str, Any]) -> dict[str, Any]:
    """The API's totals of a campaign over its whole flight."""
    found = api(live, "production", campaign["start_at"], campaign["end_at"], campaign_id=campaign["id"])
    return dict(found["totals"])


def number(text: str) -> float | None:
    return None if text in ("", "None") else float(text)


def slot(venue: str) -> dict[str, Any]:
    return {"venue_id": venue, "play_time": int(time.time()) + 60}


def player(live: LiveServer, env: str, venue: str, fires: list[list[str]], no_fills: int = 0) -> None:
    """Ad requests at `venue`, each played as fires[i] says (all at once), then `no_fills` unfilled ones."""
    assert live.keys
    url = live.url if env == "production" else live.sandbox_url
    key = live.keys.production if env == "production" else live.keys.sandbox
    with httpx.Client(base_url=url, timeout=30) as http:
        for events in fires:
            answer = http.post(
                "/api/v1/ad/request",
                headers={"Ssp-Key": key},
                json=slot(venue),
            )
            assert answer.status_code == 200, answer.text
            uuid = answer.json()["data"]["ad_request_uuid"]
            for event in events:
                if event == "impression":
                    fired = http.get("/api/v1/ad/callback/", params={"ad_request_uuid": uuid})
                else:
                    fired = http.get(
                        "/api/v1/ad/tracking/video/", params={"ad_request_uuid": uuid, "event": event}
                    )
                assert fired.status_code == 200, fired.text
        empty = "venue-empty" if env == "production" else "sandbox-no-fill"
        for _ in range(no_fills):
            answer = http.post(
                "/api/v1/ad/request",
                headers={"Ssp-Key": key},
                json=slot(empty),
            )
            assert answer.status_code == 204, answer.text


@pytest.fixture(scope="module")
def console_live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The console's live server with the invalid-traffic rules on (the tests' default turns them off)."""
    for server in live_server(tmp_path_factory.mktemp("figures"), backend, ADSLOT_IVT_RULES=""):
        create_users(server)
        yield server


@pytest.fixture(scope="module")
def campaigns(console_live: LiveServer) -> dict[str, dict[str, Any]]:
    """Three campaigns of FLIGHTS' lengths, started an hour ago, each alone at a venue of its own with a
    lifetime goal of plays and a daily goal of impressions, played by a player; and no-fills."""
    assert console_live.keys
    admin = {"Ssp-Key": console_live.keys.production_admin}
    made: dict[str, dict[str, Any]] = {}
    now = int(time.time())
    with httpx.Client(base_url=console_live.url, headers=admin, timeout=30) as http:
        advertiser = http.post("/api/v1/advertisers", json={"name": "Figures"}).json()
        for n, (name, days) in enumerate(FLIGHTS.items()):
            venue = f"figures-{name}"
            created = http.post("/api/v1/venues", json={"venue_id": venue, "name": name})
            assert created.status_code == 201, created.text
            body = {
                "advertiser_id": advertiser["id"],
                "name": name,
                "start_at": now - 3600,
                "end_at": now - 3600 + days * DAY,
                "venue_ids": [venue],
                "timezone": "Asia/Kolkata",
                "caps": [
                    {"period": "lifetime", "metric": "plays", "limit": 1000 * (n + 1)},
                    {"period": "daily", "metric": "impressions", "limit": 50},
                ],
            }
            campaign = http.post("/api/v1/campaigns", json=body)
            assert campaign.status_code == 201, campaign.text
            creative = {
                "name": f"{name} 15s",
                "media_url": "https://cdn.example.test/figures.mp4",
                "mime_type": "video/mp4",
                "width": 1920,
                "height": 1080,
                "duration_seconds": 15,
            }
            added = http.post(f"/api/v1/campaigns/{campaign.json()['id']}/creatives", json=creative)
            assert added.status_code == 201, added.text
            made[name] = campaign.json() | {"venue": venue}
    key = console_live.keys.production

    def fills(venue: str) -> bool:
        answer = httpx.post(
            console_live.url + "/api/v1/ad/request",
            headers={"Ssp-Key": key},
            json=slot(venue),
        )
        return answer.status_code == 200

    for n, venue in enumerate(c["venue"] for c in made.values()):
        assert eventually(partial(fills, venue), timeout=15)  # one unplayed fill each
        player(
            console_live,
            "production",
            venue,
            [["impression", *QUARTILES], ["impression", "impression", "start"]] + [["impression"]] * n + [[]],
            no_fills=2,
        )
    return made


def test_each_campaign_page_shows_its_whole_flights_figures_as_the_api_sums_them(
    console_live: LiveServer, campaigns: dict[str, dict[str, Any]]
) -> None:
    client = signed_in(console_live, "viewer")
    for campaign in campaigns.values():
        shown = page(client, f"/console/production/campaigns/{campaign['id']}")
        totals = flight(console_live, campaign)
        assert totals["plays"] > 0 and totals["fills"] > totals["plays"]
        for name in ("fills", "plays", "impressions", "completes", "late", "duplicates"):
            assert number(shown.value(range="flight", figure=name)) == totals[name], (campaign["name"], name)
        (goal,) = shown.where(goal="lifetime-plays")
        assert float(goal["data-delivered"]) == totals["plays"]
        assert goal["text"].startswith(f"lifetime plays: {totals['plays']:,} of "), goal["text"]
        (daily,) = shown.where(goal="daily-impressions")
        today = api(console_live, "production", *kolkata_day(), campaign_id=campaign["id"])
        assert float(daily["data-delivered"]) == today["totals"]["impressions"]


def kolkata_day() -> tuple[int, int]:
    """Today in Asia/Kolkata (UTC+05:30, no DST): the campaigns' day, which their daily goals count in."""
    now = int(time.time()) + 19_800
    start = now - now % DAY - 19_800
    return start, start + DAY


def test_the_campaigns_list_shows_each_campaigns_plays_fills_and_goal_progress_as_the_api_does(
    console_live: LiveServer, campaigns: dict[str, dict[str, Any]]
) -> None:
    client = signed_in(console_live, "viewer")
    shown = page(client, "/console/production/campaigns")
    for campaign in campaigns.values():
        report = flight(console_live, campaign)
        cells = {
            e["data-figure"]: e["text"]
            for e in shown.where(campaign=str(campaign["id"]))
            if "data-figure" in e
        }
        assert (number(cells["plays"]), number(cells["fills"])) == (report["plays"], report["fills"])
        (goal,) = [e for e in shown.where(campaign=str(campaign["id"]), goal="lifetime-plays")]
        assert float(goal["data-delivered"]) == report["plays"]
        assert float(goal["data-limit"]) == campaign["caps"][0]["limit"]


def test_the_dashboard_shows_today_and_the_week_as_the_api_reports_them(
    console_live: LiveServer, campaigns: dict[str, dict[str, Any]]
) -> None:
    client = signed_in(console_live, "viewer")
    shown = page(client, "/console/production")
    now = int(time.time())
    today = now - now % DAY
    for name, start in (("today", today), ("week", today - 6 * DAY)):
        totals = api(console_live, "production", start, today + DAY, group_by="venue")["totals"]
        assert totals["requests"] > totals["fills"] > totals["plays"] > 0
        for figure in ("requests", "fills", "fill_rate", "plays", "impressions", "late", "duplicates"):
            assert number(shown.value(range=name, figure=figure)) == totals[figure], (name, figure)


def test_the_reports_page_shows_the_apis_rows_and_invalid_counts_by_campaign_and_local_day(
    console_live: LiveServer, campaigns: dict[str, dict[str, Any]]
) -> None:
    client = signed_in(console_live, "viewer")
    now = int(time.time())
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    params = {"from": day, "to": day, "timezone": "Asia/Kolkata", "by_campaign": "1", "by_day": "1"}
    answer = client.get("/console/production/reports", params=params)
    assert answer.status_code == 200, answer.text
    start = now - now % DAY
    assert console_live.keys
    api_answer = httpx.get(
        console_live.url + DELIVERY,
        params={"from": start, "to": start + DAY, "timezone": "Asia/Kolkata", "group_by": "campaign,day"},
        headers={"Ssp-Key": console_live.keys.production_admin},
    )
    assert api_answer.status_code == 200, api_answer.text
    report = api_answer.json()["data"]
    cells = [e for e in Figures(answer.text).found if "data-column" in e]
    keys = list(dict.fromkeys(c["data-column"] for c in cells))
    assert {"campaign_id", "day", "fills", "plays", "impressions", "invalid"} <= set(keys)
    assert len(cells) == len(keys) * len(report["rows"]) > 0
    for n, row in enumerate(report["rows"]):
        shown = {c["data-column"]: c["data-value"] for c in cells[n * len(keys) : (n + 1) * len(keys)]}
        for key, value in shown.items():
            if key == "invalid":  # the table's total; the CSV download has each rule's column
                assert int(value) == sum(row["invalid"].values()), (n, key)
            elif isinstance(row[key], int | float):
                assert number(value) == row[key], (n, key)
            else:
                assert value == ("None" if row[key] is None else str(row[key])), (n, key)
    assert sum(row["invalid"]["too_fast"] for row in report["rows"]) > 0  # quartiles fired at once
    figures = Figures(answer.text)
    for figure in ("fills", "plays", "impressions", "completes", "late", "duplicates"):
        assert number(figures.value(range="report", figure=figure)) == report["totals"][figure]


def test_the_health_page_counts_what_the_api_reports_with_the_flagged_fires_per_rule(
    console_live: LiveServer, campaigns: dict[str, dict[str, Any]]
) -> None:
    assert console_live.keys
    client = signed_in(console_live, "viewer")
    shown = page(client, "/console/production/health")
    key_ids = {e["data-key"] for e in shown.where() if "data-key" in e}
    (key,) = [
        k for k in key_ids if shown.where(key=k, criterion="played") and shown.where(key=k, figure="flagged")
    ]
    now = int(time.time())
    start = now - now % 3600 - 7 * DAY
    totals = api(console_live, "production", start, start + 8 * DAY, group_by="venue")["totals"]
    criteria = {e["data-criterion"]: e for e in shown.where(key=key) if "data-criterion" in e}
    assert float(criteria["fill"]["data-numerator"]) == totals["fills"]
    assert float(criteria["fill"]["data-denominator"]) == totals["requests"]
    assert float(criteria["played"]["data-numerator"]) == totals["plays"]
    flagged = {e["data-rule"]: int(e["data-value"]) for e in shown.where(key=key) if "data-rule" in e}
    assert flagged == {rule: n for rule, n in totals["invalid"].items() if n}


def test_the_sandbox_dashboard_counts_its_no_fill_requests_and_its_health_page_names_the_rule(
    console_live: LiveServer,
) -> None:
    player(console_live, "sandbox", "figures-lobby", [["impression", *QUARTILES]], no_fills=3)
    client = signed_in(console_live, "viewer")
    shown = page(client, "/console/sandbox")
    now = int(time.time())
    today = now - now % DAY
    totals = api(console_live, "sandbox", today, today + DAY, group_by="venue")["totals"]
    assert totals["requests"] == totals["fills"] + 3
    for figure in ("requests", "fills", "fill_rate", "plays", "impressions"):
        assert number(shown.value(range="today", figure=figure)) == totals[figure], figure
    health = page(client, "/console/sandbox/health")
    flagged = {e["data-rule"]: int(e["data-value"]) for e in health.where() if "data-rule" in e}
    assert flagged == {"too_fast": 3} == {rule: n for rule, n in totals["invalid"].items() if n}


def test_the_campaigns_list_reads_delivery_in_as_many_queries_for_a_hundred_campaigns_as_for_three(
    console_live: LiveServer, campaigns: dict[str, dict[str, Any]]
) -> None:
    """The list's delivery is one report grouped by campaign over the flights' span (and one per time zone of
    daily goals), not one per campaign: with the same span and zones, the statements that read ad_requests do
    not grow with the campaigns."""
    client = signed_in(console_live, "viewer")
    read: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "ad_requests" in statement and threading.current_thread() is not threading.main_thread():
            read.append(statement)

    def reads() -> tuple[int, float]:
        read.clear()
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", count)
        try:
            started = time.perf_counter()
            page(client, "/console/production/campaigns")
            took = time.perf_counter() - started
        finally:
            sa.event.remove(sa.engine.Engine, "before_cursor_execute", count)
        return len(read), took

    few, _ = reads()
    engine = make_engine(console_live.settings.environment("production"))
    now = int(time.time())
    with engine.begin() as conn:
        advertiser = create_advertiser(conn, AdvertiserIn(name="Hundred"))
        for n in range(100):
            body = CampaignIn(
                advertiser_id=advertiser.id,
                name=f"hundred-{n}",
                start_at=now - 3600,
                end_at=now + (n + 1) * 30 * DAY,  # within the ten-year flight's span
                timezone="Asia/Kolkata",
                caps=[Cap("lifetime", "plays", 100), Cap("daily", "plays", 10)],
            )
            create_campaign(conn, body)
    engine.dispose()
    many, took = reads()
    assert many == few > 0
    print(f"campaigns list, {len(campaigns) + 101} campaigns: {many} statements on ad_requests, {took:.3f} s")


def test_a_campaign_whose_old_plays_were_rolled_up_by_retention_shows_the_apis_figures(
    console_live: LiveServer,
) -> None:
    """Ad requests past the retention live on only in report_rollups: a 430-day flight with plays 390, 200
    and 10 days ago, rolled up and deleted, and one from the last hour, shows what the API sums over its
    windows."""
    engine = make_engine(console_live.settings.environment("production"))
    now = int(time.time())
    with engine.begin() as conn:
        advertiser = create_advertiser(conn, AdvertiserIn(name="Retained"))
        body = CampaignIn(
            advertiser_id=advertiser.id,
            name="retained",
            start_at=now - 400 * DAY,
            end_at=now + 30 * DAY,
            venue_ids=["venue-empty"],
            caps=[Cap("lifetime", "plays", 100)],
        )
        campaign = create_campaign(conn, body)
    old = [now - 390 * DAY, now - 200 * DAY, now - 10 * DAY]
    settled = {"settle_reason": "played", "campaign_id": campaign.id, "venue_id": "venue-empty"}
    insert(
        engine,
        [played(at, "start", "complete", settled_at=at + 960, **settled) for at in old]
        + [ad_request(now - 3600, campaign_id=campaign.id, venue_id="venue-empty")],
    )
    assert roll_batch(engine, cutoff(now, 5), now, 100).rows == 3
    engine.dispose()
    info = {"id": campaign.id, "start_at": campaign.start_at, "end_at": campaign.end_at}
    totals = flight(console_live, info)
    assert (totals["fills"], totals["plays"], totals["completes"]) == (4, 3, 3)
    client = signed_in(console_live, "viewer")
    shown = page(client, f"/console/production/campaigns/{campaign.id}")
    for name in ("fills", "plays", "impressions", "completes"):
        assert number(shown.value(range="flight", figure=name)) == totals[name], name
    listed = page(client, "/console/production/campaigns").where(campaign=str(campaign.id))
    cells = {e["data-figure"]: e["text"] for e in listed if "data-figure" in e}
    assert (number(cells["plays"]), number(cells["fills"])) == (3, 4)
