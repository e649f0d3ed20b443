"""One typed Settings object, read from ADSLOT_* environment variables.

Every knob an operator may turn lives here so that the rest of the code never reads the environment.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

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


def _rate(env: dict[str, str], name: str, default: float) -> float:
    """A non-negative number of requests a second (fractions allowed: 0.5 is one every two seconds)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from exc
    if not 0 <= value <= 1e9:  # also refuses nan and inf
        raise SettingsError(f"{name} must be between 0 and 1e9, got {raw!r}")
    return value


def _redis_url(env: dict[str, str], name: str) -> str | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("redis", "rediss", "unix") or not (parts.hostname or parts.path):
        raise SettingsError(f"{name} must be a redis://, rediss:// or unix:// URL, got {parts.scheme}://…")
    return raw


def _redis_prefix(env: dict[str, str], name: str) -> str:
    raw = env.get(name)
    if raw is None or raw == "":
        return DEFAULTS.redis_key_prefix
    if len(raw) > 64 or not raw.isascii() or not all(c.isalnum() or c in "-_.:" for c in raw):
        raise SettingsError(f"{name} must be at most 64 letters, digits or -_.: , got {raw!r}")
    return raw


IVT_RULES = ("too_fast", "out_of_order", "foreign_network", "burst")


def _rules(env: dict[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated subset of IVT_RULES; unset or empty: all of them, `none`: none."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return IVT_RULES
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if items == ["none"]:
        return ()
    unknown = [item for item in items if item not in IVT_RULES]
    if unknown:
        raise SettingsError(f"{name} must be `none` or a comma-separated list of {', '.join(IVT_RULES)}")
    return tuple(rule for rule in IVT_RULES if rule in items)


def _networks(env: dict[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated list of IP addresses or CIDR networks, each checked and written as a network."""
    out: list[str] = []
    for item in (env.get(name) or "").split(","):
        if item.strip():
            try:
                out.append(str(ipaddress.ip_network(item.strip(), strict=False)))
            except ValueError as exc:
                raise SettingsError(f"{name}: {item.strip()!r} is not an IP address or network") from exc
    return tuple(out)


def _token(env: dict[str, str], name: str) -> str | None:
    """A bearer token: unset or empty for none, else 16 to 256 printable ASCII characters without spaces."""
    raw = env.get(name) or None
    usable = raw is None or (16 <= len(raw) <= 256 and raw.isascii() and raw.isprintable() and " " not in raw)
    if not usable:
        raise SettingsError(f"{name} must be 16 to 256 printable ASCII characters without spaces")
    return raw


def _currency(env: dict[str, str], name: str, default: str) -> str:
    """An ISO 4217 code, as three letters (upper-cased)."""
    raw = (env.get(name) or default).strip().upper()
    if len(raw) != 3 or not raw.isascii() or not raw.isalpha():
        raise SettingsError(f"{name} must be an ISO 4217 code such as USD, got {raw!r}")
    return raw


LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("info", "debug", "warning", "error", "critical")


def _origins(env: dict[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated list of origins (`scheme://host[:port]`, as a browser sends Origin), `*` for any,
    or `none`/empty for none; unset means any."""
    raw = env.get(name)
    if raw is None:
        return ("*",)
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items or items == ["none"]:
        return ()
    if items == ["*"]:
        return ("*",)
    origins: list[str] = []
    for item in items:
        parts = urlsplit(item)
        try:
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            port_ok = False
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or not port_ok
            or parts.username is not None
            or parts.path
            or parts.query
            or parts.fragment
            or item.endswith(("?", "#", ":"))
            or not item.isascii()
            or any(c in item for c in " *")
        ):
            raise SettingsError(
                f"{name} must be `*`, `none` or a comma-separated list of origins such as "
                f"https://player.example.com (scheme, host and optional port; no path), got {item!r}"
            )
        origins.append(item.lower())
    return tuple(dict.fromkeys(origins))


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
    body_timeout_seconds: float = 30.0
    """How long a request's body may take to arrive once its head has: one still incomplete then is answered
    408 and its connection closed, so that a body sent a byte a second cannot hold a connection forever."""
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
    retention_days: int | None = None
    """Settled ad requests played longer ago than this are rolled up into report_rollups and deleted
    (adslot.retention); None keeps every row."""
    screen_plays_retention_days: int | None = 35
    """Each screen's counted plays per hour (screen_plays, the Screens page's charts and today's figures)
    older than this are deleted by the retention task; None keeps every hour."""
    alert_retention_days: int | None = 90
    """Alerts cleared longer ago than this, with every notice sent or given up, are deleted with their
    deliveries and attempts, and so are older delivery attempts; None keeps them all."""
    retention_batch_rows: int = 200
    """Ad requests per rollup transaction: on SQLite ~12 ms of the write turn (measured; 500 took ~22)."""
    retention_pause_seconds: float = 0.1
    """Rest between two rollup transactions, so the ledger writer commits many batches between them."""
    cors_origins: tuple[str, ...] = ("*",)
    """The origins whose pages may call the player-facing endpoints (edge/cors.py): ("*",) any, () none."""
    cors_max_age_seconds: int = 86400
    """How long a browser may cache a preflight's answer (Access-Control-Max-Age)."""
    log_format: str = "text"
    """`text` (readable) or `json` (one JSON object a line), telemetry/logs.py."""
    log_level: str = "info"
    rate_limit_ad_requests: float = 0.0
    """Ad requests a second per API key (limits/); 0: no limit."""
    rate_limit_burst: float = 0.0
    """A key's bucket size: the requests it may make at once; 0: twice the rate (at least 1)."""
    rate_limit_pixels: int = 50
    """Pixel fires a second per ad request uuid, per process (limits/pixels.py); 0: no limit. A play fires at
    most twelve (six events, both VAST layers): fifty in one second is no player, only a flood."""
    currency: str = "USD"
    """The account currency: campaigns' CPMs are in it, and demand partners are asked to bid in it (a
    partner configured in another currency is not asked: prices in two currencies cannot compete)."""
    demand_billing_interval_seconds: float = 0.5
    """How often each worker looks for billing notices (burl) that fell due (demand/billing.py)."""
    redis_url: str | None = None
    """Where the ad request limits are shared across processes and nodes; None: each process its own."""
    redis_key_prefix: str = "adslot"
    """The start of every Redis key adslot writes, for deployments that share one Redis."""

    pop_upload_window_seconds: int = 72 * HOUR
    """How long after its played_at an offline player's fire may arrive (batch PoP) and still count."""
    ivt_rules: tuple[str, ...] = IVT_RULES
    """The invalid-traffic rules switched on (ledger/ivt.py)."""
    ivt_too_fast_percent: int = 75
    """too_fast: k quartiles apart need k/4 of the creative's duration times this percent, less the
    tolerance."""
    ivt_tolerance_seconds: int = 2
    """too_fast and out_of_order: the clock slack allowed between two events' times."""
    ivt_burst_impressions: int = 600
    """burst: first impressions one network may send within ivt_burst_seconds (per process)."""
    ivt_burst_seconds: int = 60
    ivt_ipv4_prefix: int = 16
    """foreign_network and burst: the size of a network, as a prefix length."""
    ivt_ipv6_prefix: int = 48
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or CIDR networks of reverse proxies whose X-Forwarded-For names the client (api/sources.py);
    empty: the peer address is the client."""
    metrics_allow: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    """The client networks that may read {host}/metrics (ops/app.py); others get 403."""
    metrics_token: str | None = None
    """When set, {host}/metrics also requires `Authorization: Bearer <token>` (401 without it)."""
    screen_silent_seconds: int = 900
    """A screen open and silent this long raises an alert (fleet/); an environment's own value wins."""
    screen_check_seconds: float = 30.0
    """How often each node's screen checker looks at the fleet and sends what its outbox holds."""
    screen_not_playing_seconds: int = 3600
    """The window over which a screen's counted plays are compared with its fills (the not_playing rule)."""
    alert_webhooks_allow_private: bool = False
    """Whether alert webhooks may go to loopback or private addresses (tests, an in-house receiver)."""
    smtp_host: str | None = None
    """The SMTP server alert emails go through; None: no email."""
    smtp_port: int = 587
    smtp_starttls: bool = True
    """Upgrade the connection with STARTTLS before anything is sent, and refuse a server that does not offer
    it; the server's certificate is verified (chain and host name) against smtp_ca_file or the system's."""
    smtp_ca_file: Path | None = None
    """A PEM file of the CAs the SMTP server's certificate must chain to, instead of the system's store (a
    private CA, a self-signed server)."""
    smtp_user: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    """Never shown nor logged."""
    smtp_from: str = "adslot@localhost"

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


MIN_RETENTION_DAYS = 8
"""The Health page reads a week of ad requests; a day more keeps its window whole."""


def _days_or_off(env: dict[str, str], name: str, default: int | None, minimum: int) -> int | None:
    """A number of days; `off` keeps everything; unset or empty: `default`."""
    raw = env.get(name, "").strip().lower()
    if raw == "off":
        return None
    if raw == "":
        return default
    return _int(env, name, 0, minimum)


def _retention_days(env: dict[str, str]) -> int | None:
    """ADSLOT_RETENTION_DAYS: unset, empty or `off` keeps everything."""
    if env.get("ADSLOT_RETENTION_DAYS", "").strip().lower() in ("", "off"):
        return None
    return _int(env, "ADSLOT_RETENTION_DAYS", 0, MIN_RETENTION_DAYS)


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
        body_timeout_seconds=_int(env, "ADSLOT_BODY_TIMEOUT_MS", _ms(DEFAULTS.body_timeout_seconds), 100)
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
        retention_days=_retention_days(env),
        screen_plays_retention_days=_days_or_off(
            env, "ADSLOT_SCREEN_PLAYS_RETENTION_DAYS", DEFAULTS.screen_plays_retention_days, 2
        ),
        alert_retention_days=_days_or_off(
            env, "ADSLOT_ALERT_RETENTION_DAYS", DEFAULTS.alert_retention_days, 1
        ),
        retention_batch_rows=_int(
            env, "ADSLOT_RETENTION_BATCH_ROWS", DEFAULTS.retention_batch_rows, 1, 10_000
        ),
        retention_pause_seconds=_int(
            env, "ADSLOT_RETENTION_PAUSE_MS", _ms(DEFAULTS.retention_pause_seconds), 0, 60_000
        )
        / 1000,
        pop_upload_window_seconds=_int(
            env, "ADSLOT_POP_UPLOAD_WINDOW_HOURS", DEFAULTS.pop_upload_window_seconds // HOUR, 1, 24 * 365
        )
        * HOUR,
        ivt_rules=_rules(env, "ADSLOT_IVT_RULES"),
        ivt_too_fast_percent=_int(env, "ADSLOT_IVT_TOO_FAST_PERCENT", DEFAULTS.ivt_too_fast_percent, 1, 100),
        ivt_tolerance_seconds=_int(
            env, "ADSLOT_IVT_TOLERANCE_SECONDS", DEFAULTS.ivt_tolerance_seconds, 0, 3600
        ),
        ivt_burst_impressions=_int(env, "ADSLOT_IVT_BURST_IMPRESSIONS", DEFAULTS.ivt_burst_impressions, 1),
        ivt_burst_seconds=_int(env, "ADSLOT_IVT_BURST_SECONDS", DEFAULTS.ivt_burst_seconds, 1, 86400),
        ivt_ipv4_prefix=_int(env, "ADSLOT_IVT_IPV4_PREFIX", DEFAULTS.ivt_ipv4_prefix, 1, 32),
        ivt_ipv6_prefix=_int(env, "ADSLOT_IVT_IPV6_PREFIX", DEFAULTS.ivt_ipv6_prefix, 1, 56),
        trusted_proxies=_networks(env, "ADSLOT_TRUSTED_PROXIES"),
        cors_origins=_origins(env, "ADSLOT_CORS_ORIGINS"),
        cors_max_age_seconds=_int(
            env, "ADSLOT_CORS_MAX_AGE_SECONDS", DEFAULTS.cors_max_age_seconds, 0, 86400
        ),
        log_format=_choice(env, "ADSLOT_LOG_FORMAT", LOG_FORMATS),
        log_level=_choice(env, "ADSLOT_LOG_LEVEL", LOG_LEVELS),
        rate_limit_ad_requests=_rate(env, "ADSLOT_RATE_LIMIT_AD_REQUESTS", DEFAULTS.rate_limit_ad_requests),
        rate_limit_burst=_rate(env, "ADSLOT_RATE_LIMIT_BURST", DEFAULTS.rate_limit_burst),
        rate_limit_pixels=_int(env, "ADSLOT_RATE_LIMIT_PIXELS", DEFAULTS.rate_limit_pixels, 0),
        currency=_currency(env, "ADSLOT_CURRENCY", DEFAULTS.currency),
        demand_billing_interval_seconds=_int(
            env,
            "ADSLOT_DEMAND_BILLING_INTERVAL_MS",
            int(DEFAULTS.demand_billing_interval_seconds * 1000),
            10,
            600_000,
        )
        / 1000,
        redis_url=_redis_url(env, "ADSLOT_REDIS_URL"),
        redis_key_prefix=_redis_prefix(env, "ADSLOT_REDIS_KEY_PREFIX"),
        metrics_allow=_networks(env, "ADSLOT_METRICS_ALLOW") or DEFAULTS.metrics_allow,
        metrics_token=_token(env, "ADSLOT_METRICS_TOKEN"),
        screen_silent_seconds=_int(env, "ADSLOT_SCREEN_SILENT_SECONDS", DEFAULTS.screen_silent_seconds, 1),
        screen_check_seconds=_int(env, "ADSLOT_SCREEN_CHECK_MS", _ms(DEFAULTS.screen_check_seconds), 50)
        / 1000,
        screen_not_playing_seconds=_int(
            env, "ADSLOT_SCREEN_NOT_PLAYING_SECONDS", DEFAULTS.screen_not_playing_seconds, 1
        ),
        alert_webhooks_allow_private=_bool(env, "ADSLOT_ALERT_WEBHOOKS_ALLOW_PRIVATE", False),
        smtp_host=env.get("ADSLOT_SMTP_HOST") or None,
        smtp_port=_int(env, "ADSLOT_SMTP_PORT", DEFAULTS.smtp_port, 1, 65535),
        smtp_starttls=_bool(env, "ADSLOT_SMTP_STARTTLS", DEFAULTS.smtp_starttls),
        smtp_ca_file=Path(ca) if (ca := env.get("ADSLOT_SMTP_CA_FILE")) else None,
        smtp_user=env.get("ADSLOT_SMTP_USER") or None,
        smtp_password=env.get("ADSLOT_SMTP_PASSWORD") or None,
        smtp_from=env.get("ADSLOT_SMTP_FROM") or DEFAULTS.smtp_from,
    )
    if 0 < settings.rate_limit_burst < 1:
        raise SettingsError("ADSLOT_RATE_LIMIT_BURST must be 0 (twice the rate) or at least 1")
    if settings.play_window_seconds <= settings.play_time_skew_seconds:
        raise SettingsError("ADSLOT_PLAY_WINDOW_SECONDS must exceed ADSLOT_PLAY_TIME_SKEW_SECONDS")
    if settings.smtp_ca_file is not None and not settings.smtp_ca_file.is_file():
        raise SettingsError(f"ADSLOT_SMTP_CA_FILE: no file {str(settings.smtp_ca_file)!r}")
    if settings.smtp_user and settings.smtp_password and not settings.smtp_starttls:
        # smtplib would send the login in clear, to whoever answers on the way.
        raise SettingsError("ADSLOT_SMTP_USER and ADSLOT_SMTP_PASSWORD need ADSLOT_SMTP_STARTTLS")
    days = settings.retention_days
    if days is not None and days * 24 * HOUR <= settings.pop_upload_window_seconds:
        # A fire uploaded late must still find its ad request's row, not a rolled-up one.
        raise SettingsError("ADSLOT_RETENTION_DAYS must exceed ADSLOT_POP_UPLOAD_WINDOW_HOURS")
    return settings
