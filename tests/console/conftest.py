"""A live adslot with console users of every role, for the console's HTTP and browser tests."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from adslot.console import users
from adslot.environment import transact
from adslot.storage.database import make_engine
from tests.conftest import LiveServer, drop_schemas, start_server

PASSWORD = "a long enough password"
ROLE_EMAILS = {"admin": "admin@example.com", "trafficker": "ads@example.com", "viewer": "viewer@example.com"}


def create_users(live: LiveServer) -> None:
    engine = make_engine(live.settings.environment("production"))
    try:
        for role, email in ROLE_EMAILS.items():
            transact(engine, lambda c, e=email, r=role: users.create_user(c, e, r, PASSWORD), write=True)
    finally:
        engine.dispose()


def start_console_server(tmp: object, backend: str, **env: str) -> tuple[LiveServer, list[str]]:
    server, schemas = start_server(tmp, backend, **env)  # type: ignore[arg-type]
    create_users(server)
    return server, schemas


@pytest.fixture(scope="module")
def console_live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server, schemas = start_console_server(tmp_path_factory.mktemp("console"), backend)
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where browser tests save screenshots: ADSLOT_CONSOLE_SCREENSHOTS (docs/console for the docs'), else a
    temporary folder."""
    folder = os.environ.get("ADSLOT_CONSOLE_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("console-shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no CSRF token"
    return found.group(1)


def signed_in(live: LiveServer, role: str) -> httpx.Client:
    """An HTTP client signed in to the console as the user of `role`, through the sign-in form."""
    http = httpx.Client(base_url=live.url, timeout=30)
    page = http.get("/console/sign-in")
    assert page.status_code == 200
    answer = http.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(page.text), "email": ROLE_EMAILS[role], "password": PASSWORD},
    )
    assert answer.status_code == 303, answer.text
    return http
