"""The console over HTTP, on SQLite and PostgreSQL: sign-in and its cookie, throttling, CSRF on every
change, roles, the API's own validation in forms, and the audit log."""

from __future__ import annotations

import html
import logging
import re

import httpx
import pytest
import sqlalchemy as sa

from adslot.console.app import ROUTES
from adslot.console.users import FREE_FAILURES
from adslot.storage.database import make_engine
from adslot.storage.tables import audit_log, venues
from tests.conftest import LiveServer, eventually
from tests.console.conftest import PASSWORD, ROLE_EMAILS, csrf_of, signed_in

PAGES = ["", "venues", "campaigns", "reports", "play-log", "keys", "health", "forecast", "users", "audit"]
CHANGES = [
    ("venues/new", {"venue_id": "v-csrf", "name": "CSRF"}),
    ("venues/import", {}),
    ("advertisers", {"name": "Adv"}),
    ("campaigns/new", {"name": "x"}),
    ("keys", {"account": "acct", "scope": "ad_request"}),
    ("users", {"email": "new@example.com", "role": "viewer", "password": PASSWORD}),
]


def rows(live: LiveServer, table: sa.Table, env: str = "production") -> int:
    engine = make_engine(live.settings.environment(env))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
    finally:
        engine.dispose()


def test_every_page_but_sign_in_redirects_there_when_signed_out(console_live: LiveServer) -> None:
    with httpx.Client(base_url=console_live.url) as http:
        for env in ("production", "sandbox"):
            for page in PAGES:
                answer = http.get(f"/console/{env}/{page}")
                assert answer.status_code == 303, page
                assert answer.headers["location"].startswith("/console/sign-in?next=%2Fconsole%2F")
        assert http.get("/console/sign-in").status_code == 200


def test_the_session_cookie_is_httponly_lax_and_secure_behind_https(console_live: LiveServer) -> None:
    for proto, secure in (("http", False), ("https", True)):
        with httpx.Client(base_url=console_live.url) as http:
            page = http.get("/console/sign-in", headers={"x-forwarded-proto": proto})
            # A Secure cookie is not sent back over plain HTTP: send it as a browser on HTTPS would.
            token = csrf_of(page.text)
            answer = http.post(
                "/console/sign-in",
                headers={"x-forwarded-proto": proto, "cookie": f"adslot_console_csrf={token}"},
                data={"csrf_token": csrf_of(page.text), "email": ROLE_EMAILS["viewer"], "password": PASSWORD},
            )
            assert answer.status_code == 303
            cookie = next(
                v for k, v in answer.headers.multi_items() if k == "set-cookie" and "adslot_console=" in v
            )
            assert "HttpOnly" in cookie and "samesite=lax" in cookie.lower() and "Path=/console" in cookie
            assert ("Secure" in cookie) is secure


def test_sign_out_ends_the_session_on_the_server(console_live: LiveServer) -> None:
    http = signed_in(console_live, "viewer")
    token = http.cookies["adslot_console"]
    page = http.get("/console/production/")
    assert page.status_code == 200
    assert http.post("/console/sign-out", data={"csrf_token": csrf_of(page.text)}).status_code == 303
    replay = httpx.get(f"{console_live.url}/console/production/", cookies={"adslot_console": token})
    assert replay.status_code == 303


def test_repeated_failed_sign_ins_lock_the_account_and_are_logged(
    console_live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    email = "locked@example.com"
    admin = signed_in(console_live, "admin")
    page = admin.get("/console/production/users")
    made = admin.post(
        "/console/production/users",
        data={"csrf_token": csrf_of(page.text), "email": email, "role": "viewer", "password": PASSWORD},
    )
    assert made.status_code == 303
    caplog.set_level(logging.WARNING, logger="adslot.console")
    with httpx.Client(base_url=console_live.url) as http:
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
        assert right.status_code == 429 and "try again in" in right.text
    failures = [r for r in caplog.records if "sign-in failed" in r.getMessage() and email in r.getMessage()]
    assert len(failures) == FREE_FAILURES + 2


def test_every_console_post_without_its_csrf_token_is_refused_and_changes_nothing(
    console_live: LiveServer,
) -> None:
    http = signed_in(console_live, "admin")
    before = rows(console_live, venues), rows(console_live, audit_log)
    posts = [r for r in ROUTES if "POST" in r.http_methods]
    assert len(posts) >= 15
    for route in posts:
        path = re.sub(r"\{env_name:str\}", "production", route.paths.copy().pop())
        path = re.sub(r"\{[a-z_]+:int\}", "1", path)
        path = re.sub(r"\{[a-z_]+:str\}", "venue-1", path)
        answer = http.post(path, data={"name": "forged", "status": "paused", "venue_id": "forged"})
        assert answer.status_code == 403, path
        assert "security token" in answer.text
    assert (rows(console_live, venues), rows(console_live, audit_log)) == before


def test_a_viewer_can_read_every_page_and_change_nothing(console_live: LiveServer) -> None:
    http = signed_in(console_live, "viewer")
    for page in PAGES:
        answer = http.get(f"/console/production/{page}")
        assert answer.status_code == 200, page
        assert "Add a venue" not in answer.text and "Create key" not in answer.text
    token = csrf_of(http.get("/console/production/").text)
    before = rows(console_live, venues), rows(console_live, audit_log)
    for path, data in CHANGES:
        answer = http.post(f"/console/production/{path}", data={"csrf_token": token, **data})
        assert answer.status_code == 403, path
        assert "Your role (viewer) cannot do this" in answer.text
    assert (rows(console_live, venues), rows(console_live, audit_log)) == before


def test_a_trafficker_manages_venues_but_not_keys_or_users(console_live: LiveServer) -> None:
    http = signed_in(console_live, "trafficker")
    token = csrf_of(http.get("/console/production/venues/new").text)
    made = http.post(
        "/console/production/venues/new", data={"csrf_token": token, "venue_id": "v-traffic", "name": "Mine"}
    )
    assert made.status_code == 303
    for path, data in CHANGES[-2:]:
        assert http.post(f"/console/production/{path}", data={"csrf_token": token, **data}).status_code == 403


def test_a_bad_venue_form_shows_the_apis_own_error_next_to_its_field_and_stores_nothing(
    console_live: LiveServer,
) -> None:
    assert console_live.keys
    http = signed_in(console_live, "admin")
    token = csrf_of(http.get("/console/production/venues/new").text)
    before = rows(console_live, venues)
    form = {"venue_id": "v-bad", "name": "Bad", "latitude": "91", "timezone": "UTC"}
    answer = http.post("/console/production/venues/new", data={"csrf_token": token, **form})
    api = httpx.post(
        f"{console_live.url}/api/v1/venues",
        headers={"Ssp-Key": console_live.keys.production_admin},
        json={"venue_id": "v-bad", "name": "Bad", "latitude": 91, "timezone": "UTC"},
    )
    assert api.status_code == 400
    assert answer.status_code == 200  # the form again, with the error next to its field
    message = api.json()["error"]["message"]
    assert api.json()["error"]["field"] == "latitude"
    shown = re.search(
        r'name="latitude"[^>]*aria-invalid="true">\s*(?:<small>[^<]*</small>\s*)?'
        r'<span class="field-error" role="alert">([^<]*)</span>',
        answer.text,
    )
    assert shown and html.unescape(shown.group(1)) == message
    assert rows(console_live, venues) == before


def test_each_change_is_audited_with_who_before_and_after_and_never_a_keys_secret(
    console_live: LiveServer,
) -> None:
    http = signed_in(console_live, "admin")
    token = csrf_of(http.get("/console/production/venues/new").text)
    http.post(
        "/console/production/venues/new", data={"csrf_token": token, "venue_id": "v-aud", "name": "Before"}
    )
    http.post(
        "/console/production/venues/v/v-aud", data={"csrf_token": token, "name": "After", "timezone": "UTC"}
    )
    made = http.post(
        "/console/production/keys", data={"csrf_token": token, "account": "aud", "scope": "ad_request"}
    )
    assert made.status_code == 201
    secret = re.search(r'id="new-key">(ssp_live_[0-9a-f]+)<', made.text)
    assert secret
    page = http.get("/console/production/audit").text
    assert "venue.create" in page and "venue.update" in page and "key.create" in page
    assert ROLE_EMAILS["admin"] in page
    assert "&#34;name&#34;: &#34;Before&#34;" in page or "&#34;name&#34;:&#34;Before&#34;" in page
    assert secret.group(1) not in page
    engine = make_engine(console_live.settings.environment("production"))
    with engine.connect() as conn:
        stored = conn.execute(sa.select(audit_log.c.after)).scalars().all()
    engine.dispose()
    assert all(secret.group(1) not in (s or "") for s in stored)


def test_any_role_may_forecast_and_a_bad_proposal_shows_the_apis_error_by_its_field(
    console_live: LiveServer,
) -> None:
    http = signed_in(console_live, "viewer")
    token = csrf_of(http.get("/console/production/forecast").text)
    bad = http.post(
        "/console/production/forecast",
        data={
            "csrf_token": token,
            "advertiser_id": "1",
            "name": "Proposal",
            "start_at": "2027-01-02T00:00",
            "end_at": "2027-01-01T00:00",
            "creative.width": "1920",
            "creative.height": "1080",
            "creative.duration_seconds": "0",
            "creative.mime_type": "video/mp4",
        },
    )
    assert bad.status_code == 200
    assert re.search(r'name="creative.duration_seconds"[^>]*aria-invalid="true"', bad.text)
    assert "Forecast result" not in bad.text
    made = http.post(
        "/console/production/forecast",
        data={"csrf_token": token, "campaign_id": "1", "hours": "2"},
    )
    assert made.status_code == 303 and made.headers["location"].startswith(
        "/console/production/forecast/jobs/"
    )
    job = made.headers["location"]
    assert eventually(lambda: 'aria-label="Forecast result"' in http.get(job).text, timeout=60)
    assert http.get(job + "x").status_code == 404


def test_a_forecast_job_cancelled_says_so_and_an_unknown_one_is_not_found(console_live: LiveServer) -> None:
    http = signed_in(console_live, "viewer")
    token = csrf_of(http.get("/console/production/forecast").text)
    made = http.post(
        "/console/production/forecast",
        data={"csrf_token": token, "campaign_id": "1", "hours": "168", "slot_seconds": "60"},
    )
    job = made.headers["location"]
    running = http.get(job)
    assert 'aria-label="Forecast running"' in running.text and running.headers["refresh"] == "1"
    cancelled = http.post(job + "/cancel", data={"csrf_token": token})
    assert cancelled.status_code == 303
    assert eventually(lambda: "This forecast was cancelled." in http.get(job).text, timeout=60)
    assert 'aria-label="Forecast result"' not in http.get(job).text
    assert http.get("/console/production/forecast/jobs/0123456789abcdef").status_code == 404


def test_a_forecast_job_the_forecast_refuses_shows_the_error_by_its_field(console_live: LiveServer) -> None:
    http = signed_in(console_live, "viewer")
    token = csrf_of(http.get("/console/production/forecast").text)
    made = http.post(
        "/console/production/forecast", data={"csrf_token": token, "campaign_id": "1", "hours": "9999"}
    )
    job = made.headers["location"]
    assert eventually(lambda: "field-error" in http.get(job).text, timeout=60)
    page = http.get(job).text
    assert re.search(r'name="hours"[^>]*aria-invalid="true"', page) and "hours must be 1 to 168" in page
    assert 'aria-label="Forecast result"' not in page and 'aria-label="Forecast running"' not in page


def test_an_admin_sets_a_password_and_disables_a_user_from_the_console_and_their_sessions_end(
    console_live: LiveServer,
) -> None:
    admin = signed_in(console_live, "admin")
    token = csrf_of(admin.get("/console/production/users").text)
    email = "session@example.com"
    made = admin.post(
        "/console/production/users",
        data={"csrf_token": token, "email": email, "role": "viewer", "password": PASSWORD},
    )
    assert made.status_code == 303
    page = admin.get("/console/production/users").text
    found = re.findall(
        r'/console/production/users/(\d+)/disable"[^>]*><input[^>]*><button[^>]*aria-label="Disable ([^"]+)"',
        page,
    )
    ids = {mail: number for number, mail in found}
    assert email in ids, found
    with httpx.Client(base_url=console_live.url) as victim:
        sign_in = victim.get("/console/sign-in")
        victim.post(
            "/console/sign-in",
            data={"csrf_token": csrf_of(sign_in.text), "email": email, "password": PASSWORD},
        )
        assert victim.get("/console/production/").status_code == 200
        short = admin.post(
            f"/console/production/users/{ids[email]}/password",
            data={"csrf_token": token, "password": "short"},
        )
        assert "10 to 1024 characters" in short.text
        assert victim.get("/console/production/").status_code == 200
        reset = admin.post(
            f"/console/production/users/{ids[email]}/password",
            data={"csrf_token": token, "password": "a brand new password"},
        )
        assert f"Password of {email} set" in reset.text
        assert victim.get("/console/production/").status_code == 303
    with httpx.Client(base_url=console_live.url) as again:
        sign_in = again.get("/console/sign-in")
        again.post(
            "/console/sign-in",
            data={"csrf_token": csrf_of(sign_in.text), "email": email, "password": "a brand new password"},
        )
        assert again.get("/console/production/").status_code == 200
        assert (
            admin.post(
                f"/console/production/users/{ids[email]}/disable", data={"csrf_token": token}
            ).status_code
            == 303
        )
        assert again.get("/console/production/").status_code == 303
    assert "session@example.com</td><td>viewer</td>" in admin.get("/console/production/users").text
    assert 'class="badge disabled"' in admin.get("/console/production/users").text


def test_changes_through_the_management_api_are_audited_under_the_keys_id(console_live: LiveServer) -> None:
    assert console_live.keys
    key = console_live.keys.production_admin
    with httpx.Client(base_url=console_live.url, headers={"Ssp-Key": key}) as api:
        assert api.post("/api/v1/venues", json={"venue_id": "v-api", "name": "By API"}).status_code == 201
        assert api.patch("/api/v1/venues/v-api", json={"name": "Renamed by API"}).status_code == 200
        refused = api.post("/api/v1/venues", json={"venue_id": "v-api", "name": "Again"})
        assert refused.status_code == 409
    engine = make_engine(console_live.settings.environment("production"))
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(audit_log.c.actor, audit_log.c.action, audit_log.c.before, audit_log.c.after)
            .where(audit_log.c.target == "venue v-api")
            .order_by(audit_log.c.id)
        ).all()
        key_id = conn.execute(
            sa.text("SELECT id FROM api_keys WHERE prefix = :p"), {"p": key[:13]}
        ).scalar_one()
    engine.dispose()
    assert [(a, act) for a, act, _, _ in found] == [
        (f"api key {key_id}", "venue.create"),
        (f"api key {key_id}", "venue.update"),
    ]
    assert '"By API"' in found[1][2] and '"Renamed by API"' in found[1][3]
    page = signed_in(console_live, "viewer").get("/console/production/audit").text
    assert f"api key {key_id}" in page


OUT_OF_RANGE = ["99999999999999999999", "-1", "1e3", "abc"]


def _console_and_api(live: LiveServer) -> tuple[httpx.Client, str, httpx.Client]:
    """The admin signed in to the console, their CSRF token, and the management API with an admin key."""
    assert live.keys
    http = signed_in(live, "admin")
    token = csrf_of(http.get("/console/production/").text)
    return http, token, httpx.Client(base_url=live.url, headers={"Ssp-Key": live.keys.production_admin})


def _api_error(answer: httpx.Response) -> str:
    error = answer.json()["error"]
    return f"{error['message']} ({error['field']})"


@pytest.mark.parametrize("typed", OUT_OF_RANGE)
def test_a_number_out_of_range_in_a_console_form_shows_the_apis_own_error_never_a_500(
    console_live: LiveServer, typed: str
) -> None:
    http, token, api = _console_and_api(console_live)
    as_json = typed if typed != "abc" else '"abc"'
    before = rows(console_live, audit_log)
    for name in ("advertiser_id", "weight"):
        form = {
            "advertiser_id": "1",
            "name": "Bounds",
            "start_at": "2027-01-01T00:00",
            "end_at": "2027-01-02T00:00",
        }
        shown = http.post(
            "/console/production/campaigns/new", data={"csrf_token": token, **form, name: typed}
        )
        # The same value as JSON text, as a client of the API would send it.
        fields = {"advertiser_id": "1", "name": '"Bounds"', "start_at": "1798761600", "end_at": "1798848000"}
        body = "{" + ", ".join(f'"{k}": {v}' for k, v in (fields | {name: as_json}).items()) + "}"
        answered = api.post("/api/v1/campaigns", content=body, headers={"Content-Type": "application/json"})
        assert answered.status_code in (400, 422), answered.text
        # The form shown again, as every console form with an error is, with the API's very error.
        assert shown.status_code == 200, (name, shown.status_code)
        assert html.escape(_api_error(answered), quote=False) in shown.text.replace("&#96;", "`")
    assert rows(console_live, audit_log) == before


@pytest.mark.parametrize("typed", [*OUT_OF_RANGE, "2147483648"])
def test_an_id_out_of_range_in_a_console_path_answers_what_the_api_answers(
    console_live: LiveServer, typed: str
) -> None:
    http, token, api = _console_and_api(console_live)
    expected = api.get(f"/api/v1/campaigns/{typed}").status_code
    assert expected in (400, 404)
    for path in (f"campaigns/{typed}", f"campaigns/{typed}/edit", f"demand/creatives/{typed}/preview"):
        assert http.get(f"/console/production/{path}").status_code == expected, path
    for path in (f"campaigns/{typed}/status", f"keys/{typed}/revoke", f"users/{typed}/disable"):
        answer = http.post(f"/console/production/{path}", data={"csrf_token": token, "status": "paused"})
        assert answer.status_code == expected, path
    forecast = http.post("/console/production/forecast", data={"csrf_token": token, "campaign_id": typed})
    assert forecast.status_code == 200 and "pick a campaign (campaign_id)" in forecast.text
    assert http.get(f"/console/production/audit?before={typed}").status_code == 200
