"""Screen alerts end to end: a real `adslot serve` (and a second node on PostgreSQL), a webhook receiver and
an SMTP server on loopback (requiring STARTTLS, verified against the test's CA, and a login), with the
silence threshold and the check interval set short."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import BACKENDS, eventually, free_port
from tests.console.conftest import csrf_of
from tests.fleet.receiver import Receiver
from tests.fleet.smtp import PASSWORD, USER, Mailbox, make_certificates, tls_server
from tests.served import Server, cli, served_setup

pytestmark = pytest.mark.slow("subprocess")  # adslot serve, a webhook receiver and an SMTP server

SILENT = 3
CHECK_MS = 200
WINDOW = 4
"""The not_playing window, seconds."""
WITHIN = SILENT + CHECK_MS / 1000
SLACK = 4.0
"""What a loaded machine (two cores shared by several suites) adds to a look and a delivery."""


CONSOLE_EMAIL = "ops@example.test"
CONSOLE_PASSWORD = "console pass 42 for the alerts page"


@dataclass
class Watched:
    server: Server
    key: str
    admin: str
    secret: str
    receiver: Receiver
    mailbox: Mailbox
    backend: str
    asked_at: dict[tuple[str, str], float] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        return {"Ssp-Key": self.admin}

    def venue(self, venue_id: str, hours: dict[str, list[str]] | None = None) -> None:
        made = httpx.post(
            f"{self.server.url}/api/v1/venues",
            json={"venue_id": venue_id, "name": venue_id.title(), "timezone": "Europe/Paris"},
            headers=self.headers(),
        )
        assert made.status_code == 201, made.text
        if hours is not None:
            url = f"{self.server.url}/api/v1/venues/{venue_id}/hours"
            assert httpx.post(url, json={"hours": hours}, headers=self.headers()).status_code == 200

    def ask(self, venue: str, screen: str, client: httpx.Client | None = None) -> dict[str, Any]:
        post = client.post if client else httpx.post
        answer = post(
            f"{self.server.url}/api/v1/ad/request?format=json",
            json={"venue_id": venue, "screen_id": screen, "play_time": int(time.time()) + 5},
            headers={"Ssp-Key": self.key},
            timeout=30,
        )
        assert answer.status_code in (200, 204), answer.text  # 204: no ad for it (a request all the same)
        self.asked_at[venue, screen] = time.time()
        data: dict[str, Any] = answer.json()["data"] if answer.status_code == 200 else {}
        return data

    def fire(self, asked: dict[str, Any]) -> None:
        fired = httpx.get(
            f"{self.server.url}/api/v1/ad/callback/",
            params={"ad_request_uuid": asked["ad_request_uuid"], "layer": "wrapper"},
        )
        assert fired.status_code in (200, 204), fired.text

    def alerts(self, venue: str) -> list[dict[str, Any]]:
        """What the receiver got for `venue`, each checked against the webhook's secret."""
        for received in self.receiver.all():
            assert received.signed_by(self.secret), received
        return self.receiver.alerts(venue)


def start_watched(backend: str, tmp: Path) -> Iterator[Watched]:
    receiver = Receiver().up()
    certificates = make_certificates(tmp)
    smtp, mailbox = tls_server(certificates)
    setup = served_setup(backend, tmp)
    server, key, _ = next(setup)
    server.environ |= {
        "ADSLOT_SCREEN_SILENT_SECONDS": str(SILENT),
        "ADSLOT_SCREEN_CHECK_MS": str(CHECK_MS),
        "ADSLOT_SCREEN_NOT_PLAYING_SECONDS": str(WINDOW),
        "ADSLOT_ALERT_WEBHOOKS_ALLOW_PRIVATE": "1",
        "ADSLOT_SMTP_HOST": "127.0.0.1",
        "ADSLOT_SMTP_PORT": str(smtp.port),
        "ADSLOT_SMTP_STARTTLS": "1",
        "ADSLOT_SMTP_CA_FILE": str(certificates.ca),
        "ADSLOT_SMTP_USER": USER,
        "ADSLOT_SMTP_PASSWORD": PASSWORD,
    }
    admin = cli(server.environ, "keys", "create", "--account", "ops", "--scope", "admin").strip()
    command = ("users", "create", "--email", CONSOLE_EMAIL, "--role", "admin", "--password-stdin")
    subprocess.run(
        [sys.executable, "-m", "adslot.cli", *command],
        env=server.environ,
        input=CONSOLE_PASSWORD + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=120,
    )
    server.start()
    try:
        hook = httpx.post(
            f"{server.url}/api/v1/alerts/webhooks", json={"url": receiver.url}, headers={"Ssp-Key": admin}
        )
        assert hook.status_code == 201, hook.text
        mails = httpx.post(
            f"{server.url}/api/v1/alerts/settings",
            json={"emails": ["ops@example.test"]},
            headers={"Ssp-Key": admin},
        )
        assert mails.status_code == 200, mails.text
        yield Watched(server, key, admin, hook.json()["secret"], receiver, mailbox, backend)
    finally:
        next(setup, None)
        receiver.down()
        smtp.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def watched(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    yield from start_watched(str(request.param), tmp_path_factory.mktemp("watched"))


def kinds(alerts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(kind, event) of each notice of the first alert, in arrival order; no notice arrived twice. (A
    screen that asked again to clear an alert falls silent again after the test: a new episode.)"""
    sent = [(a["alert_id"], a["event"]) for a in alerts]
    assert len(sent) == len(set(sent)), f"a notice arrived twice: {sent}"
    return [(a["kind"], a["event"]) for a in alerts if a["alert_id"] == alerts[0]["alert_id"]]


def test_a_screen_that_stops_raises_one_alert_in_time_and_one_recovery_when_it_asks_again(
    watched: Watched,
) -> None:
    watched.venue("quiet")
    watched.ask("quiet", "s1")
    stopped = watched.asked_at["quiet", "s1"]
    assert eventually(lambda: watched.alerts("quiet") != [], timeout=WITHIN + SLACK + 5)
    arrived = time.time()
    assert arrived - stopped <= WITHIN + SLACK, f"the alert took {arrived - stopped:.1f} s"
    time.sleep(5 * CHECK_MS / 1000)  # several looks more: none repeats it
    alerts = watched.alerts("quiet")
    assert kinds(alerts) == [("screen_silent", "raised")]
    assert alerts[0]["screen_id"] == "s1" and alerts[0]["since"] <= stopped

    watched.ask("quiet", "s1")
    assert eventually(lambda: len(watched.alerts("quiet")) == 2, timeout=SLACK + 5)
    time.sleep(5 * CHECK_MS / 1000)
    assert kinds(watched.alerts("quiet")) == [("screen_silent", "raised"), ("screen_silent", "cleared")]
    # The same two notices by email, over STARTTLS with a login; the password is in no log line and in no
    # answer of the API or the console.
    assert eventually(
        lambda: sum("quiet" in str(m.get_payload()) for m in watched.mailbox.messages) == 2, timeout=SLACK + 5
    )
    assert set(watched.mailbox.sessions) == {(True, True)}  # over TLS, logged in
    assert PASSWORD not in watched.server.log.read_text(errors="replace")
    shown = [watched.server.log.read_text(errors="replace")]
    for path in ("/api/v1/alerts", "/api/v1/alerts/settings", "/api/v1/alerts/webhooks", "/api/v1/screens"):
        answer = httpx.get(f"{watched.server.url}{path}", headers=watched.headers())
        assert answer.status_code == 200, (path, answer.text)
        shown.append(answer.text)
    with httpx.Client(base_url=watched.server.url, timeout=30) as console:
        page = console.get("/console/sign-in")
        signed = console.post(
            "/console/sign-in",
            data={"csrf_token": csrf_of(page.text), "email": CONSOLE_EMAIL, "password": CONSOLE_PASSWORD},
        )
        assert signed.status_code == 303, signed.text
        for path in ("/console/production/alerts", "/console/production/screens"):
            answer = console.get(path)
            assert answer.status_code == 200 and "quiet" in answer.text.lower(), path
            shown.append(answer.text)
    assert not [text for text in shown if PASSWORD in text]


def test_a_screen_silent_while_its_venue_is_closed_raises_nothing_and_shows_closed(watched: Watched) -> None:
    watched.venue("shut", hours={})  # closed every day
    watched.ask("shut", "s1")
    time.sleep(SILENT + 10 * CHECK_MS / 1000)
    assert watched.alerts("shut") == []
    listing = httpx.get(
        f"{watched.server.url}/api/v1/screens", params={"venue_id": "shut"}, headers=watched.headers()
    ).json()
    assert [s["status"] for s in listing["screens"]] == ["closed"]


def test_fifty_screens_of_a_venue_stopping_at_once_raise_one_venue_alert(watched: Watched) -> None:
    watched.venue("mall")
    with httpx.Client(timeout=30) as client, ThreadPoolExecutor(10) as pool:
        list(pool.map(lambda n: watched.ask("mall", f"s{n:02d}", client), range(50)))
    assert eventually(lambda: watched.alerts("mall") != [], timeout=WITHIN + SLACK + 5)
    time.sleep(SILENT + 5 * CHECK_MS / 1000)
    alerts = watched.alerts("mall")
    assert kinds(alerts) == [("venue_dark", "raised")], alerts
    assert alerts[0]["screen_id"] is None


def test_alerts_owed_while_the_receiver_is_down_and_adslot_killed_all_arrive_once_in_order(
    watched: Watched,
) -> None:
    watched.venue("outage")
    watched.receiver.down()
    try:
        watched.ask("outage", "s1")

        def raised_and_tried() -> bool:
            history = httpx.get(f"{watched.server.url}/api/v1/alerts", headers=watched.headers()).json()
            ours = [a["id"] for a in history["alerts"] if a["venue_id"] == "outage"]
            return bool(ours) and any(
                t["alert_id"] in ours and not t["ok"] and t["channel"] == "webhook"
                for t in history["attempts"]
            )

        assert eventually(raised_and_tried, timeout=WITHIN + SLACK + 5)
        watched.server.kill()
        watched.server.start()
        watched.ask("outage", "s1")  # recovers while the receiver is still down
        time.sleep(10 * CHECK_MS / 1000)
        assert watched.alerts("outage") == []
    finally:
        watched.receiver.up()
    assert eventually(lambda: len(watched.alerts("outage")) >= 2, timeout=MAX_WAIT)
    time.sleep(5 * CHECK_MS / 1000)
    assert kinds(watched.alerts("outage")) == [("screen_silent", "raised"), ("screen_silent", "cleared")]


MAX_WAIT = 40.0
"""Enough for the outbox's backoff (1, 2, 4, 8 ... s) to try again after the receiver comes back."""


def test_a_player_that_gets_ads_and_plays_none_raises_not_playing_then_recovers_when_it_plays(
    watched: Watched,
) -> None:
    # "lobby" is the one venue with a campaign (served_setup): its screen gets ads.
    deadline = time.monotonic() + 3 * WINDOW + SLACK + 10
    while time.monotonic() < deadline and not watched.alerts("lobby"):
        watched.ask("lobby", "broken")  # asks, never fires an impression
        time.sleep(0.5)
    assert kinds(watched.alerts("lobby")) == [("not_playing", "raised")]
    deadline = time.monotonic() + 3 * WINDOW + SLACK + 10
    while time.monotonic() < deadline and len(watched.alerts("lobby")) < 2:
        watched.fire(watched.ask("lobby", "broken"))
        time.sleep(0.5)
    assert kinds(watched.alerts("lobby")) == [("not_playing", "raised"), ("not_playing", "cleared")]


def test_two_nodes_on_one_postgresql_send_each_alert_once(watched: Watched) -> None:
    if watched.backend != "postgres":
        pytest.skip("several nodes share one database on PostgreSQL")
    other = Server(dict(watched.server.environ), free_port())
    other.start()
    try:
        watched.venue("twin")
        watched.ask("twin", "s1")
        assert eventually(lambda: watched.alerts("twin") != [], timeout=WITHIN + SLACK + 5)
        watched.ask("twin", "s1")
        assert eventually(lambda: len(watched.alerts("twin")) >= 2, timeout=SLACK + 5)
        time.sleep(10 * CHECK_MS / 1000)
        assert kinds(watched.alerts("twin")) == [("screen_silent", "raised"), ("screen_silent", "cleared")]
    finally:
        other.kill()
