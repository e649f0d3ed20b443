"""The console's Demand section over HTTP on SQLite and PostgreSQL, and in Chromium: partners added, paused,
resumed and removed through the API's own structs and audit actions; the creative approval queue with its
preview; the demand report and its CSV; a viewer reads all of it and changes nothing."""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.demand.creatives_repository import note_creative
from adslot.demand.partners import PartnerIn
from adslot.demand.repository import create_partner, get_partner
from adslot.environment import transact
from adslot.storage.database import make_engine
from adslot.storage.tables import audit_log, demand_creatives, demand_partners, demand_stats
from tests.conftest import LiveServer, drop_schemas
from tests.console.conftest import ROLE_EMAILS, csrf_of, signed_in, start_console_server
from tests.console.test_console_browser import TIMEOUT_MS, Browser, nav
from tests.playground.test_playground_browser import require_browser

DEMAND = "/console/production/demand"
ENDPOINT = "https://bidder.example.test/openrtb"
VAST = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<VAST version="2.0"><Ad id="c-1"><InLine>'
    "<AdSystem>dsp</AdSystem><AdTitle>Console &amp; co</AdTitle></InLine></Ad></VAST>"
)
NOW = 1_800_000_000
REPORT_HOUR = 1_772_359_200
"""2026-03-01T10:00Z: 11:00 in Berlin."""


def run(live: LiveServer, fn: Any, env: str = "production") -> Any:
    engine = make_engine(live.settings.environment(env))
    try:
        return transact(engine, fn, write=True)
    finally:
        engine.dispose()


def add_partner(live: LiveServer, name: str) -> None:
    run(live, lambda c: create_partner(c, PartnerIn(name=name, endpoint=ENDPOINT)))


def bid(live: LiveServer, partner: str, crid: str, adm: str | None = VAST, nurl: str | None = None) -> int:
    """A creative noted as the auction notes a new one; its id."""

    def note(conn: sa.Connection) -> int:
        note_creative(conn, get_partner(conn, partner), crid, ["brand.example"], adm, nurl, NOW)
        c = demand_creatives.c
        found = sa.select(c.id).join(demand_partners).where(demand_partners.c.name == partner, c.crid == crid)
        return int(conn.execute(found).scalar_one())

    result: int = run(live, note)
    return result


def audited(live: LiveServer, target: str) -> list[tuple[str, str]]:
    def read(conn: sa.Connection) -> list[tuple[str, str]]:
        query = sa.select(audit_log.c.actor, audit_log.c.action).where(audit_log.c.target == target)
        return [(a, b) for a, b in conn.execute(query.order_by(audit_log.c.id))]

    result: list[tuple[str, str]] = run(live, read)
    return result


def audit_rows(live: LiveServer) -> int:
    return int(run(live, lambda c: c.execute(sa.select(sa.func.count()).select_from(audit_log)).scalar_one()))


def row_of(page: str, first_cell: str) -> str:
    """The table row whose first cell is `first_cell`, or ''."""
    for row in re.findall(r"<tr>.*?</tr>", page, re.S):
        if row.startswith(f"<tr>\n<td>{first_cell}</td>") or row.startswith(f"<tr><td>{first_cell}</td>"):
            return str(row)
    return ""


def counted(live: LiveServer, partner: str, counts: dict[str, int]) -> None:
    """The partner's demand_stats in REPORT_HOUR, as the workers' flushes leave them."""
    rows = [{"partner": partner, "hour": REPORT_HOUR, "metric": m, "count": n} for m, n in counts.items()]
    run(live, lambda c: c.execute(sa.insert(demand_stats), rows))


def post(http: httpx.Client, path: str, page: str = DEMAND, **data: str) -> httpx.Response:
    return http.post(path, data={"csrf_token": csrf_of(http.get(page).text), **data})


def test_a_trafficker_adds_a_partner_through_the_form_and_sees_it_listed_and_audited(
    console_live: LiveServer,
) -> None:
    http = signed_in(console_live, "trafficker")
    form = {
        "name": "dsp-form",
        "endpoint": ENDPOINT,
        "timeout_ms": "200",
        "floor_cpm": "1.5",
        "currency": "EUR",
        "auction": "second",
        "max_qps": "50",
        "venues": "venue-1",
        "auto_approve": "on",
        "status": "active",
    }
    made = post(http, f"{DEMAND}/partners", **form)
    assert made.status_code == 303 and made.headers["location"] == DEMAND
    row = row_of(http.get(DEMAND).text, "dsp-form")
    for shown in (ENDPOINT, "active", "200 ms", "1.50 EUR", "second price", ">50<", "venue-1", ">yes<"):
        assert shown in row, shown
    assert console_live.keys
    api = httpx.get(
        f"{console_live.url}/api/v1/demand/partners/dsp-form",
        headers={"Ssp-Key": console_live.keys.production_admin},
    ).json()
    assert {k: api[k] for k in ("timeout_ms", "floor_cpm", "currency", "auction", "max_qps", "venues")} == {
        "timeout_ms": 200,
        "floor_cpm": 1.5,
        "currency": "EUR",
        "auction": "second",
        "max_qps": 50,
        "venues": ["venue-1"],
    }
    assert api["auto_approve"] is True
    assert audited(console_live, "demand partner dsp-form") == [
        (ROLE_EMAILS["trafficker"], "demand_partner.create")
    ]
    log = http.get("/console/production/audit").text
    assert "demand_partner.create" in log and "demand partner dsp-form" in log


def test_a_bad_endpoint_shows_the_apis_error_next_to_its_field_and_stores_nothing(
    console_live: LiveServer,
) -> None:
    assert console_live.keys
    http = signed_in(console_live, "admin")
    before = audit_rows(console_live)
    answer = post(http, f"{DEMAND}/partners", name="dsp-bad", endpoint="ftp://bidder.example.test/")
    api = httpx.post(
        f"{console_live.url}/api/v1/demand/partners",
        headers={"Ssp-Key": console_live.keys.production_admin},
        json={"name": "dsp-bad", "endpoint": "ftp://bidder.example.test/"},
    )
    assert api.status_code == 400 and api.json()["error"]["field"] == "endpoint"
    assert answer.status_code == 200
    shown = re.search(
        r'name="endpoint" value="ftp://bidder.example.test/"[^>]*aria-invalid="true">\s*'
        r'(?:<small>[^<]*</small>\s*)?<span class="field-error" role="alert">([^<]*)</span>',
        answer.text,
    )
    assert shown and html.unescape(shown.group(1)) == api.json()["error"]["message"]
    assert 'name="name" value="dsp-bad"' in answer.text
    assert row_of(http.get(DEMAND).text, "dsp-bad") == ""
    assert audit_rows(console_live) == before


def test_a_partner_is_paused_resumed_and_removed_each_audited_as_the_api_audits_it(
    console_live: LiveServer,
) -> None:
    http = signed_in(console_live, "trafficker")
    assert post(http, f"{DEMAND}/partners", name="dsp-life", endpoint=ENDPOINT).status_code == 303
    bid(console_live, "dsp-life", "life-1")
    paused = post(http, f"{DEMAND}/partners/dsp-life/status", status="paused")
    assert paused.status_code == 303
    row = row_of(http.get(DEMAND).text, "dsp-life")
    assert 'class="badge paused"' in row and 'aria-label="Resume dsp-life"' in row
    assert post(http, f"{DEMAND}/partners/dsp-life/status", status="active").status_code == 303
    row = row_of(http.get(DEMAND).text, "dsp-life")
    assert 'class="badge active"' in row and 'aria-label="Pause dsp-life"' in row
    assert "Removes dsp-life and its creatives" in row  # the confirmation, folded under "Remove…"
    assert post(http, f"{DEMAND}/partners/dsp-life/remove").status_code == 303
    assert row_of(http.get(DEMAND).text, "dsp-life") == ""
    assert "life-1" not in http.get(f"{DEMAND}/creatives?status=all").text
    who = ROLE_EMAILS["trafficker"]
    assert audited(console_live, "demand partner dsp-life") == [
        (who, "demand_partner.create"),
        (who, "demand_partner.update"),
        (who, "demand_partner.update"),
        (who, "demand_partner.delete"),
    ]
    gone = post(http, f"{DEMAND}/partners/dsp-life/remove")
    assert gone.status_code == 200 and "no demand partner &#39;dsp-life&#39;" in gone.text


def test_a_viewer_sees_the_demand_pages_without_forms_or_buttons_and_a_post_is_refused(
    console_live: LiveServer,
) -> None:
    add_partner(console_live, "dsp-view")
    creative = bid(console_live, "dsp-view", "view-1")
    http = signed_in(console_live, "viewer")
    for page in ("", "/creatives", "/report"):
        answer = http.get(DEMAND + page)
        assert answer.status_code == 200, page
        assert "/demand/partners" not in answer.text and "/approve" not in answer.text
        assert set(re.findall(r"<button[^>]*>([^<]*)</button>", answer.text)) <= {"Sign out", "Show report"}
    assert "view-1" in http.get(f"{DEMAND}/creatives").text
    before = audit_rows(console_live)
    for path, data in (
        ("/partners", {"name": "dsp-viewer", "endpoint": ENDPOINT}),
        ("/partners/dsp-view/status", {"status": "paused"}),
        ("/partners/dsp-view/remove", {}),
        (f"/creatives/{creative}/approve", {}),
        (f"/creatives/{creative}/reject", {}),
    ):
        answer = post(http, DEMAND + path, **data)
        assert answer.status_code == 403, path
        assert "Your role (viewer) cannot do this" in answer.text
    assert audit_rows(console_live) == before
    assert 'class="badge active"' in row_of(http.get(DEMAND).text, "dsp-view")
    assert "view-1" in http.get(f"{DEMAND}/creatives?status=pending").text


def test_creatives_are_approved_and_rejected_from_the_queue_and_a_rejection_is_final(
    console_live: LiveServer,
) -> None:
    add_partner(console_live, "dsp-queue")
    good, bad = bid(console_live, "dsp-queue", "queue-good"), bid(console_live, "dsp-queue", "queue-bad")
    http = signed_in(console_live, "trafficker")
    queue = http.get(f"{DEMAND}/creatives").text  # pending, unless asked otherwise
    assert 'aria-current="page">pending<' in queue
    assert "queue-good" in queue and "queue-bad" in queue and "brand.example" in queue
    assert "A rejection is final" in queue
    approved = post(http, f"{DEMAND}/creatives/{good}/approve?status=pending", f"{DEMAND}/creatives")
    assert approved.status_code == 303 and approved.headers["location"].endswith("/creatives?status=pending")
    rejected = post(http, f"{DEMAND}/creatives/{bad}/reject", f"{DEMAND}/creatives")
    assert rejected.status_code == 303
    pending = http.get(f"{DEMAND}/creatives?status=pending").text
    assert "queue-good" not in pending and "queue-bad" not in pending
    shown = http.get(f"{DEMAND}/creatives?status=approved").text
    assert "queue-good" in shown and ROLE_EMAILS["trafficker"] in shown and "queue-bad" not in shown
    assert "queue-bad" in http.get(f"{DEMAND}/creatives?status=rejected").text
    again = post(http, f"{DEMAND}/creatives/{bad}/approve", f"{DEMAND}/creatives")
    assert (
        again.status_code == 200 and f"demand creative {bad} was rejected; a rejection is final" in again.text
    )
    assert "queue-bad" in http.get(f"{DEMAND}/creatives?status=rejected").text
    who = ROLE_EMAILS["trafficker"]
    assert audited(console_live, f"demand creative {good}") == [(who, "demand_creative.approve")]
    assert audited(console_live, f"demand creative {bad}") == [(who, "demand_creative.reject")]


def test_the_preview_answers_the_stored_vast_to_a_signed_in_user_only(console_live: LiveServer) -> None:
    add_partner(console_live, "dsp-preview")
    creative = bid(console_live, "dsp-preview", "preview-1")
    by_nurl = bid(console_live, "dsp-preview", "preview-2", adm=None, nurl="https://dsp.example.test/vast")
    http = signed_in(console_live, "viewer")
    url = f"{DEMAND}/creatives/{creative}/preview"
    assert f'href="{url}"' in http.get(f"{DEMAND}/creatives").text
    answer = http.get(url)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/xml")
    assert answer.headers["content-security-policy"] == "sandbox; default-src 'none'"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.content == VAST.encode()
    missing = http.get(f"{DEMAND}/creatives/{by_nurl}/preview")
    assert missing.status_code == 409 and "no_stored_markup" in missing.text
    assert http.get(f"{DEMAND}/creatives/999999/preview").status_code == 404
    with httpx.Client(base_url=console_live.url) as signed_out:
        assert signed_out.get(url).status_code == 303


def test_the_demand_report_shows_a_known_partner_hour_and_downloads_it_as_the_apis_csv(
    console_live: LiveServer,
) -> None:
    counted(console_live, "dsp-report", {"requests": 40, "bids": 10, "no_bids": 30})
    http = signed_in(console_live, "viewer")
    query = "from=2026-03-01&to=2026-03-01&timezone=Europe%2FBerlin"
    page = http.get(f"{DEMAND}/report?{query}").text
    hour = re.search(r"<tr><td>dsp-report</td><td>2026-03-01T11:00:00\+01:00</td>(.*?)</tr>", page)
    assert hour, page
    assert re.findall(r'<td class="num">([^<]*)</td>', hour.group(1))[:4] == ["40", "10", "25.0%", "30"]
    total = re.search(r"<tr><td>dsp-report</td><td class=\"num\">40</td>", page)
    assert total
    assert f'href="/console/production/demand/report.csv?{html.escape(query)}"' in page
    download = http.get(f"{DEMAND}/report.csv?{query}")
    assert download.status_code == 200
    assert download.headers["content-type"].startswith("text/csv")
    assert "attachment" in download.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(download.text)))
    assert [(r["partner"], r["hour"], r["requests"], r["bids"]) for r in rows] == [
        ("dsp-report", "2026-03-01T11:00:00+01:00", "40", "10")
    ]
    assert console_live.keys
    api = httpx.get(
        f"{console_live.url}/api/v1/reports/demand",
        headers={"Ssp-Key": console_live.keys.production_admin},
        params={"from": "1772323200", "to": "1772409600", "timezone": "Europe/Berlin", "format": "csv"},
    )
    assert api.status_code == 200 and api.content == download.content
    assert "Notices dropped, by reason" not in page  # none dropped: no table of them
    bad = http.get(f"{DEMAND}/report?from=2026-03-01&to=2026-03-01&timezone=Not%2FAZone").text
    assert re.search(r'name="timezone" value="Not/AZone"[^>]*aria-invalid="true"', bad)


def test_notice_hosts_and_a_credential_header_are_set_in_the_form_and_only_the_headers_name_is_shown(
    console_live: LiveServer,
) -> None:
    http = signed_in(console_live, "trafficker")
    form = {
        "name": "dsp-creds",
        "endpoint": ENDPOINT,
        "notice_hosts": "Win.Example., 10.0.0.7:8080",
        "auth_header_name": "X-Api-Key",
        "auth_header_value": "s3cret-console",
    }
    assert post(http, f"{DEMAND}/partners", **form).status_code == 303
    row = row_of(http.get(DEMAND).text, "dsp-creds")
    assert "10.0.0.7:8080, win.example" in row
    assert "<code>X-Api-Key</code> header set" in row
    assert console_live.keys
    api = httpx.get(
        f"{console_live.url}/api/v1/demand/partners/dsp-creds",
        headers={"Ssp-Key": console_live.keys.production_admin},
    )
    assert api.json()["auth_header"] == "X-Api-Key" and api.json()["notice_hosts"] == [
        "10.0.0.7:8080",
        "win.example",
    ]
    stored = run(
        console_live,
        lambda c: c.execute(
            sa.select(demand_partners.c.auth_header_value).where(demand_partners.c.name == "dsp-creds")
        ).scalar_one(),
    )
    assert stored == "s3cret-console"
    viewer = signed_in(console_live, "viewer")
    for page in (viewer.get(DEMAND).text, http.get(DEMAND).text, http.get("/console/production/audit").text):
        assert "s3cret-console" not in page
    assert "X-Api-Key" in viewer.get(DEMAND).text


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"endpoint": "https://user:s3cret-console@bidder.example.test/"}, "endpoint"),
        ({"endpoint": ENDPOINT, "notice_hosts": "ok.example, https://bad.example/"}, "notice_hosts"),
        (
            {"endpoint": ENDPOINT, "auth_header_name": "Host", "auth_header_value": "s3cret-console"},
            "auth_header",
        ),
        ({"endpoint": ENDPOINT, "auth_header_value": "s3cret-console"}, "auth_header"),
    ],
)
def test_credentials_in_the_endpoint_or_a_bad_header_are_refused_and_the_secret_is_never_shown_again(
    console_live: LiveServer, data: dict[str, str], field: str
) -> None:
    http = signed_in(console_live, "admin")
    before = audit_rows(console_live)
    answer = post(http, f"{DEMAND}/partners", name="dsp-refused", **data)
    assert answer.status_code == 200
    assert 'aria-invalid="true"' in answer.text and 'class="field-error"' in answer.text
    assert "s3cret-console" not in answer.text
    assert 'name="name" value="dsp-refused"' in answer.text
    assert row_of(http.get(DEMAND).text, "dsp-refused") == ""
    assert audit_rows(console_live) == before
    if field == "endpoint":
        assert "invalid_endpoint" in answer.text or "no user name or password" in answer.text


def test_notices_dropped_are_shown_per_partner_in_the_report_and_its_csv(console_live: LiveServer) -> None:
    counted(
        console_live, "dsp-notices", {"requests": 5, "notice:notice_host": 3, "notice:notice_too_long": 1}
    )
    http = signed_in(console_live, "viewer")
    query = "from=2026-03-01&to=2026-03-01"
    page = http.get(f"{DEMAND}/report?{query}").text
    assert '<th class="num">Notices dropped</th>' in page
    by_reason = re.search(r'aria-label="Notices dropped by reason">(.*?)</table>', page, re.S)
    assert by_reason, page
    row = re.search(r"<tr><td>dsp-notices</td>(.*?)</tr>", by_reason.group(1))
    assert row and re.findall(r'<td class="num">([^<]*)</td>', row.group(1)) == ["0", "3", "1", "0", "0"]
    rows = [r for r in csv.DictReader(io.StringIO(http.get(f"{DEMAND}/report.csv?{query}").text))]
    (mine,) = [r for r in rows if r["partner"] == "dsp-notices"]
    assert (mine["notices_dropped"], mine["notices_dropped_host"], mine["notices_dropped_too_long"]) == (
        "4",
        "3",
        "1",
    )


def test_each_environment_has_its_own_partners(console_live: LiveServer) -> None:
    http = signed_in(console_live, "admin")
    sandbox = "/console/sandbox/demand"
    made = post(http, f"{sandbox}/partners", sandbox, name="dsp-sandbox", endpoint=ENDPOINT)
    assert made.status_code == 303 and made.headers["location"] == sandbox
    assert row_of(http.get(sandbox).text, "dsp-sandbox")
    assert row_of(http.get(DEMAND).text, "dsp-sandbox") == ""
    assert run(console_live, lambda c: get_partner(c, "dsp-sandbox"), "sandbox").endpoint == ENDPOINT


@pytest.fixture(scope="module")
def chromium_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The pages do not depend on the backend (the HTTP tests run both): SQLite here, as the console's other
    browser tests."""
    require_browser()
    server, schemas = start_console_server(tmp_path_factory.mktemp("demand-browser"), "sqlite")
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture()
def browser(chromium_live: LiveServer) -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        made = Browser(playwright, chromium_live)
        try:
            yield made
            made.assert_clean()
        finally:
            made.close()


@pytest.mark.browser
def test_a_trafficker_adds_a_partner_pauses_it_and_approves_its_creative_in_chromium(
    browser: Browser, chromium_live: LiveServer
) -> None:
    from playwright.sync_api import expect

    page = browser.page
    browser.sign_in("trafficker")
    nav(page, "Demand")
    expect(page.get_by_role("heading", name="Demand partners")).to_be_visible()
    page.fill("input[name=name]", "dsp-chrome")
    page.fill("input[name=endpoint]", "not a url")
    page.get_by_role("button", name="Add partner").click()
    expect(page.locator("label.invalid", has=page.locator("input[name=endpoint]"))).to_be_visible()
    page.fill("input[name=endpoint]", ENDPOINT)
    page.fill("input[name=floor_cpm]", "2.25")
    page.get_by_role("button", name="Add partner").click()
    row = page.get_by_role("row", name="dsp-chrome")
    expect(row).to_contain_text("2.25 USD")
    expect(row.locator(".badge")).to_have_text("active")

    row.get_by_role("button", name="Pause dsp-chrome").click()
    row = page.get_by_role("row", name="dsp-chrome")
    expect(row.locator(".badge")).to_have_text("paused")
    expect(row.get_by_role("button", name="Resume dsp-chrome")).to_be_visible()

    creative = bid(chromium_live, "dsp-chrome", "chrome-1")
    page.get_by_role("navigation", name="Demand").get_by_role("link", name="Creatives").click()
    queued = page.get_by_role("row", name="chrome-1")
    expect(queued).to_contain_text("brand.example")
    expect(queued.get_by_role("link", name="Preview the VAST of chrome-1")).to_have_attribute(
        "href", f"/console/production/demand/creatives/{creative}/preview"
    )
    queued.get_by_text("Reject…").click()
    expect(queued.get_by_text("A rejection is final")).to_be_visible()
    queued.get_by_role("button", name="Approve chrome-1").click()
    expect(page.get_by_text("No pending demand creatives.")).to_be_visible()
    page.get_by_role("navigation", name="Status").get_by_role("link", name="approved").click()
    approved = page.get_by_role("row", name="chrome-1")
    expect(approved.locator(".badge")).to_have_text("approved")
    expect(approved).to_contain_text(ROLE_EMAILS["trafficker"])

    page.get_by_role("navigation", name="Demand").get_by_role("link", name="Report").click()
    expect(page.get_by_role("heading", name="Demand report")).to_be_visible()
    nav(page, "Audit")
    expect(page.get_by_text("demand_creative.approve").first).to_be_visible()
    expect(page.get_by_text("demand_partner.update").first).to_be_visible()
