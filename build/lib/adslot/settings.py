"""One typed Settings object, read from ADSLOT_* environment variables.

Every knob an operator may turn lives here so that the rest of the code never reads the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

ENVIRONMENTS = ("production", "sandbox")
HOUR = 3600
MAX_BATCHES_IN_FLIGHT = 32
"""The most batches a worker may have in flight (ADSLOT_BATCHES_IN_FLIGHT); the ledger keeps an answer slot
for each (ledger/records.py's ANSWER_SLOTS)."""


class SettingsError(ValueError):
    """A configuration value that cannot be used; raised at start-up, never on a request."""


def _int(env: dict[str, str], name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"{name} must be <= {maximum}, got {value}")
    return value


def _bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def _choice(env: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of `choices`; the first is the default."""
    raw = env.get(name)
    if raw is None or raw == "":
        return choices[0]
    if raw not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


@dataclass(frozen=True)
class EnvironmentSettings:
    """What differs between production and sandbox: where data lives and how the world reaches it."""

    name: str
    database_url: str
    database_schema: str | None
    public_url: str
    mount_path: str

    @property
    def key_prefix(self) -> str:
        return "ssp_live_" if self.name == "production" else "ssp_test_"


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("adslot-data")
    host: str = "127.0.0.1"
    port: int = 8000
    environments: tuple[EnvironmentSettings, ...] = field(default_factory=tuple)
    play_window_seconds: int = 900
    play_time_skew_seconds: int = 60
    play_time_max_lead_seconds: int = 3600
    max_body_bytes: int = 16 * 1024
    max_head_bytes: int = 16 * 1024
    """A request's line and headers together (431 above), counted as they arrive, before they are kept."""
    max_url_bytes: int = 8 * 1024
    """A request target's length (414 above)."""
    max_headers: int = 100
    """Header fields in one request (431 above)."""
    head_timeout_seconds: float = 10.0
    """How long a connection may take to send a request's head: one that sends nothing is closed, one whose
    head is still incomplete is answered 408 and closed. The wait between requests on a kept-alive
    connection is uvicorn's keep-alive timeout (5 s)."""
    max_id_length: int = 128
    schema_strict_extension: bool = False
    fast_lane: bool = True
    catalog_poll_seconds: float = 0.25
    """How often each worker checks the catalog version. When it moved, the active keys are swapped in at once
    (one small query) and the rest is reloaded after, so a revoked key is refused within about this long;
    a check is one indexed read."""
    batch_max: int = 512
    batches_in_flight: int = 2
    """Write batches a worker may have sent before the first is committed: while the writer commits one,
    the next is already waiting in its pipe (measured: +15-30% pixel throughput over 1; 4 gained no more)."""
    ledger_socket_dir: Path | None = None
    """Set by `adslot serve` for its workers: where the ledger writer process of each SQLite environment
    listens (ledger/shared_writer.py); without it, an SQLite ledger starts a writer process of its own."""
    ad_system_name: str = "adslot"
    settle_interval_seconds: float = 5.0
    """How often each worker's expiry sweep returns the reservations of ad requests that expired unplayed."""
    counter_retention_seconds: int = 7 * 24 * HOUR
    """How long the sweep keeps an hour's or a day's delivery counters after the window closed, for
    operators to read, before it drops them: frequency counters alone add a row per screen, campaign and
    hour."""

    def environment(self, name: str) -> EnvironmentSettings:
        for env in self.environments:
            if env.name == name:
                return env
        raise SettingsError(f"environment {name!r} is not configured")

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULTS = Settings()
"""The one place each default is written: load_settings falls back to these."""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def load_settings(
    environ: dict[str, str] | None = None, *, host: str | None = None, port: int | None = None
) -> Settings:
    """Build Settings from the environment; `host`/`port` come from `adslot serve` flags when given."""
    env = dict(os.environ if environ is None else environ)
    if env.get("ADSLOT_LEDGER_WRITER"):
        raise SettingsError(
            "ADSLOT_LEDGER_WRITER is no longer read: the database chooses where ledger batches are applied "
            "(SQLite: one writer process per environment; PostgreSQL: each worker); unset it"
        )
    data_dir = Path(env.get("ADSLOT_DATA_DIR") or DEFAULTS.data_dir)
    host = host or env.get("ADSLOT_HOST") or DEFAULTS.host
    port = port if port is not None else _int(env, "ADSLOT_PORT", DEFAULTS.port, 1)
    public_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    if ":" in public_host and not public_host.startswith("["):
        public_host = f"[{public_host}]"  # an IPv6 literal needs brackets in a URL
    default_public = f"http://{public_host}:{port}"
    public_url = (env.get("ADSLOT_PUBLIC_URL") or default_public).rstrip("/")
    sandbox_url = (env.get("ADSLOT_SANDBOX_PUBLIC_URL") or f"{public_url}/sandbox").rstrip("/")
    prod_db = env.get("ADSLOT_DATABASE_URL") or _sqlite_url(data_dir / "production.sqlite3")
    if env.get("ADSLOT_SANDBOX_DATABASE_URL"):
        sandbox_db = env["ADSLOT_SANDBOX_DATABASE_URL"]
    elif prod_db.startswith("sqlite"):
        sandbox_db = _sqlite_url(data_dir / "sandbox.sqlite3")
    else:
        sandbox_db = prod_db
    prod_schema = env.get("ADSLOT_DATABASE_SCHEMA") or None
    sandbox_schema = env.get("ADSLOT_SANDBOX_DATABASE_SCHEMA") or None
    if sandbox_db == prod_db and not prod_db.startswith("sqlite"):
        # One PostgreSQL database serves both environments through separate schemas.
        prod_schema = prod_schema or "adslot_production"
        sandbox_schema = sandbox_schema or "adslot_sandbox"
        if prod_schema == sandbox_schema:
            raise SettingsError("production and sandbox must not share a database schema")
    elif sandbox_db == prod_db:
        raise SettingsError("production and sandbox must not share one SQLite file")
    settings = Settings(
        data_dir=data_dir,
        host=host,
        port=port,
        environments=(
            EnvironmentSettings("production", prod_db, prod_schema, public_url, ""),
            EnvironmentSettings("sandbox", sandbox_db, sandbox_schema, sandbox_url, "/sandbox"),
        ),
        play_window_seconds=_int(env, "ADSLOT_PLAY_WINDOW_SECONDS", DEFAULTS.play_window_seconds, 60),
        play_time_skew_seconds=_int(env, "ADSLOT_PLAY_TIME_SKEW_SECONDS", DEFAULTS.play_time_skew_seconds, 0),
        play_time_max_lead_seconds=_int(
            env, "ADSLOT_PLAY_TIME_MAX_LEAD_SECONDS", DEFAULTS.play_time_max_lead_seconds, 1
        ),
        max_body_bytes=_int(env, "ADSLOT_MAX_BODY_BYTES", DEFAULTS.max_body_bytes, 256),
        max_id_length=_int(env, "ADSLOT_MAX_ID_LENGTH", DEFAULTS.max_id_length, 8),
        max_head_bytes=_int(env, "ADSLOT_MAX_HEAD_BYTES", DEFAULTS.max_head_bytes, 1024),
        max_url_bytes=_int(env, "ADSLOT_MAX_URL_BYTES", DEFAULTS.max_url_bytes, 256),
        max_headers=_int(env, "ADSLOT_MAX_HEADERS", DEFAULTS.max_headers, 8),
        head_timeout_seconds=_int(env, "ADSLOT_HEAD_TIMEOUT_MS", _ms(DEFAULTS.head_timeout_seconds), 100)
        / 1000,
        schema_strict_extension=_bool(
            env, "ADSLOT_VAST_SCHEMA_STRICT_EXTENSION", DEFAULTS.schema_strict_extension
        ),
        fast_lane=_bool(env, "ADSLOT_FAST_LANE", DEFAULTS.fast_lane),
        catalog_poll_seconds=_int(env, "ADSLOT_CATALOG_POLL_MS", _ms(DEFAULTS.catalog_poll_seconds), 50)
        / 1000,
        batch_max=_int(env, "ADSLOT_BATCH_MAX", DEFAULTS.batch_max, 1),
        batches_in_flight=_int(
            env, "ADSLOT_BATCHES_IN_FLIGHT", DEFAULTS.batches_in_flight, 1, MAX_BATCHES_IN_FLIGHT
        ),
        ledger_socket_dir=Path(socket_dir) if (socket_dir := env.get("ADSLOT_LEDGER_SOCKET_DIR")) else None,
        ad_system_name=env.get("ADSLOT_AD_SYSTEM_NAME") or DEFAULTS.ad_system_name,
        settle_interval_seconds=_int(
            env, "ADSLOT_SETTLE_INTERVAL_MS", _ms(DEFAULTS.settle_interval_seconds), 50
        )
        / 1000,
        counter_retention_seconds=_int(
            env, "ADSLOT_COUNTER_RETENTION_HOURS", DEFAULTS.counter_retention_seconds // HOUR, 1
        )
        * HOUR,
    )
    if settings.play_window_seconds <= settings.play_time_skew_seconds:
        raise SettingsError("ADSLOT_PLAY_WINDOW_SECONDS must exceed ADSLOT_PLAY_TIME_SKEW_SECONDS")
    return settings
