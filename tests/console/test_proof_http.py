"""The proof-of-play report and share links over HTTP, on SQLite and PostgreSQL: the report's figures and
CSV are the API's delivery report's, to the play; a share link opens signed out, counts each opening, stops
once revoked or expired, and is stored only as its hash."""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

import httpx
import sqlalchemy as sa

from adslot.console import share_links
from adslot.environment import transact
from adslot.storage.database import make_engine
from adslot.storage.tables import audit_log, campaign_share_links
from tests.conftest import LiveServer
from tests.console.conftest import csrf_of, signed_in
from tests.console.test_advertisers_http import (
    A_PLAYS,
    B_CAMPAIGN,
    PROGRAMMATIC_PLAYS,
    advertiser_signed_in,
    advertisers_live,
)

__all__ = ["advertisers_live"]  # the module fixture, shared


def figures(page: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r'data-figure="([a-z_]+)" data-value="([0-9.]+)"', page)}


def period(page: str) -> dict[str, str]:
    found = re.search(r'data-from="(\d+)" data-to="(\d+)"', page)
    assert found
    return {"from": found.group(1), "to": found.group(2)}


def api_report(live: LiveServer, **params: str) -> httpx.Response:
    assert live.keys is not None
    return httpx.get(
        f"{live.url}/api/v1/reports/delivery",
        params=params,
        headers={"Ssp-Key": live.keys.production_admin},
        timeout=30,
    )


def test_an_advertisers_proof_of_play_report_carries_the_apis_figures_and_csv(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    http = advertiser_signed_in(live)
    page = http.get(f"/console/production/campaigns/{ids['a_campaign']}/proof")
    assert page.status_code == 200
    shown = figures(page.text)
    asked = period(page.text) | {"campaign_id": str(ids["a_campaign"])}
    totals = api_report(live, **asked).json()["data"]["totals"]
    assert shown["plays"] == totals["plays"] == A_PLAYS
    assert shown["impressions"] == totals["impressions"]
    assert shown["completes"] == totals["completes"] and shown["starts"] == totals["starts"]
    assert "Venue one" in page.text and "Europe/Berlin" in page.text and B_CAMPAIGN not in page.text
    assert "Methodology" in page.text and "duplicate" in page.text
    assert page.text.count(" CET</td>") + page.text.count(" CEST</td>") == A_PLAYS  # the venue's own time
    csv = http.get(f"/console/production/campaigns/{ids['a_campaign']}/proof.csv")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    same = api_report(live, **asked, group_by="day,venue,screen", timezone="UTC", format="csv")
    assert csv.text == same.text and str(A_PLAYS) in csv.text
    plays = http.get(f"/console/production/campaigns/{ids['a_campaign']}/play-log.csv")
    assert plays.status_code == 200 and plays.headers["content-type"].startswith("text/csv")
    lines = plays.text.strip().splitlines()
    assert len(lines) == 1 + A_PLAYS and lines[0].startswith("ad_request_uuid,venue_id,")
    assert all(line.split(",")[4] == str(ids["a_campaign"]) for line in lines[1:])
    assert live.keys is not None
    venue_log = httpx.get(  # venue-1 plays A's campaign and a partner's wins: A's log is its own rows
        f"{live.url}/api/v1/reports/playlog",
        params={"venue_id": "venue-1", "format": "csv", **period(page.text)},
        headers={"Ssp-Key": live.keys.production_admin},
    )
    assert venue_log.status_code == 200
    header, *rows = venue_log.text.strip().splitlines()
    own = [row for row in rows if row.split(",")[4] == str(ids["a_campaign"])]
    assert len(rows) == A_PLAYS + PROGRAMMATIC_PLAYS and plays.text.strip().splitlines() == [header, *own]
    venue = api_report(live, **period(page.text), venue_id="venue-1", group_by="venue").json()["data"]
    assert venue["totals"]["programmatic_plays"] == PROGRAMMATIC_PLAYS  # the buyer's: not in A's report
    assert venue["totals"]["plays"] == A_PLAYS + PROGRAMMATIC_PLAYS and shown["plays"] == A_PLAYS


def test_a_share_link_opens_signed_out_counts_its_openings_and_stops_once_revoked(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    admin = signed_in(live, "trafficker")
    campaign = f"/console/production/campaigns/{ids['a_campaign']}"
    token = csrf_of(admin.get(campaign).text)
    made = admin.post(f"{campaign}/share-links", data={"csrf_token": token, "label": "Acme agency"})
    assert made.status_code == 200
    link = re.search(r'id="new-link">([^<]+)</code>', made.text)
    assert link
    url = link.group(1)
    secret = url.rsplit("/", 1)[1]
    with httpx.Client(timeout=30) as anyone:
        for _ in range(2):
            opened = anyone.get(url)
            assert opened.status_code == 200 and "Proof of play: Acme spring" in opened.text
            assert "Acme agency" in opened.text and "Sign out" not in opened.text
        assert figures(opened.text)["plays"] == A_PLAYS
        assert anyone.get(f"{url}/report.csv").status_code == 200
        log = anyone.get(f"{url}/play-log.csv")
        assert log.status_code == 200 and len(log.text.strip().splitlines()) == 1 + A_PLAYS
    listed = admin.get(campaign).text
    row = re.search(r'<tr data-link="(\d+)">.*?data-opens>(\d+)<', listed, flags=re.DOTALL)
    assert row and row.group(2) == "2"
    engine = make_engine(live.settings.environment("production"))
    try:
        with engine.connect() as conn:
            stored = conn.execute(sa.select(campaign_share_links.c.token_hash)).scalars().all()
            logged = conn.execute(sa.select(audit_log.c.after)).scalars().all()
    finally:
        engine.dispose()
    assert hashlib.sha256(secret.encode()).hexdigest() in stored
    assert not any(secret in (entry or "") for entry in logged)
    revoked = admin.post(f"{campaign}/share-links/{row.group(1)}/revoke", data={"csrf_token": token})
    assert revoked.status_code == 303
    with httpx.Client(timeout=30) as anyone:
        assert anyone.get(url).status_code == 404
        assert anyone.get(f"{url}/report.csv").status_code == 404
        assert anyone.get(f"{url}/play-log.csv").status_code == 404
    assert "share-link.revoke" in admin.get("/console/production/audit").text


def test_an_expired_or_unknown_share_link_answers_404(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    engine = make_engine(live.settings.environment("production"))
    long_ago = int(time.time()) - 31 * 86400
    try:
        secret, _ = transact(
            engine,
            lambda c: share_links.create_link(c, ids["a_campaign"], actor="test", now=long_ago, days=30),
            write=True,
        )
    finally:
        engine.dispose()
    with httpx.Client(base_url=live.url, timeout=30) as anyone:
        assert anyone.get(share_links.link_path("production", secret)).status_code == 404
        assert anyone.get(share_links.link_path("production", secret + "x")).status_code == 404
        assert anyone.get(share_links.link_path("production", "nothing")).status_code == 404


def test_a_bad_share_link_form_shows_the_error_by_its_field_and_makes_nothing(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    admin = signed_in(live, "admin")
    campaign = f"/console/production/campaigns/{ids['a_campaign']}"
    token = csrf_of(admin.get(campaign).text)
    for data, message in (
        ({"days": "0"}, "a link lasts 1 to 366 days"),
        ({"days": "soon"}, "a whole number of days"),
        ({"label": "x" * 129}, "a label has at most 128"),
        ({"from": "2026-13-01"}, "a date such as"),
        ({"from": "2020-01-01", "to": "2026-01-01"}, "a report covers at most 732 days"),
    ):
        answer = admin.post(f"{campaign}/share-links", data={"csrf_token": token, **data})
        assert answer.status_code == 200 and message in answer.text, data
        assert 'id="new-link"' not in answer.text
    viewer = signed_in(live, "viewer")
    refused = viewer.post(f"{campaign}/share-links", data={"csrf_token": csrf_of(viewer.get(campaign).text)})
    assert refused.status_code == 403


def test_bad_report_dates_are_shown_again_by_their_field_over_the_flight(
    advertisers_live: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, ids = advertisers_live
    http = advertiser_signed_in(live)
    proof = f"/console/production/campaigns/{ids['a_campaign']}/proof"
    for params, message in (
        ({"from": "2026-02-30"}, "a date such as 2026-12-04"),
        ({"from": "2026-12-09", "to": "2026-12-01"}, "to must be after from"),
    ):
        page = http.get(proof, params=params)
        assert page.status_code == 200 and message in page.text, params
        assert 'aria-invalid="true"' in page.text and params["from"] in page.text
        assert figures(page.text)["plays"] == A_PLAYS
    assert http.get(f"{proof}.csv", params={"from": "2026-02-30"}).status_code == 400
