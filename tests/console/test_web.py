"""What every console answer carries: its security headers and no-store, error pages included, since their
body holds the user's email and a CSRF token."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import httpx
from litestar import Request, get
from litestar.params import PathParameter
from litestar.testing import TestClient

from adslot.console.app import build_console
from adslot.console.web import ROOT, SECURITY_HEADERS, SHARED
from adslot.inventory.csv_import import MAX_CSV_BYTES
from tests.conftest import LiveServer
from tests.console.conftest import ROLE_EMAILS, csrf_of, signed_in


def assert_guarded(answer: httpx.Response, status: int) -> None:
    assert answer.status_code == status, answer.text[:300]
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers.get(name) == value, (status, name, answer.headers.get(name))
    assert answer.headers["cache-control"] == "no-store"


def test_every_console_error_page_carries_the_security_headers_and_no_store(console_live: LiveServer) -> None:
    viewer = signed_in(console_live, "viewer")
    token = csrf_of(viewer.get("/console/production/").text)
    assert_guarded(viewer.get("/console/production/no-such-page"), 404)
    unknown = viewer.get("/console/production/campaigns/999999")
    assert_guarded(unknown, 404)
    assert (
        ROLE_EMAILS["viewer"] in unknown.text and token in unknown.text
    )  # what no-store keeps out of caches
    assert_guarded(viewer.get("/console/nowhere/venues"), 404)
    role = viewer.post(
        "/console/production/venues/new", data={"csrf_token": token, "venue_id": "v", "name": "V"}
    )
    assert_guarded(role, 403)
    assert_guarded(viewer.post("/console/production/venues/new", data={"venue_id": "v", "name": "V"}), 403)
    assert_guarded(viewer.put("/console/production/venues", content=b"x"), 405)
    huge = b"x" * (MAX_CSV_BYTES + 128 * 1024)
    too_large = viewer.post(
        "/console/production/venues/import",
        content=huge,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_guarded(too_large, 413)
    assert_guarded(viewer.get("/console/production/"), 200)
    assert_guarded(httpx.get(f"{console_live.url}/console/sign-in"), 200)
    static = httpx.get(f"{console_live.url}/console/static/console.css")
    assert static.status_code == 200 and static.headers["cache-control"] == "public, max-age=3600"
    assert static.headers["x-content-type-options"] == "nosniff"


def test_a_console_page_that_fails_answers_500_with_the_security_headers_and_no_store(
    console_live: LiveServer,
) -> None:
    assert console_live.app is not None

    @get(ROOT + "/static/failing/{name:str}", include_in_schema=False, sync_to_thread=False)
    def failing(request: Request[Any, Any, Any], name: Annotated[str, PathParameter()]) -> str:
        raise RuntimeError(f"a page that fails: {name}")

    app = build_console(console_live.app.environments)
    app.register(failing)
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get(ROOT + "/static/failing/now")
    assert answer.status_code == 500 and "Something went wrong" in answer.text
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers.get(name) == value, name


def test_a_share_link_page_that_fails_is_logged_without_its_token(
    console_live: LiveServer, caplog: Any
) -> None:
    assert console_live.app is not None

    @get(SHARED + "/production/{token:str}/failing", include_in_schema=False, sync_to_thread=False)
    def failing(request: Request[Any, Any, Any], token: Annotated[str, PathParameter()]) -> str:
        raise RuntimeError("a shared page that fails")

    app = build_console(console_live.app.environments)
    app.register(failing)
    with (
        caplog.at_level(logging.WARNING, logger="adslot.console"),
        TestClient(app, raise_server_exceptions=False) as client,
    ):
        answer = client.get(SHARED + "/production/adslot_share_SECRETTOKEN/failing")
    assert answer.status_code == 500
    logged = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert logged == ["console: GET /console/shared/production/(token) failed"]
    assert not any("SECRETTOKEN" in r.getMessage() for r in caplog.records)
