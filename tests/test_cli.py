"""The CLI: keys printed once, listed by prefix only, revocable; inventory and campaigns from the shell."""

from __future__ import annotations

import hashlib
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
from tests.conftest import BACKENDS, cli_databases, drop_schemas
from tests.test_progress import on_terminal


@pytest.fixture(params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The CLI against fresh databases on the backend under test; `ok=False` expects a refusal, which
    exits with status 2 like any usage error unless `exit_code` says otherwise."""
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True, exit_code: int = 2) -> str:
        result = runner.invoke(main, list(args))
        assert result.exit_code == (0 if ok else exit_code), result.output
        return result.output

    yield invoke
    if schemas:
        drop_schemas(schemas)


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
    assert "no active key" in run(
        "keys", "revoke", "--env", "production", str(listed[0]["id"]), ok=False, exit_code=1
    )


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


def test_venue_and_screen_fields_round_trip_through_the_cli(run) -> None:  # type: ignore[no-untyped-def]
    hourly = [0.5] * 168
    venue = json.loads(
        run(
            "venues", "add", "--venue-id", "mall", "--name", "Mall", "--latitude", "52.5",
            "--longitude", "13.4", "--venue-type", "2.1", "--tag", "premium", "--tag", "indoor",
            "--country", "de", "--region", "BE",
            "--city", "Berlin", "--impressions-per-play", "3.5", "--hourly-impressions", json.dumps(hourly),
        )
    )  # fmt: skip
    assert {k: venue[k] for k in ("tags", "country", "region", "city", "impressions_per_play")} == {
        "tags": ["premium", "indoor"],
        "country": "DE",
        "region": "BE",
        "city": "Berlin",
        "impressions_per_play": 3.5,
    }
    assert (venue["hourly_impressions"], venue["venue_type"]) == (hourly, "2.1")
    updated = json.loads(
        run("venues", "update", "--venue-id", "mall", "--city", "Potsdam", "--clear", "region",
            "--clear", "hourly_impressions", "--tag", "outdoor")
    )  # fmt: skip
    assert updated == {
        **venue,
        "city": "Potsdam",
        "region": None,
        "hourly_impressions": None,
        "tags": ["outdoor"],
    }
    screen = json.loads(
        run("venues", "add-screen", "--venue-id", "mall", "--screen-id", "p1", "--width", "1080",
            "--orientation", "portrait", "--mime-type", "video/mp4", "--mime-type", "video/webm",
            "--max-duration-seconds", "20")
    )  # fmt: skip
    assert (screen["orientation"], screen["mime_types"], screen["max_duration_seconds"]) == (
        "portrait",
        ["video/mp4", "video/webm"],
        20,
    )
    changed = json.loads(
        run("venues", "update-screen", "--venue-id", "mall", "--screen-id", "p1", "--orientation", "square",
            "--clear", "mime_types")
    )  # fmt: skip
    assert changed == {**screen, "orientation": "square", "mime_types": None}
    assert json.loads(run("venues", "list"))[0]["screens"] == [changed]


RULES = {
    "tier": "sponsorship",
    "weight": 300,
    "timezone": "Europe/Berlin",
    "targeting": {
        "venue_ids": ["lobby"],
        "venue_types": ["1.1"],
        "venue_tags": ["premium"],
        "geo": {"countries": ["DE"], "regions": None, "cities": ["Berlin"], "radius": None},
        "screen_ids": None,
        "screens": [{"venue_id": "lobby", "screen_id": "s1"}],
    },
    "exclusions": {
        "venue_ids": None,
        "venue_types": None,
        "venue_tags": ["kids"],
        "geo": None,
        "screen_ids": None,
        "screens": None,
    },
    "dayparts": [{"days": ["mon", "fri"], "start_hour": 18, "end_hour": 2}],
    "caps": [
        {"period": "daily", "metric": "plays", "limit": 500},
        {"period": "lifetime", "metric": "spend", "limit": 99.95},
    ],
    "cpm": 4.5,
    "pacing": "even",
    "frequency": {"per_hour": 1, "per_day": None},
    "separation_minutes": 15,
    "share_of_voice": 0.5,
}


def campaign_flags(advertiser_id: int, name: str) -> list[str]:
    now = int(time.time())
    return [
        "campaigns", "add", "--advertiser-id", str(advertiser_id), "--name", name, "--start-at", str(now),
        "--end-at", str(now + 3600),
    ]  # fmt: skip


def test_campaign_rules_and_creatives_round_trip_through_the_cli(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    advertiser = json.loads(run("campaigns", "add-advertiser", "--name", "Acme", "--category", "shoes"))
    campaign = json.loads(
        run(
            *campaign_flags(advertiser["id"], "Rules"),
            "--tier", "sponsorship", "--weight", "300", "--timezone", "Europe/Berlin",
            "--targeting", json.dumps(RULES["targeting"]), "--exclusions", json.dumps(RULES["exclusions"]),
            "--dayparts", json.dumps(RULES["dayparts"]), "--caps", json.dumps(RULES["caps"]), "--cpm", "4.5",
            "--pacing", "even", "--frequency", '{"per_hour": 1}', "--separation-minutes", "15",
            "--share-of-voice", "0.5",
        )
    )  # fmt: skip
    assert {k: campaign[k] for k in RULES} == RULES
    assert campaign["venue_ids"] == ["lobby"]
    updated = json.loads(
        run("campaigns", "update", str(campaign["id"]), "--tier", "house", "--clear", "frequency",
            "--clear", "exclusions", "--all-venues")
    )  # fmt: skip
    assert (updated["tier"], updated["frequency"], updated["all_venues"]) == ("house", None, True)
    assert updated["exclusions"]["venue_tags"] is None and updated["caps"] == RULES["caps"]
    media = tmp_path / "spot.mp4"
    media.write_bytes(b"not really a video" * 100)
    creative = json.loads(
        run("campaigns", "add-creative", "--campaign-id", str(campaign["id"]), "--name", "spot",
            "--media-url", "https://cdn.example.test/spot.mp4", "--width", "1920", "--height", "1080",
            "--duration-seconds", "10", "--weight", "5", "--media-file", str(media))
    )  # fmt: skip
    assert (creative["weight"], creative["size_bytes"], creative["sha256"]) == (
        5,
        1800,
        hashlib.sha256(media.read_bytes()).hexdigest(),
    )
    paused = json.loads(
        run("campaigns", "update-creative", "--campaign-id", str(campaign["id"]), "--creative-id",
            str(creative["id"]), "--status", "paused", "--weight", "9")
    )  # fmt: skip
    assert paused == {**creative, "status": "paused", "weight": 9}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--caps", '[{"period": "daily", "metric": "plays", "limit": 1.5}]'], "invalid_field: "),
        (["--caps", '[{"period": "daily", "metric": "plays", "limit": 1.5}]'], "(field: caps[0].limit)"),
        (["--caps", "[{not json"], "invalid_json: --caps"),
        (["--caps", '[{"period": "daily", "metric": "spend", "limit": 3}]'], "invalid_goal: "),
        (["--pacing", "even"], "invalid_goal: "),
        (["--weight", "0"], "(field: weight)"),
        (["--timezone", "Mars/Olympus"], "invalid_timezone: "),
        (["--targeting", '{"geo": {"countries": ["UK"]}}'], "(field: targeting.geo.countries[0])"),
        (["--dayparts", '[{"days": ["mon"], "start_hour": 25, "end_hour": 2}]'], "dayparts[0].start_hour"),
        (["--separation-minutes", "30"], "missing_category: "),
        (["--share-of-voice", "2"], "(field: share_of_voice)"),
        (["--cpm", "0.0000001"], "(field: cpm)"),
    ],
)
def test_the_cli_refuses_bad_campaign_input_with_the_api_codes_and_exit_status_2(  # type: ignore[no-untyped-def]
    run, args: list[str], expected: str
) -> None:
    advertiser = json.loads(run("campaigns", "add-advertiser", "--name", "No category"))
    assert expected in run(*campaign_flags(advertiser["id"], "bad"), *args, ok=False)
    assert json.loads(run("campaigns", "list")) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["venues", "add", "--venue-id", "v", "--name", "V", "--country", "XX"], "invalid_field: "),
        (["venues", "add", "--venue-id", "v", "--name", "V", "--latitude", "5"], "(field: longitude)"),
        (
            ["venues", "add", "--venue-id", "v", "--name", "V", "--hourly-impressions", "[1]"],
            "hourly_impressions",
        ),
        (["venues", "update", "--venue-id", "nope", "--city", "X"], "venue_not_found: "),
        (
            ["venues", "add-screen", "--venue-id", "lobby", "--screen-id", "s", "--mime-type", "x/y"],
            "mime_types[0]",
        ),
        (["venues", "update-screen", "--venue-id", "lobby", "--screen-id", "nope"], "screen_not_found: "),
        (
            ["campaigns", "update-creative", "--campaign-id", "1", "--creative-id", "1"],
            "campaign_not_found: ",
        ),
    ],
)
def test_the_cli_refuses_bad_inventory_input_with_the_api_codes_and_exit_status_2(  # type: ignore[no-untyped-def]
    run, args: list[str], expected: str
) -> None:
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
    assert expected in run(*args, ok=False)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("keys", "revoke", "2147483648"), "'KEY_ID'"),
        (("campaigns", "update", "2147483648", "--name", "x"), "'CAMPAIGN_ID'"),
        (("campaigns", "set-status", "0", "paused"), "'CAMPAIGN_ID'"),
        (
            (
                "campaigns",
                "add",
                "--advertiser-id",
                "99999999999",
                "--name",
                "x",
                "--start-at",
                "1",
                "--end-at",
                "2",
            ),
            "'--advertiser-id'",
        ),
        (
            ("campaigns", "update-creative", "--campaign-id", "1", "--creative-id", "2147483648"),
            "'--creative-id'",
        ),
    ],
)
def test_an_id_beyond_the_apis_range_is_a_usage_error_naming_its_option(  # type: ignore[no-untyped-def]
    run, args: tuple[str, ...], name: str
) -> None:
    """PostgreSQL's ids are 32-bit: a larger one would reach it as an out-of-range error (a traceback)."""
    output = run(*args, ok=False)
    assert f"Invalid value for {name}" in output and "1<=x<=2147483647" in output, output


def test_the_largest_id_reaches_the_database_and_names_nothing(run) -> None:  # type: ignore[no-untyped-def]
    assert "no active key with id 2147483647" in run("keys", "revoke", "2147483647", ok=False, exit_code=1)


def test_venues_import_a_csv_file_all_or_nothing(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "good.csv"
    good.write_text("venue_id,name,country,screen_id,width\nhall,Hall,de,s1,1920\nhall,,,s2,1080\n")
    assert json.loads(run("venues", "import", str(good))) == {
        "venues_created": 1,
        "venues_updated": 0,
        "screens_created": 2,
        "screens_updated": 0,
    }
    bad = tmp_path / "bad.csv"
    bad.write_text("venue_id,name,latitude,longitude\nnew,New,,\nhall,,91,0\n")
    output = run("venues", "import", str(bad), ok=False)
    assert "invalid_csv: " in output and "(field: line 3: latitude)" in output
    assert "  line 3: latitude: invalid_field: " in output
    assert [v["venue_id"] for v in json.loads(run("venues", "list"))] == ["hall"]


def _campaign_to_forecast(run) -> int:  # type: ignore[no-untyped-def]
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
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
    flight = ("--start-at", str(now), "--end-at", str(now + 7 * 86_400))
    campaign = json.loads(
        run("campaigns", "add", "--advertiser-id", str(advertiser["id"]), "--name", "Spring", *flight)
    )
    creative = ("--name", "v", "--media-url", "https://cdn.example.test/v.mp4", "--width", "1920")
    run(
        "campaigns",
        "add-creative",
        "--campaign-id",
        str(campaign["id"]),
        *creative,
        "--height",
        "1080",
        "--duration-seconds",
        "15",
    )
    return int(campaign["id"])


def test_a_forecast_from_the_cli_prints_its_report_and_no_progress_when_piped(run) -> None:  # type: ignore[no-untyped-def]
    campaign_id = _campaign_to_forecast(run)
    output = run("campaigns", "forecast", str(campaign_id), "--hours", "24")
    report = json.loads(output)  # nothing but the report: no bar drawn into a pipe
    assert report["campaign_id"] == campaign_id and report["slots_targeted"] == 24 * 12
    assert "campaign_not_found" in run("campaigns", "forecast", "999", ok=False)


def test_a_forecast_on_a_terminal_shows_a_progress_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_databases("sqlite", tmp_path, monkeypatch)
    campaign_id = _campaign_to_forecast(lambda *a, **k: CliRunner().invoke(main, list(a)).output)
    code, stdout, drawn = on_terminal("campaigns", "forecast", str(campaign_id), "--hours", "24")
    assert code == 0
    assert json.loads(stdout)["campaign_id"] == campaign_id, "the report still goes to standard output"
    assert b"Forecasting" in drawn and b"100%" in drawn, drawn


def test_venue_opening_hours_are_set_shown_refused_and_dropped_through_the_cli(run) -> None:  # type: ignore[no-untyped-def]
    run("venues", "add", "--venue-id", "mall", "--name", "Mall", "--timezone", "Europe/Berlin")
    assert json.loads(run("venues", "hours", "--venue-id", "mall")) == {"venue_id": "mall", "hours": None}
    set_to = json.loads(run("venues", "hours", "--venue-id", "mall", "--set", '{"mon": ["09:00-20:00"]}'))
    assert set_to["hours"]["mon"] == ["09:00-20:00"] and set_to["hours"]["sun"] == []
    assert json.loads(run("venues", "hours", "--venue-id", "mall"))["hours"] == set_to["hours"]
    refused = run("venues", "hours", "--venue-id", "mall", "--set", '{"mon": ["20:00-09:00"]}', ok=False)
    assert "invalid_field" in refused and "hours.mon[0]" in refused
    assert "invalid_json" in run("venues", "hours", "--venue-id", "mall", "--set", "{mon", ok=False)
    dropped = json.loads(run("venues", "hours", "--venue-id", "mall", "--always-open"))
    assert dropped["hours"] is None


def test_a_venue_csv_sets_opening_hours_with_its_venues(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "hours.csv"
    good.write_text('venue_id,name,hours\nhall,Hall,"{""sat"": [""10:00-18:00""]}"\nlobby,Lobby,always\n')
    assert json.loads(run("venues", "import", str(good)))["venues_created"] == 2
    assert json.loads(run("venues", "hours", "--venue-id", "hall"))["hours"]["sat"] == ["10:00-18:00"]
    assert json.loads(run("venues", "hours", "--venue-id", "lobby"))["hours"] is None
    bad = tmp_path / "bad.csv"
    bad.write_text('venue_id,hours\nhall,"{""someday"": []}"\n')
    output = run("venues", "import", str(bad), ok=False)
    assert "(field: line 2: hours)" in output
    assert json.loads(run("venues", "hours", "--venue-id", "hall"))["hours"]["sat"] == ["10:00-18:00"]


def test_a_venue_import_on_a_terminal_shows_a_progress_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped, the import prints only its result (test_venues_import_a_csv_file_all_or_nothing)."""
    cli_databases("sqlite", tmp_path, monkeypatch)
    rows = [f"venue-{i},Venue {i},s1,1920,1080" for i in range(3000)]
    csv_file = tmp_path / "venues.csv"
    csv_file.write_text("venue_id,name,screen_id,width,height\n" + "\n".join(rows) + "\n")
    code, stdout, drawn = on_terminal("venues", "import", str(csv_file))
    assert code == 0
    assert json.loads(stdout)["venues_created"] == 3000
    assert b"Importing" in drawn and b"100%" in drawn, drawn
