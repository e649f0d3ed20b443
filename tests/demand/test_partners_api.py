"""Demand partners through the management API: admin keys list, create, read, change, pause, resume and
remove them, per environment; bad input is a 4xx with a code and the offending field, never a 500; every
change is in the audit log; the OpenAPI document describes the five operations."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from adslot.audit import entries
from adslot.environment import transact
from adslot.storage.database import make_engine
from tests.conftest import PROD_VENUE, LiveServer

PARTNERS = "/api/v1/demand/partners"
ENDPOINT = "https://bidder.example.test/openrtb"


def admin(live: LiveServer) -> dict[str, str]:
    assert live.keys
    return {"Ssp-Key": live.keys.production_admin}


def test_a_partner_is_created_read_changed_paused_resumed_and_removed(
    live: LiveServer, http: httpx.Client
) -> None:
    url = f"{live.url}{PARTNERS}"
    body = {
        "name": "life",
        "endpoint": ENDPOINT,
        "floor_cpm": 1.5,
        "auction": "second",
        "venues": [PROD_VENUE],
    }
    made = http.post(url, headers=admin(live), json=body)
    assert made.status_code == 201, made.text
    partner = made.json()
    assert partner | {"id": 0, "created_at": 0} == {
        "id": 0,
        "name": "life",
        "endpoint": ENDPOINT,
        "timeout_ms": 150,
        "floor_cpm": 1.5,
        "currency": "USD",
        "auction": "second",
        "max_qps": None,
        "venues": [PROD_VENUE],
        "auto_approve": False,
        "status": "active",
        "created_at": 0,
        "deals": [],
        "blocked_domains": [],
        "notice_hosts": [],
        "auth_header": None,
    }
    assert http.get(f"{url}/life", headers=admin(live)).json() == partner
    assert partner in http.get(url, headers=admin(live)).json()

    changed = http.patch(
        f"{url}/life",
        headers=admin(live),
        json={"floor_cpm": 2.25, "timeout_ms": 400, "venues": None, "max_qps": 25, "auto_approve": True},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json() == partner | {
        "floor_cpm": 2.25,
        "timeout_ms": 400,
        "venues": None,
        "max_qps": 25,
        "auto_approve": True,
    }
    for status in ("paused", "active"):
        answer = http.patch(f"{url}/life", headers=admin(live), json={"status": status})
        assert answer.status_code == 200 and answer.json()["status"] == status

    gone = http.delete(f"{url}/life", headers=admin(live))
    assert gone.status_code == 204 and gone.content == b""
    missing = http.get(f"{url}/life", headers=admin(live))
    assert missing.status_code == 404
    assert missing.json()["error"] | {"message": ""} == {
        "code": "partner_not_found",
        "message": "",
        "field": "name",
    }


def test_every_change_is_in_the_audit_log_with_the_key_as_the_actor(
    live: LiveServer, http: httpx.Client
) -> None:
    url = f"{live.url}{PARTNERS}"
    assert (
        http.post(url, headers=admin(live), json={"name": "audited", "endpoint": ENDPOINT}).status_code == 201
    )
    assert http.patch(f"{url}/audited", headers=admin(live), json={"status": "paused"}).status_code == 200
    assert http.delete(f"{url}/audited", headers=admin(live)).status_code == 204
    engine = make_engine(live.settings.environment("production"))
    try:
        logged = [e for e in transact(engine, entries) if e.target == "demand partner audited"]
    finally:
        engine.dispose()
    assert [e.action for e in logged] == [
        "demand_partner.delete",
        "demand_partner.update",
        "demand_partner.create",
    ]
    assert all(e.actor.startswith("api key ") for e in logged)
    delete, update, _ = logged
    assert delete.before is not None and delete.after is None
    assert [(c.field, c.before, c.after) for c in update.changes()] == [("status", '"active"', '"paused"')]


def test_the_sandbox_and_production_keep_separate_partners(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys
    sandbox = {"Ssp-Key": live.keys.sandbox_admin_only}
    made = http.post(
        f"{live.sandbox_url}{PARTNERS}", headers=sandbox, json={"name": "sbx", "endpoint": ENDPOINT}
    )
    assert made.status_code == 201, made.text
    assert "sbx" in [p["name"] for p in http.get(f"{live.sandbox_url}{PARTNERS}", headers=sandbox).json()]
    assert "sbx" not in [p["name"] for p in http.get(f"{live.url}{PARTNERS}", headers=admin(live)).json()]
    assert http.get(f"{live.url}{PARTNERS}/sbx", headers=admin(live)).status_code == 404
    refused = http.get(f"{live.url}{PARTNERS}", headers=sandbox)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "wrong_environment"


def test_partners_need_an_admin_key(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys
    url = f"{live.url}{PARTNERS}"
    assert http.get(url).json()["error"]["code"] == "missing_api_key"
    refused = http.post(
        url, headers={"Ssp-Key": live.keys.production}, json={"name": "x", "endpoint": ENDPOINT}
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "insufficient_scope"


VALID = {"name": "bad", "endpoint": ENDPOINT}


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        (VALID | {"name": "Upper"}, 400, "invalid_field", "name"),
        (VALID | {"name": "has space"}, 400, "invalid_field", "name"),
        (VALID | {"name": "n" * 65}, 400, "invalid_field", "name"),
        (VALID | {"endpoint": "ftp://bidder.test/"}, 400, "invalid_field", "endpoint"),
        (VALID | {"endpoint": "bidder.test/openrtb"}, 400, "invalid_field", "endpoint"),
        (VALID | {"endpoint": "https://bidder.test:70000/"}, 400, "invalid_field", "endpoint"),
        (VALID | {"endpoint": 5}, 400, "invalid_field", "endpoint"),
        (VALID | {"timeout_ms": 9}, 400, "invalid_field", "timeout_ms"),
        (VALID | {"timeout_ms": 2001}, 400, "invalid_field", "timeout_ms"),
        (VALID | {"timeout_ms": "150"}, 400, "invalid_field", "timeout_ms"),
        (VALID | {"floor_cpm": -0.01}, 400, "invalid_field", "floor_cpm"),
        (VALID | {"floor_cpm": 0.1234567}, 400, "invalid_field", "floor_cpm"),
        (VALID | {"currency": "usd"}, 400, "invalid_field", "currency"),
        (VALID | {"currency": "XYZ"}, 400, "invalid_field", "currency"),
        (VALID | {"auction": "third"}, 400, "invalid_field", "auction"),
        (VALID | {"max_qps": 0}, 400, "invalid_field", "max_qps"),
        (VALID | {"venues": []}, 400, "invalid_field", "venues"),
        (VALID | {"venues": [PROD_VENUE, "nowhere"]}, 422, "unknown_venue", "venues[1]"),
        (VALID | {"auto_approve": "yes"}, 400, "invalid_field", "auto_approve"),
        (VALID | {"status": "archived"}, 400, "invalid_field", "status"),
    ],
)
def test_a_bad_partner_is_refused_with_its_code_and_field(
    live: LiveServer, http: httpx.Client, body: dict[str, Any], status: int, code: str, field: str
) -> None:
    answer = http.post(f"{live.url}{PARTNERS}", headers=admin(live), json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == (code, field) and error["message"]
    assert http.get(f"{live.url}{PARTNERS}/bad", headers=admin(live)).status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body", "member"),
    [
        ("post", PARTNERS, {"endpoint": ENDPOINT}, "name"),
        ("post", PARTNERS, VALID | {"bidfloor": 1}, "bidfloor"),
        ("patch", f"{PARTNERS}/{PROD_VENUE}", {"name": "renamed"}, "name"),
    ],
)
def test_a_missing_or_unknown_member_is_a_400_that_names_it(
    live: LiveServer, http: httpx.Client, method: str, path: str, body: dict[str, Any], member: str
) -> None:
    """As for every management body (errors.invalid_value): the member is named in the message."""
    answer = http.request(method, f"{live.url}{path}", headers=admin(live), json=body)
    assert answer.status_code == 400, answer.text
    assert (
        answer.json()["error"]["code"] == "invalid_body"
        and f"`{member}`" in answer.json()["error"]["message"]
    )


def test_a_second_partner_of_the_same_name_is_a_409(live: LiveServer, http: httpx.Client) -> None:
    url = f"{live.url}{PARTNERS}"
    assert (
        http.post(url, headers=admin(live), json={"name": "twice", "endpoint": ENDPOINT}).status_code == 201
    )
    again = http.post(url, headers=admin(live), json={"name": "twice", "endpoint": ENDPOINT + "/2"})
    assert again.status_code == 409
    assert (again.json()["error"]["code"], again.json()["error"]["field"]) == ("partner_exists", "name")
    assert http.get(f"{url}/twice", headers=admin(live)).json()["endpoint"] == ENDPOINT


@pytest.mark.parametrize(
    ("method", "name", "body", "status", "code", "field"),
    [
        ("patch", "nobody", {"status": "paused"}, 404, "partner_not_found", "name"),
        ("delete", "nobody", None, 404, "partner_not_found", "name"),
        ("patch", "patched", {"status": "stopped"}, 400, "invalid_field", "status"),
        ("patch", "patched", {"endpoint": None}, 400, "invalid_field", "endpoint"),
        ("patch", "patched", {"endpoint": "mailto:x@y.z"}, 400, "invalid_field", "endpoint"),
        ("patch", "patched", {"venues": ["nowhere"]}, 422, "unknown_venue", "venues[0]"),
        ("patch", "patched", {"timeout_ms": 0}, 400, "invalid_field", "timeout_ms"),
        ("patch", "patched", [], 400, "invalid_body", None),
    ],
)
def test_a_bad_change_is_refused_with_its_code_and_field_and_changes_nothing(
    live: LiveServer,
    http: httpx.Client,
    method: str,
    name: str,
    body: Any,
    status: int,
    code: str,
    field: str | None,
) -> None:
    url = f"{live.url}{PARTNERS}"
    http.post(url, headers=admin(live), json={"name": "patched", "endpoint": ENDPOINT})
    before = http.get(f"{url}/patched", headers=admin(live)).json()
    answer = http.request(method, f"{url}/{name}", headers=admin(live), json=body)
    assert answer.status_code == status, answer.text
    assert (answer.json()["error"]["code"], answer.json()["error"]["field"]) == (code, field)
    assert http.get(f"{url}/patched", headers=admin(live)).json() == before


def test_the_openapi_document_describes_the_partner_operations(live: LiveServer, http: httpx.Client) -> None:
    document = http.get(f"{live.url}/openapi.json").json()
    item, one = document["paths"][PARTNERS], document["paths"][f"{PARTNERS}/{{name}}"]
    operations = {
        "listDemandPartners": item["get"],
        "createDemandPartner": item["post"],
        "getDemandPartner": one["get"],
        "updateDemandPartner": one["patch"],
        "deleteDemandPartner": one["delete"],
    }
    for operation_id, operation in operations.items():
        assert operation["operationId"] == operation_id
        assert operation["security"] == [{"SspKey": []}]
        assert {"400", "401", "403"} <= set(operation["responses"])
    assert {"409", "422"} <= set(item["post"]["responses"]) and "404" in one["delete"]["responses"]
    assert "204" in one["delete"]["responses"]
    schemas = document["components"]["schemas"]
    created = schemas["PartnerIn"]
    assert set(created["required"]) == {"name", "endpoint"}
    assert created["properties"]["timeout_ms"]["minimum"] == 10
    assert created["properties"]["auction"]["enum"] == ["first", "second"]


def test_notice_hosts_and_a_credential_header_are_set_and_only_the_headers_name_is_answered(
    live: LiveServer, http: httpx.Client
) -> None:
    url = f"{live.url}{PARTNERS}"
    body = {
        "name": "creds",
        "endpoint": ENDPOINT,
        "notice_hosts": ["Win.Example.", "[::1]:9000"],
        "auth_header": {"name": "Authorization", "value": "Bearer s3cret-token"},
    }
    made = http.post(url, headers=admin(live), json=body)
    assert made.status_code == 201, made.text
    assert made.json()["notice_hosts"] == ["[::1]:9000", "win.example"]
    assert made.json()["auth_header"] == "Authorization"
    read = http.get(f"{url}/creds", headers=admin(live))
    listed = http.get(url, headers=admin(live))
    patched = http.patch(f"{url}/creds", headers=admin(live), json={"notice_hosts": []})
    assert patched.json()["notice_hosts"] == [] and patched.json()["auth_header"] == "Authorization"
    cleared = http.patch(f"{url}/creds", headers=admin(live), json={"auth_header": None})
    assert cleared.json()["auth_header"] is None
    engine = make_engine(live.settings.environment("production"))
    try:
        logged = transact(engine, entries)
    finally:
        engine.dispose()
    for answer in (made, read, listed, patched, cleared):
        assert "s3cret" not in answer.text
    assert "s3cret" not in repr([(e.before, e.after) for e in logged])


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"endpoint": "https://user:s3cret@bidder.example.test/"}, "invalid_endpoint", "endpoint"),
        ({"endpoint": "https://s3cret@bidder.example.test:99999/"}, "invalid_endpoint", "endpoint"),
        ({"notice_hosts": ["ok.example", "https://x.example/"]}, "invalid_field", "notice_hosts[1]"),
        ({"notice_hosts": ["h.example:0"]}, "invalid_field", "notice_hosts[0]"),
        ({"notice_hosts": ["h" * 300]}, "invalid_field", "notice_hosts[0]"),
        ({"auth_header": {"name": "Host", "value": "s3cret"}}, "invalid_field", "auth_header.name"),
        ({"auth_header": {"name": "Bad Name", "value": "s3cret"}}, "invalid_field", "auth_header.name"),
        (
            {"auth_header": {"name": "X-Key", "value": "s3cret\r\nX-Evil: 1"}},
            "invalid_field",
            "auth_header.value",
        ),
        ({"auth_header": {"name": "X-Key"}}, "invalid_field", "auth_header"),  # `value` is missing
    ],
)
def test_credentials_in_the_endpoint_and_bad_notice_hosts_or_headers_are_refused_without_echo(
    live: LiveServer, http: httpx.Client, change: dict[str, Any], code: str, field: str
) -> None:
    url, name = f"{live.url}{PARTNERS}", f"dsp-{uuid.uuid4().hex[:8]}"
    made = http.post(url, headers=admin(live), json={"name": name, "endpoint": ENDPOINT} | change)
    assert made.status_code == 400, made.text
    assert (made.json()["error"]["code"], made.json()["error"]["field"]) == (code, field)
    assert "s3cret" not in made.text
    assert http.post(url, headers=admin(live), json={"name": name, "endpoint": ENDPOINT}).status_code == 201
    patched = http.patch(f"{url}/{name}", headers=admin(live), json=change)
    assert patched.status_code == 400 and patched.json()["error"]["field"] == field
    assert "s3cret" not in patched.text
    assert http.get(f"{url}/{name}", headers=admin(live)).json()["endpoint"] == ENDPOINT
