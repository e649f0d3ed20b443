"""The creative approval queue through the management API: admin keys list it (with an absolute preview URL
each), preview the stored VAST, approve and reject, per environment; bad ids and filters are a 4xx with a code
and the field, never a 500; every decision is in the audit log; the OpenAPI document describes the five
operations."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from adslot.audit import entries
from adslot.demand.creatives_repository import note_creative
from adslot.demand.repository import get_partner
from adslot.environment import transact
from adslot.storage.database import make_engine
from tests.conftest import LiveServer

PARTNERS = "/api/v1/demand/partners"
CREATIVES = "/api/v1/demand/creatives"
ENDPOINT = "https://bidder.example.test/openrtb"
VAST = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<VAST version="2.0"><Ad id="é-1"><InLine>'
    "<AdSystem>dsp</AdSystem><AdTitle>Café &amp; co</AdTitle></InLine></Ad></VAST>"
)
NOW = 1_800_000_000


def admin(live: LiveServer, env: str = "production") -> dict[str, str]:
    assert live.keys
    return {"Ssp-Key": live.keys.production_admin if env == "production" else live.keys.sandbox_admin_only}


def bid(
    live: LiveServer,
    http: httpx.Client,
    partner: str,
    crid: str,
    *,
    adm: str | None = VAST,
    nurl: str | None = None,
    env: str = "production",
    auto_approve: bool = False,
) -> str:
    """A partner (created if new) and one creative noted as the auction is to note it; its status."""
    base = live.url if env == "production" else live.sandbox_url
    body = {"name": partner, "endpoint": ENDPOINT, "auto_approve": auto_approve}
    http.post(f"{base}{PARTNERS}", headers=admin(live, env), json=body)
    engine = make_engine(live.settings.environment(env))
    try:
        return transact(
            engine,
            lambda c: note_creative(c, get_partner(c, partner), crid, ["brand.example"], adm, nurl, NOW),
            write=True,
        )
    finally:
        engine.dispose()


def listed(live: LiveServer, http: httpx.Client, **params: str) -> list[dict[str, Any]]:
    answer = http.get(f"{live.url}{CREATIVES}", headers=admin(live), params=params)
    assert answer.status_code == 200, answer.text
    creatives: list[dict[str, Any]] = answer.json()
    return creatives


def one(live: LiveServer, http: httpx.Client, partner: str) -> dict[str, Any]:
    [creative] = listed(live, http, partner=partner)
    return creative


def test_a_new_creative_is_listed_pending_with_an_absolute_preview_url(
    live: LiveServer, http: httpx.Client
) -> None:
    assert bid(live, http, "queue", "cr-1") == "pending"
    creative = one(live, http, "queue")
    assert creative == {
        "id": creative["id"],
        "partner": "queue",
        "crid": "cr-1",
        "adomain": ["brand.example"],
        "nurl": None,
        "has_markup": True,
        "status": "pending",
        "first_seen_at": NOW,
        "decided_at": None,
        "decided_by": None,
        "preview_url": f"{live.url}{CREATIVES}/{creative['id']}/preview",
    }
    assert creative in listed(live, http, status="pending")
    assert creative not in listed(live, http, status="approved")
    got = http.get(f"{live.url}{CREATIVES}/{creative['id']}", headers=admin(live))
    assert got.status_code == 200 and got.json() == creative


def test_the_preview_answers_the_stored_vast_as_xml(live: LiveServer, http: httpx.Client) -> None:
    bid(live, http, "preview", "cr-1")
    preview = http.get(one(live, http, "preview")["preview_url"], headers=admin(live))
    assert preview.status_code == 200
    assert preview.headers["content-type"] == "application/xml; charset=utf-8"
    assert preview.content == VAST.encode()
    assert preview.headers["cache-control"] == "no-store"
    assert preview.headers["x-content-type-options"] == "nosniff"
    assert preview.headers["content-security-policy"] == "sandbox; default-src 'none'"


def test_the_preview_of_a_creative_bid_by_nurl_is_a_409_naming_the_nurl(
    live: LiveServer, http: httpx.Client
) -> None:
    nurl = "https://bidder.example.test/vast?id=42"
    bid(live, http, "by-nurl", "cr-1", adm=None, nurl=nurl)
    creative = one(live, http, "by-nurl")
    assert (creative["nurl"], creative["has_markup"]) == (nurl, False)
    answer = http.get(creative["preview_url"], headers=admin(live))
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == ("no_stored_markup", "id") and nurl in error["message"]


def test_approving_and_rejecting_are_answered_audited_and_a_rejection_is_final(
    live: LiveServer, http: httpx.Client
) -> None:
    bid(live, http, "decide", "cr-1")
    creative = one(live, http, "decide")
    url = f"{live.url}{CREATIVES}/{creative['id']}"
    approved = http.post(f"{url}/approve", headers=admin(live))
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "approved"
    assert approved.json()["decided_by"].startswith("api key ")
    again = http.post(f"{url}/approve", headers=admin(live))
    assert again.status_code == 200 and again.json() == approved.json()
    assert bid(live, http, "decide", "cr-1") == "approved"

    rejected = http.post(f"{url}/reject", headers=admin(live))
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    refused = http.post(f"{url}/approve", headers=admin(live))
    assert refused.status_code == 409
    assert (refused.json()["error"]["code"], refused.json()["error"]["field"]) == ("creative_rejected", "id")
    assert http.get(url, headers=admin(live)).json()["status"] == "rejected"
    assert bid(live, http, "decide", "cr-1") == "rejected", "a rejected creative is never played again"

    engine = make_engine(live.settings.environment("production"))
    try:
        logged = [e for e in transact(engine, entries) if e.target == f"demand creative {creative['id']}"]
    finally:
        engine.dispose()
    assert [e.action for e in logged] == [
        "demand_creative.reject",
        "demand_creative.approve",
        "demand_creative.approve",
    ]
    assert all(e.actor.startswith("api key ") for e in logged)
    assert [(c.field, c.before, c.after) for c in logged[0].changes() if c.field == "status"] == [
        ("status", '"approved"', '"rejected"')
    ]


def test_an_auto_approved_partners_creative_is_listed_approved(live: LiveServer, http: httpx.Client) -> None:
    assert bid(live, http, "trusted", "cr-1", auto_approve=True) == "approved"
    assert one(live, http, "trusted")["status"] == "approved"


def test_removing_a_partner_removes_its_creatives_from_the_queue(
    live: LiveServer, http: httpx.Client
) -> None:
    bid(live, http, "leaving", "cr-1")
    creative_id = one(live, http, "leaving")["id"]
    assert http.delete(f"{live.url}{PARTNERS}/leaving", headers=admin(live)).status_code == 204
    assert creative_id not in [c["id"] for c in listed(live, http)]
    assert http.get(f"{live.url}{CREATIVES}/{creative_id}", headers=admin(live)).status_code == 404


def test_the_sandbox_and_production_keep_separate_queues(live: LiveServer, http: httpx.Client) -> None:
    bid(live, http, "sbx-dsp", "cr-1", env="sandbox")
    answer = http.get(f"{live.sandbox_url}{CREATIVES}", headers=admin(live, "sandbox"))
    assert answer.status_code == 200
    [creative] = [c for c in answer.json() if c["partner"] == "sbx-dsp"]
    assert creative["preview_url"].startswith(f"{live.sandbox_url}{CREATIVES}/")
    assert "sbx-dsp" not in [c["partner"] for c in listed(live, http)]
    refused = http.get(creative["preview_url"], headers=admin(live))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "wrong_environment"
    preview = http.get(creative["preview_url"], headers=admin(live, "sandbox"))
    assert preview.status_code == 200 and preview.content == VAST.encode()


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("get", ""), ("get", "/1"), ("get", "/1/preview"), ("post", "/1/approve"), ("post", "/1/reject")],
)
def test_the_queue_needs_an_admin_key(live: LiveServer, http: httpx.Client, method: str, suffix: str) -> None:
    assert live.keys
    url = f"{live.url}{CREATIVES}{suffix}"
    assert http.request(method, url).json()["error"]["code"] == "missing_api_key"
    refused = http.request(method, url, headers={"Ssp-Key": live.keys.production})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "insufficient_scope"


@pytest.mark.parametrize(
    ("method", "suffix", "params", "status", "code", "field"),
    [
        ("get", "", {"status": "waiting"}, 400, "invalid_field", "status"),
        ("get", "", {"status": ""}, 400, "invalid_field", "status"),
        ("get", "", {"partner": "nobody"}, 404, "partner_not_found", "partner"),
        ("get", "/424242", {}, 404, "creative_not_found", "id"),
        ("get", "/424242/preview", {}, 404, "creative_not_found", "id"),
        ("post", "/424242/approve", {}, 404, "creative_not_found", "id"),
        ("post", "/424242/reject", {}, 404, "creative_not_found", "id"),
        ("get", "/0", {}, 400, "invalid_field", "creative_id"),
        ("post", "/0/approve", {}, 400, "invalid_field", "creative_id"),
        ("get", "/2147483648", {}, 400, "invalid_field", "creative_id"),
        ("post", "/99999999999999999999/reject", {}, 400, "invalid_field", "creative_id"),
    ],
)
def test_a_bad_id_or_filter_is_a_4xx_with_its_code_and_field(
    live: LiveServer,
    http: httpx.Client,
    method: str,
    suffix: str,
    params: dict[str, str],
    status: int,
    code: str,
    field: str,
) -> None:
    answer = http.request(method, f"{live.url}{CREATIVES}{suffix}", headers=admin(live), params=params)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == (code, field) and error["message"]


@pytest.mark.parametrize("suffix", ["/abc", "/-1", "/1.5/approve", "/abc/preview", "/1/publish"])
def test_a_path_that_names_no_creative_is_a_4xx_with_a_code_never_a_500(
    live: LiveServer, http: httpx.Client, suffix: str
) -> None:
    for method in ("get", "post"):
        answer = http.request(method, f"{live.url}{CREATIVES}{suffix}", headers=admin(live))
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.json()["error"]["code"]


def test_the_openapi_document_describes_the_creative_operations(live: LiveServer, http: httpx.Client) -> None:
    document = http.get(f"{live.url}/openapi.json").json()
    paths = document["paths"]
    operations = {
        "listDemandCreatives": paths[CREATIVES]["get"],
        "getDemandCreative": paths[f"{CREATIVES}/{{creative_id}}"]["get"],
        "previewDemandCreative": paths[f"{CREATIVES}/{{creative_id}}/preview"]["get"],
        "approveDemandCreative": paths[f"{CREATIVES}/{{creative_id}}/approve"]["post"],
        "rejectDemandCreative": paths[f"{CREATIVES}/{{creative_id}}/reject"]["post"],
    }
    for operation_id, operation in operations.items():
        assert operation["operationId"] == operation_id
        assert operation["security"] == [{"SspKey": []}]
        assert {"400", "401", "403", "404"} <= set(operation["responses"])
    assert "409" in operations["approveDemandCreative"]["responses"]
    assert "application/xml" in operations["previewDemandCreative"]["responses"]["200"]["content"]
    status = next(p for p in operations["listDemandCreatives"]["parameters"] if p["name"] == "status")
    assert "pending" in str(status["schema"])
    creative = document["components"]["schemas"]["DemandCreative"]
    assert {"preview_url", "status", "crid", "partner"} <= set(creative["required"])
