"""The CLI: keys printed once, listed by prefix only, revocable; inventory and campaigns from the shell."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from adslot.auth.keys import hash_key
from adslot.cli import main
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from adslot.storage.tables import api_keys


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ADSLOT_DATA_DIR", str(tmp_path))
    for name in ("ADSLOT_DATABASE_URL", "ADSLOT_SANDBOX_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(main, list(args))
        assert (result.exit_code == 0) == ok, result.output
        return result.output

    return invoke


def test_keys_are_shown_once_stored_hashed_listed_by_prefix_and_revocable(run) -> None:  # type: ignore[no-untyped-def]
    live = run("keys", "create", "--env", "production", "--account", "acme").splitlines()[0]
    test = run("keys", "create", "--env", "sandbox", "--account", "acme", "--scope", "admin").splitlines()[0]
    assert live.startswith("ssp_live_") and len(live) == 41
    assert test.startswith("ssp_test_")
    engine = make_engine(load_settings().environment("production"))
    with engine.connect() as conn:
        stored = conn.execute(sa.select(api_keys.c.key_hash, api_keys.c.prefix)).all()
    engine.dispose()
    assert [(h, p) for h, p in stored] == [(hash_key(live), live[:13])]
    listed = json.loads(run("keys", "list", "--env", "production"))
    assert listed[0]["prefix"] == live[:13] and live not in json.dumps(listed)
    assert listed[0]["scopes"] == ["ad_request"] and listed[0]["revoked_at"] is None
    run("keys", "revoke", "--env", "production", str(listed[0]["id"]))
    assert json.loads(run("keys", "list", "--env", "production"))[0]["revoked_at"] is not None
    assert "no active key" in run("keys", "revoke", "--env", "production", str(listed[0]["id"]), ok=False)


def test_inventory_and_campaigns_from_the_cli_with_validation_errors(run) -> None:  # type: ignore[no-untyped-def]
    venue = json.loads(
        run("venues", "add", "--venue-id", "lobby", "--name", "Lobby", "--timezone", "Asia/Tokyo")
    )
    assert venue["timezone"] == "Asia/Tokyo"
    assert "invalid_timezone" in run(
        "venues", "add", "--venue-id", "x", "--name", "X", "--timezone", "Nope/No", ok=False
    )
    assert "venue_exists" in run("venues", "add", "--venue-id", "lobby", "--name", "Again", ok=False)
    run(
        "venues",
        "add-screen",
        "--venue-id",
        "lobby",
        "--screen-id",
        "s1",
        "--width",
        "1920",
        "--height",
        "1080",
    )
    advertiser = json.loads(run("campaigns", "add-advertiser", "--name", "Acme"))
    now = int(time.time())
    campaign = json.loads(
        run(
            "campaigns",
            "add",
            "--advertiser-id",
            str(advertiser["id"]),
            "--name",
            "Spring",
            "--start-at",
            str(now),
            "--end-at",
            str(now + 3600),
            "--venue",
            "lobby",
        )
    )
    assert campaign["venue_ids"] == ["lobby"]
    assert "invalid_flight" in run(
        "campaigns",
        "add",
        "--advertiser-id",
        str(advertiser["id"]),
        "--name",
        "Bad",
        "--start-at",
        str(now),
        "--end-at",
        str(now),
        ok=False,
    )
    creative = json.loads(
        run(
            "campaigns",
            "add-creative",
            "--campaign-id",
            str(campaign["id"]),
            "--name",
            "v",
            "--media-url",
            "https://cdn.example.test/v.mp4",
            "--width",
            "1920",
            "--height",
            "1080",
            "--duration-seconds",
            "15",
        )
    )
    assert creative["mime_type"] == "video/mp4"
    paused = json.loads(run("campaigns", "set-status", "--env", "production", str(campaign["id"]), "paused"))
    assert paused["status"] == "paused"
    assert json.loads(run("venues", "list"))[0]["screens"][0]["screen_id"] == "s1"
