"""`adslot screens player-link` and `adslot venues player-settings`: a link per screen whose key may only ask
for ads, and the venue's player settings, from the shell."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from adslot.auth.keys import hash_key
from adslot.cli import main
from adslot.player import links, venue_settings
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from adslot.storage.tables import api_keys
from tests.conftest import BACKENDS, cli_databases, drop_schemas

Run = Callable[..., str]


@pytest.fixture(params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(main, list(args))
        assert result.exit_code == (0 if ok else 2), result.output
        return result.output

    yield invoke
    if schemas:
        drop_schemas(schemas)


def test_a_player_link_holds_a_new_key_for_the_screen_that_may_only_ask_for_ads(run: Run) -> None:
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
    run("venues", "add-screen", "--venue-id", "lobby", "--screen-id", "s1")
    link = run("screens", "player-link", "--venue-id", "lobby", "--screen-id", "s1").splitlines()[0]
    assert link.startswith("http://127.0.0.1:8000/player/#key=ssp_live_")
    assert link.endswith("&venue=lobby&screen=s1")
    key = link.split("#key=", 1)[1].split("&", 1)[0]
    engine = make_engine(load_settings().environment("production"))
    with engine.connect() as conn:
        scopes = conn.execute(
            sa.select(api_keys.c.scopes).where(api_keys.c.key_hash == hash_key(key))
        ).scalar()
        states = links.player_states(conn)
    engine.dispose()
    assert scopes == "ad_request"
    assert states == {("lobby", "s1"): "on"}
    sandbox = run(
        "screens", "player-link", "--env", "sandbox", "--venue-id", "lobby", "--screen-id", "s1", ok=False
    )
    assert "unknown_screen" in sandbox  # the sandbox has its own inventory
    assert "unknown_screen" in run(
        "screens", "player-link", "--venue-id", "lobby", "--screen-id", "s9", ok=False
    )


def test_a_venues_player_settings_are_checked_and_stored(run: Run) -> None:
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
    stored = json.loads(
        run(
            "venues",
            "player-settings",
            "--venue-id",
            "lobby",
            "--slot-seconds",
            "10",
            "--fallback-url",
            "/h.png",
        )
    )
    assert stored == {
        "venue_id": "lobby",
        "slot_seconds": 10,
        "lead_seconds": 30,
        "fallback_urls": ["/h.png"],
    }
    engine = make_engine(load_settings().environment("production"))
    with engine.connect() as conn:
        assert venue_settings.read(conn, "lobby").slot_seconds == 10
        assert venue_settings.read(conn, "elsewhere") == venue_settings.PlayerSettings()
    engine.dispose()
    assert "out_of_range" in run(
        "venues", "player-settings", "--venue-id", "lobby", "--lead-seconds", "0", ok=False
    )
    assert "invalid_url" in run(
        "venues", "player-settings", "--venue-id", "lobby", "--fallback-url", "javascript:x", ok=False
    )
    assert "unknown_venue" in run("venues", "player-settings", "--venue-id", "nowhere", ok=False)
