"""The alerts API: webhooks (checked URLs, a secret shown once), the environment's settings, the history."""

from __future__ import annotations

import httpx

from tests.conftest import LiveServer


def admin(live: LiveServer) -> dict[str, str]:
    assert live.keys is not None
    return {"Ssp-Key": live.keys.production_admin_only}


def test_a_webhook_gets_its_secret_once_and_internal_or_odd_urls_are_refused(
    http: httpx.Client, live: LiveServer
) -> None:
    url = f"{live.url}/api/v1/alerts/webhooks"
    made = http.post(url, json={"url": "https://alerts.example.com/adslot"}, headers=admin(live))
    assert made.status_code == 201, made.text
    secret = made.json()["secret"]
    assert len(secret) == 64
    listed = http.get(url, headers=admin(live)).json()
    assert [w["url"] for w in listed] == ["https://alerts.example.com/adslot"]
    assert all(w["secret"] is None for w in listed), "the secret is never shown again"
    for bad, code in (
        ("http://127.0.0.1:9000/hook", "internal_address"),
        ("http://[::1]/hook", "internal_address"),
        ("http://10.1.2.3/hook", "internal_address"),
        ("http://169.254.169.254/latest", "internal_address"),
        ("http://localhost/hook", "internal_address"),
        ("ftp://alerts.example.com/", "invalid_field"),
        ("https://user:pw@alerts.example.com/", "invalid_endpoint"),
    ):
        refused = http.post(url, json={"url": bad}, headers=admin(live))
        assert refused.status_code == 400, (bad, refused.text)
        assert refused.json()["error"]["code"] == code and refused.json()["error"]["field"] == "url", bad
    removed = http.delete(f"{url}/{listed[0]['id']}", headers=admin(live))
    assert removed.status_code == 204
    assert http.get(url, headers=admin(live)).json() == []
    assert http.delete(f"{url}/{listed[0]['id']}", headers=admin(live)).status_code == 404


def test_alert_settings_are_the_environments_own_and_checked(http: httpx.Client, live: LiveServer) -> None:
    url = f"{live.url}/api/v1/alerts/settings"
    start = http.get(url, headers=admin(live)).json()
    assert start["silent_seconds"] == start["silent_seconds_default"] == 900
    changed = http.post(
        url,
        json={"silent_minutes": 5, "not_playing_share": 0.25, "emails": ["ops@example.com"]},
        headers=admin(live),
    ).json()
    assert (changed["silent_seconds"], changed["not_playing_share"], changed["emails"]) == (
        300,
        0.25,
        ["ops@example.com"],
    )
    for body, field in (
        ({"silent_minutes": 0}, "silent_minutes"),
        ({"not_playing_share": 1.5}, "not_playing_share"),
        ({"emails": ["not an address"]}, "emails[0]"),
    ):
        refused = http.post(url, json=body, headers=admin(live))
        assert refused.status_code == 400 and refused.json()["error"]["field"] == field, refused.text
    back = http.post(url, json={}, headers=admin(live)).json()
    assert back["silent_seconds"] == 900 and back["emails"] == ["ops@example.com"]
    assert http.get(f"{live.url}/api/v1/alerts", headers=admin(live)).json() == {"alerts": [], "attempts": []}
