"""Settings from ADSLOT_* variables: defaults, overrides, refusal of bad values, per-environment stores."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from adslot.ledger.backends import ledger_for
from adslot.ledger.process_store import ProcessLedgerStore
from adslot.settings import EnvironmentSettings, Settings, SettingsError, load_settings

PG = "postgresql://adslot@db.example.test:5432/adslot"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Relative data dirs resolve under a scratch folder; the caller's ADSLOT_* variables do not leak in."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("ADSLOT_"):
            monkeypatch.delenv(name)
    return tmp_path


def production(settings: Settings) -> EnvironmentSettings:
    return settings.environment("production")


def sandbox(settings: Settings) -> EnvironmentSettings:
    return settings.environment("sandbox")


# --- defaults -------------------------------------------------------------------------------------


def test_defaults_with_an_empty_environment() -> None:
    settings = load_settings({})
    assert settings.data_dir == Path("adslot-data")
    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.play_window_seconds == 900
    assert settings.play_time_skew_seconds == 60
    assert settings.play_time_max_lead_seconds == 3600
    assert settings.max_body_bytes == 16 * 1024
    assert settings.max_id_length == 128
    assert settings.schema_strict_extension is False
    assert settings.fast_lane is True
    assert settings.catalog_poll_seconds == 0.25
    assert settings.batch_max == 512
    assert settings.ad_system_name == "adslot"


def test_an_empty_environment_loads_every_default_of_the_settings_class() -> None:
    loaded = dataclasses.replace(load_settings({}), environments=())
    assert loaded == Settings()


def test_expiry_sweep_runs_every_five_seconds_by_default() -> None:
    assert load_settings({}).settle_interval_seconds == 5.0


def test_closed_counters_are_kept_a_week_by_default_and_the_setting_counts_hours() -> None:
    assert load_settings({}).counter_retention_seconds == 7 * 24 * 3600
    assert load_settings({"ADSLOT_COUNTER_RETENTION_HOURS": "48"}).counter_retention_seconds == 48 * 3600


def test_default_environments_are_production_and_sandbox_in_that_order() -> None:
    settings = load_settings({})
    assert [env.name for env in settings.environments] == ["production", "sandbox"]


def test_default_public_urls_mount_sandbox_under_the_production_host() -> None:
    settings = load_settings({})
    assert production(settings).public_url == "http://127.0.0.1:8000"
    assert production(settings).mount_path == ""
    assert sandbox(settings).public_url == "http://127.0.0.1:8000/sandbox"
    assert sandbox(settings).mount_path == "/sandbox"


def test_key_prefixes_are_live_for_production_and_test_for_sandbox() -> None:
    settings = load_settings({})
    assert production(settings).key_prefix == "ssp_live_"
    assert sandbox(settings).key_prefix == "ssp_test_"


def test_empty_values_mean_the_default() -> None:
    names = [
        "ADSLOT_PORT",
        "ADSLOT_PLAY_WINDOW_SECONDS",
        "ADSLOT_FAST_LANE",
        "ADSLOT_DATABASE_URL",
        "ADSLOT_PUBLIC_URL",
        "ADSLOT_AD_SYSTEM_NAME",
        "ADSLOT_DATA_DIR",
    ]
    assert load_settings(dict.fromkeys(names, "")) == load_settings({})


def test_unknown_environment_name_raises_settings_error() -> None:
    with pytest.raises(SettingsError, match="staging"):
        load_settings({}).environment("staging")


def test_settings_error_is_a_value_error() -> None:
    assert issubclass(SettingsError, ValueError)


def test_without_an_explicit_mapping_the_process_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADSLOT_PORT", "9123")
    monkeypatch.setenv("ADSLOT_AD_SYSTEM_NAME", "from-os")
    settings = load_settings()
    assert settings.port == 9123
    assert settings.ad_system_name == "from-os"


# --- overrides ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "attribute", "value"),
    [
        ("ADSLOT_PORT", "9000", "port", 9000),
        ("ADSLOT_HOST", "10.0.0.5", "host", "10.0.0.5"),
        ("ADSLOT_PLAY_WINDOW_SECONDS", "3600", "play_window_seconds", 3600),
        ("ADSLOT_PLAY_TIME_SKEW_SECONDS", "0", "play_time_skew_seconds", 0),
        ("ADSLOT_PLAY_TIME_MAX_LEAD_SECONDS", "86400", "play_time_max_lead_seconds", 86400),
        ("ADSLOT_MAX_BODY_BYTES", "256", "max_body_bytes", 256),
        ("ADSLOT_MAX_ID_LENGTH", "64", "max_id_length", 64),
        ("ADSLOT_VAST_SCHEMA_STRICT_EXTENSION", "true", "schema_strict_extension", True),
        ("ADSLOT_FAST_LANE", "off", "fast_lane", False),
        ("ADSLOT_CATALOG_POLL_MS", "750", "catalog_poll_seconds", 0.75),
        ("ADSLOT_SETTLE_INTERVAL_MS", "750", "settle_interval_seconds", 0.75),
        ("ADSLOT_BATCH_MAX", "1", "batch_max", 1),
        ("ADSLOT_AD_SYSTEM_NAME", "Acme SSP", "ad_system_name", "Acme SSP"),
        ("ADSLOT_DATA_DIR", "/srv/adslot", "data_dir", Path("/srv/adslot")),
    ],
)
def test_environment_variable_overrides_its_setting(
    name: str, raw: str, attribute: str, value: object
) -> None:
    assert getattr(load_settings({name: raw}), attribute) == value


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "yes", "Yes", "on"])
def test_boolean_true_spellings(raw: str) -> None:
    assert load_settings({"ADSLOT_VAST_SCHEMA_STRICT_EXTENSION": raw}).schema_strict_extension is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "no", "NO", "off"])
def test_boolean_false_spellings(raw: str) -> None:
    assert load_settings({"ADSLOT_FAST_LANE": raw}).fast_lane is False


def test_host_and_port_arguments_win_over_the_environment() -> None:
    settings = load_settings({"ADSLOT_HOST": "10.0.0.5", "ADSLOT_PORT": "9000"}, host="10.0.0.6", port=9001)
    assert (settings.host, settings.port) == ("10.0.0.6", 9001)
    assert production(settings).public_url == "http://10.0.0.6:9001"


def test_wildcard_host_gives_a_loopback_public_url() -> None:
    for host in ("0.0.0.0", "::"):
        settings = load_settings({"ADSLOT_HOST": host, "ADSLOT_PORT": "8080"})
        assert settings.host == host
        assert production(settings).public_url == "http://127.0.0.1:8080"


def test_ipv6_host_is_bracketed_in_the_default_public_url() -> None:
    settings = load_settings({"ADSLOT_HOST": "::1", "ADSLOT_PORT": "8080"})
    assert production(settings).public_url == "http://[::1]:8080"
    assert sandbox(settings).public_url == "http://[::1]:8080/sandbox"


def test_public_url_override_drops_trailing_slashes_and_carries_the_sandbox_path() -> None:
    settings = load_settings({"ADSLOT_PUBLIC_URL": "https://ads.example.test//"})
    assert production(settings).public_url == "https://ads.example.test"
    assert sandbox(settings).public_url == "https://ads.example.test/sandbox"


def test_sandbox_public_url_override_is_separate() -> None:
    settings = load_settings(
        {
            "ADSLOT_PUBLIC_URL": "https://ads.example.test",
            "ADSLOT_SANDBOX_PUBLIC_URL": "https://sandbox.example.test/",
        }
    )
    assert production(settings).public_url == "https://ads.example.test"
    assert sandbox(settings).public_url == "https://sandbox.example.test"


def test_with_overrides_returns_a_changed_copy() -> None:
    settings = load_settings({})
    changed = settings.with_overrides(port=1234, fast_lane=False)
    assert (changed.port, changed.fast_lane) == (1234, False)
    assert (settings.port, settings.fast_lane) == (8000, True)


# --- invalid values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("ADSLOT_PORT", "eighty"),
        ("ADSLOT_PORT", "0"),
        ("ADSLOT_PORT", "-1"),
        ("ADSLOT_PORT", "80.5"),
        ("ADSLOT_PLAY_WINDOW_SECONDS", "59"),
        ("ADSLOT_PLAY_WINDOW_SECONDS", "15m"),
        ("ADSLOT_PLAY_TIME_SKEW_SECONDS", "-1"),
        ("ADSLOT_PLAY_TIME_MAX_LEAD_SECONDS", "0"),
        ("ADSLOT_MAX_BODY_BYTES", "255"),
        ("ADSLOT_MAX_ID_LENGTH", "7"),
        ("ADSLOT_MAX_HEAD_BYTES", "1023"),
        ("ADSLOT_MAX_URL_BYTES", "255"),
        ("ADSLOT_MAX_HEADERS", "7"),
        ("ADSLOT_HEAD_TIMEOUT_MS", "99"),
        ("ADSLOT_BODY_TIMEOUT_MS", "99"),
        ("ADSLOT_BODY_TIMEOUT_MS", "30s"),
        ("ADSLOT_CATALOG_POLL_MS", "49"),
        ("ADSLOT_SETTLE_INTERVAL_MS", "49"),
        ("ADSLOT_SETTLE_INTERVAL_MS", "soon"),
        ("ADSLOT_COUNTER_RETENTION_HOURS", "0"),
        ("ADSLOT_BATCH_MAX", "0"),
        ("ADSLOT_FAST_LANE", "maybe"),
        ("ADSLOT_VAST_SCHEMA_STRICT_EXTENSION", "2"),
    ],
)
def test_unusable_value_raises_settings_error_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({name: raw})


# --- databases ------------------------------------------------------------------------------------


def test_sqlite_default_is_one_file_per_environment_in_the_data_dir(in_tmp: Path) -> None:
    settings = load_settings({})
    data_dir = (in_tmp / "adslot-data").resolve()
    assert production(settings).database_url == f"sqlite:///{data_dir / 'production.sqlite3'}"
    assert sandbox(settings).database_url == f"sqlite:///{data_dir / 'sandbox.sqlite3'}"
    assert production(settings).database_schema is None
    assert sandbox(settings).database_schema is None


def test_sqlite_default_paths_follow_the_data_dir_and_are_absolute(tmp_path: Path) -> None:
    settings = load_settings({"ADSLOT_DATA_DIR": "rel/data"})
    prod_path = Path(production(settings).database_url.removeprefix("sqlite:///"))
    sandbox_path = Path(sandbox(settings).database_url.removeprefix("sqlite:///"))
    assert prod_path.is_absolute()
    assert prod_path == (tmp_path / "rel" / "data" / "production.sqlite3").resolve()
    assert sandbox_path == (tmp_path / "rel" / "data" / "sandbox.sqlite3").resolve()


def test_explicit_sqlite_production_url_keeps_the_sandbox_default_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    settings = load_settings({"ADSLOT_DATABASE_URL": url})
    assert production(settings).database_url == url
    assert (
        sandbox(settings).database_url
        == f"sqlite:///{(tmp_path / 'adslot-data' / 'sandbox.sqlite3').resolve()}"
    )


def test_one_sqlite_file_for_both_environments_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'one.db'}"
    with pytest.raises(SettingsError, match="SQLite"):
        load_settings({"ADSLOT_DATABASE_URL": url, "ADSLOT_SANDBOX_DATABASE_URL": url})


def test_postgresql_url_serves_both_environments_through_separate_schemas() -> None:
    settings = load_settings({"ADSLOT_DATABASE_URL": PG})
    assert production(settings).database_url == PG
    assert sandbox(settings).database_url == PG
    assert production(settings).database_schema == "adslot_production"
    assert sandbox(settings).database_schema == "adslot_sandbox"


def test_postgresql_schemas_can_be_named() -> None:
    settings = load_settings(
        {
            "ADSLOT_DATABASE_URL": PG,
            "ADSLOT_DATABASE_SCHEMA": "live",
            "ADSLOT_SANDBOX_DATABASE_SCHEMA": "test",
        }
    )
    assert production(settings).database_schema == "live"
    assert sandbox(settings).database_schema == "test"


def test_postgresql_schemas_must_differ() -> None:
    with pytest.raises(SettingsError, match="schema"):
        load_settings(
            {
                "ADSLOT_DATABASE_URL": PG,
                "ADSLOT_DATABASE_SCHEMA": "same",
                "ADSLOT_SANDBOX_DATABASE_SCHEMA": "same",
            }
        )


def test_postgresql_production_schema_named_like_the_sandbox_default_is_refused() -> None:
    with pytest.raises(SettingsError, match="schema"):
        load_settings({"ADSLOT_DATABASE_URL": PG, "ADSLOT_DATABASE_SCHEMA": "adslot_sandbox"})


def test_separate_postgresql_databases_need_no_schemas() -> None:
    other = "postgresql://adslot@db.example.test:5432/adslot_sandbox"
    settings = load_settings({"ADSLOT_DATABASE_URL": PG, "ADSLOT_SANDBOX_DATABASE_URL": other})
    assert sandbox(settings).database_url == other
    assert production(settings).database_schema is None
    assert sandbox(settings).database_schema is None


# --- play window ----------------------------------------------------------------------------------


def test_play_window_equal_to_the_skew_is_refused() -> None:
    with pytest.raises(
        SettingsError, match="ADSLOT_PLAY_WINDOW_SECONDS must exceed ADSLOT_PLAY_TIME_SKEW_SECONDS"
    ):
        load_settings({"ADSLOT_PLAY_WINDOW_SECONDS": "120", "ADSLOT_PLAY_TIME_SKEW_SECONDS": "120"})


def test_play_window_shorter_than_the_skew_is_refused() -> None:
    with pytest.raises(SettingsError, match="must exceed"):
        load_settings({"ADSLOT_PLAY_WINDOW_SECONDS": "100", "ADSLOT_PLAY_TIME_SKEW_SECONDS": "600"})


def test_play_window_one_second_longer_than_the_skew_is_accepted() -> None:
    settings = load_settings({"ADSLOT_PLAY_WINDOW_SECONDS": "121", "ADSLOT_PLAY_TIME_SKEW_SECONDS": "120"})
    assert (settings.play_window_seconds, settings.play_time_skew_seconds) == (121, 120)


def test_each_worker_starts_its_own_writer_unless_serve_names_a_shared_writers_socket_dir(
    tmp_path: Path,
) -> None:
    assert load_settings({}).ledger_socket_dir is None
    assert load_settings({"ADSLOT_LEDGER_SOCKET_DIR": ""}).ledger_socket_dir is None
    shared = load_settings({"ADSLOT_LEDGER_SOCKET_DIR": str(tmp_path)})
    assert shared.ledger_socket_dir == tmp_path
    store = ledger_for(shared.environment("sandbox"), shared.ledger_socket_dir)
    assert isinstance(store, ProcessLedgerStore) and store.shared_socket == tmp_path / "sandbox.sock"


def test_the_ledger_writer_is_no_longer_a_setting_and_saying_one_is_refused() -> None:
    with pytest.raises(SettingsError, match="ADSLOT_LEDGER_WRITER is no longer read"):
        load_settings({"ADSLOT_LEDGER_WRITER": "worker"})


def test_two_write_batches_may_be_in_flight_by_default_at_least_one_and_at_most_32() -> None:
    assert load_settings({}).batches_in_flight == 2
    assert load_settings({"ADSLOT_BATCHES_IN_FLIGHT": "1"}).batches_in_flight == 1
    with pytest.raises(SettingsError, match="ADSLOT_BATCHES_IN_FLIGHT must be >= 1"):
        load_settings({"ADSLOT_BATCHES_IN_FLIGHT": "0"})
    assert load_settings({"ADSLOT_BATCHES_IN_FLIGHT": "32"}).batches_in_flight == 32
    # Each frame in flight keeps its answer in one of ANSWER_SLOTS rows until it is answered.
    with pytest.raises(SettingsError, match="ADSLOT_BATCHES_IN_FLIGHT must be <= 32"):
        load_settings({"ADSLOT_BATCHES_IN_FLIGHT": "33"})


def test_retention_is_off_by_default_at_least_8_days_and_longer_than_the_upload_window() -> None:
    assert load_settings({}).retention_days is None
    assert load_settings({"ADSLOT_RETENTION_DAYS": "off"}).retention_days is None
    settings = load_settings({"ADSLOT_RETENTION_DAYS": "90", "ADSLOT_RETENTION_BATCH_ROWS": "1000"})
    assert (settings.retention_days, settings.retention_batch_rows, settings.retention_pause_seconds) == (
        90,
        1000,
        0.1,
    )
    with pytest.raises(SettingsError, match="ADSLOT_RETENTION_DAYS must be >= 8"):
        load_settings({"ADSLOT_RETENTION_DAYS": "7"})
    with pytest.raises(SettingsError, match="ADSLOT_RETENTION_DAYS must be an integer"):
        load_settings({"ADSLOT_RETENTION_DAYS": "a month"})
    with pytest.raises(SettingsError, match="must exceed ADSLOT_POP_UPLOAD_WINDOW_HOURS"):
        load_settings({"ADSLOT_RETENTION_DAYS": "10", "ADSLOT_POP_UPLOAD_WINDOW_HOURS": "240"})
    with pytest.raises(SettingsError, match="ADSLOT_RETENTION_BATCH_ROWS must be <= 10000"):
        load_settings({"ADSLOT_RETENTION_BATCH_ROWS": "10001"})


def test_the_fleet_retentions_default_to_35_and_90_days_and_can_be_off() -> None:
    defaults = load_settings({})
    assert (defaults.screen_plays_retention_days, defaults.alert_retention_days) == (35, 90)
    settings = load_settings(
        {"ADSLOT_SCREEN_PLAYS_RETENTION_DAYS": "off", "ADSLOT_ALERT_RETENTION_DAYS": "7"}
    )
    assert (settings.screen_plays_retention_days, settings.alert_retention_days) == (None, 7)
    with pytest.raises(SettingsError, match="ADSLOT_SCREEN_PLAYS_RETENTION_DAYS must be >= 2"):
        load_settings({"ADSLOT_SCREEN_PLAYS_RETENTION_DAYS": "1"})
    with pytest.raises(SettingsError, match="ADSLOT_ALERT_RETENTION_DAYS must be an integer"):
        load_settings({"ADSLOT_ALERT_RETENTION_DAYS": "forever"})


def test_rate_limits_are_read_validated_and_off_for_ad_requests_by_default() -> None:
    defaults = load_settings({})
    limits = (defaults.rate_limit_ad_requests, defaults.rate_limit_burst, defaults.rate_limit_pixels)
    assert limits == (0, 0, 50)
    assert (defaults.redis_url, defaults.redis_key_prefix) == (None, "adslot")
    settings = load_settings(
        {
            "ADSLOT_RATE_LIMIT_AD_REQUESTS": "0.5",
            "ADSLOT_RATE_LIMIT_BURST": "4",
            "ADSLOT_RATE_LIMIT_PIXELS": "0",
            "ADSLOT_REDIS_URL": "redis://127.0.0.1:6379/0",
            "ADSLOT_REDIS_KEY_PREFIX": "fleet-a",
        }
    )
    limits = (settings.rate_limit_ad_requests, settings.rate_limit_burst, settings.rate_limit_pixels)
    assert limits == (0.5, 4, 0)
    assert (settings.redis_url, settings.redis_key_prefix) == ("redis://127.0.0.1:6379/0", "fleet-a")
    for name, value, message in (
        ("ADSLOT_RATE_LIMIT_AD_REQUESTS", "fast", "must be a number"),
        ("ADSLOT_RATE_LIMIT_AD_REQUESTS", "-1", "between 0 and 1e9"),
        ("ADSLOT_RATE_LIMIT_AD_REQUESTS", "inf", "between 0 and 1e9"),
        ("ADSLOT_RATE_LIMIT_BURST", "0.5", "at least 1"),
        ("ADSLOT_RATE_LIMIT_PIXELS", "-5", "must be >= 0"),
        ("ADSLOT_REDIS_URL", "http://127.0.0.1:6379", "redis://, rediss:// or unix://"),
        ("ADSLOT_REDIS_KEY_PREFIX", "a b", "ADSLOT_REDIS_KEY_PREFIX"),
    ):
        with pytest.raises(SettingsError, match=message):
            load_settings({name: value})


def test_offline_upload_window_and_invalid_traffic_rules_default_to_72_hours_and_every_rule() -> None:
    settings = load_settings({})
    assert settings.pop_upload_window_seconds == 72 * 3600
    assert settings.ivt_rules == ("too_fast", "out_of_order", "foreign_network", "burst")
    assert (settings.ivt_ipv4_prefix, settings.ivt_ipv6_prefix, settings.trusted_proxies) == (16, 48, ())
    chosen = load_settings(
        {"ADSLOT_IVT_RULES": "burst, too_fast", "ADSLOT_TRUSTED_PROXIES": "10.0.0.1,fd00::/8"}
    )
    assert chosen.ivt_rules == ("too_fast", "burst")
    assert chosen.trusted_proxies == ("10.0.0.1/32", "fd00::/8")
    assert load_settings({"ADSLOT_IVT_RULES": "none"}).ivt_rules == ()


@pytest.mark.parametrize(
    "name, value",
    [
        ("ADSLOT_IVT_RULES", "too_fast,slow"),
        ("ADSLOT_TRUSTED_PROXIES", "proxy.example.com"),
        ("ADSLOT_POP_UPLOAD_WINDOW_HOURS", "0"),
        ("ADSLOT_IVT_IPV6_PREFIX", "64"),
        ("ADSLOT_IVT_TOO_FAST_PERCENT", "101"),
    ],
)
def test_bad_invalid_traffic_and_upload_settings_are_refused_at_start(name: str, value: str) -> None:
    with pytest.raises(SettingsError):
        load_settings({name: value})


def test_the_body_timeout_is_thirty_seconds_unless_set_in_milliseconds() -> None:
    assert load_settings({}).body_timeout_seconds == 30.0
    assert load_settings({"ADSLOT_BODY_TIMEOUT_MS": "2500"}).body_timeout_seconds == 2.5
