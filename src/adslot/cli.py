"""adslot's command line: serve, database, keys, venues, screens, advertisers, campaigns, creatives, demand
partners."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec
import sqlalchemy as sa

from adslot.audit import audited
from adslot.auth import repository as keys_repo
from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CampaignPatch, CreativeIn, CreativePatch
from adslot.console.commands import revoke_link, share_link, users_group
from adslot.db_commands import db_backup, db_restore, db_rollup
from adslot.demand import repository as demand_repo
from adslot.demand.partners import PartnerIn, PartnerPatch
from adslot.environment import prepare_database
from adslot.errors import ApiError, invalid_value
from adslot.fields import MAX_ID
from adslot.inventory import repository as inventory_repo
from adslot.inventory.csv_import import import_venues
from adslot.inventory.schemas import ScreenIn, ScreenPatch, VenueIn, VenuePatch
from adslot.ledger.backends import with_writer_processes
from adslot.ledger.ivt import ivt_config
from adslot.ledger.shared_writer import shared_writers
from adslot.player.commands import player_settings, screens_group
from adslot.progress import progress_bar
from adslot.settings import ENVIRONMENTS, SettingsError, load_settings
from adslot.shell import CommandError, api_error, cli_actor, run_on
from adslot.simulation.forecast import ExistingCampaign, forecast
from adslot.telemetry.logs import configure_logging
from adslot.telemetry.metrics import prepare_multiprocess
from adslot.workers import REUSE_PORT, bound_socket, run_workers, serve_one

T = TypeVar("T")
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
ENV_OPTION = click.option(
    "--env",
    "env_name",
    type=click.Choice(ENVIRONMENTS),
    default="production",
    show_default=True,
    help="Which environment's database to act on.",
)
ID = click.IntRange(1, MAX_ID)
"""Every row id the CLI takes: a larger one names nothing (fields.MAX_ID), and the database would refuse it
with an error rather than find no row."""


def _echo(value: Any) -> None:
    click.echo(json.dumps(msgspec.to_builtins(value), indent=2))


def _convert(data: dict[str, Any], kind: type[T], clear: dict[str, object] | None = None) -> T:
    """The flags given (and the members to clear) as the JSON body the API would receive, decoded by the
    same schema: the CLI accepts and refuses exactly what the API does, with the same code and field."""
    body = {k: v for k, v in data.items() if v is not None and v != ()} | (clear or {})
    try:
        return msgspec.json.decode(msgspec.json.encode(body), type=kind)
    except msgspec.ValidationError as exc:
        raise api_error(invalid_value(exc)) from exc


def _json(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A JSON option's value; None when the option is not given (--clear empties a member)."""
    if value is None:
        return None
    try:
        return msgspec.json.decode(value)
    except msgspec.DecodeError as exc:
        raise CommandError(f"invalid_json: --{(param.name or '').replace('_', '-')}: {exc}") from exc


def _json_option(name: str, help: str) -> Decorator:
    return click.option(name, callback=_json, metavar="JSON", help=help)


def _options(*options: Decorator) -> Decorator:
    """Several options as one decorator, listed in --help in the order given."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def _clear_option(*members: str) -> Decorator:
    return click.option(
        "--clear",
        "clear",
        multiple=True,
        type=click.Choice(members),
        help="Empty this member (null, or [] for a list); repeat for several.",
    )


def _cleared(names: tuple[str, ...], lists: frozenset[str] = frozenset()) -> dict[str, object]:
    return {name: [] if name in lists else None for name in names}


def _http_protocol(version: str) -> Any:
    """adslot's HTTP protocol with its hot lane, or uvicorn's own where this uvicorn lacks what the lane
    uses (api/protocol.py's INTERNALS): every request then goes through the framework, slower but whole."""
    try:
        from adslot.api.protocol import AdslotHttpProtocol, missing_internals

        missing = missing_internals()
    except ImportError as exc:
        missing = [str(exc)]
    if missing:
        click.echo(
            f"warning: uvicorn {version} lacks what adslot's hot lane uses ({', '.join(missing)}); "
            "serving every request through the framework",
            err=True,
        )
        return "httptools"
    return AdslotHttpProtocol


@click.group()
def main() -> None:
    """adslot: an ad server for digital-out-of-home screens."""


@main.command()
@click.option("--host", default=None, help="Interface to bind (ADSLOT_HOST, default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to bind (ADSLOT_PORT, default 8000).")
@click.option("--workers", type=int, default=1, show_default=True, help="Worker processes.")
@click.option("--log-level", default="warning", show_default=True)
def serve(host: str | None, port: int | None, workers: int, log_level: str) -> None:
    """Migrate both environments, seed the sandbox, print how to reach them and serve."""
    import uvicorn

    if host:
        os.environ["ADSLOT_HOST"] = host
    if port is not None:
        os.environ["ADSLOT_PORT"] = str(port)
    try:
        settings = load_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    configure_logging(settings.log_format, settings.log_level)
    key = None
    for env in settings.environments:
        key = prepare_database(env, serving=True) or key
    production, sandbox = settings.environment("production"), settings.environment("sandbox")

    def announce() -> None:
        """Once the port accepts connections: a script that waits for these lines may connect at once."""
        click.echo(f"adslot serving on http://{settings.host}:{settings.port} ({workers} worker(s))")
        click.echo(f"  production base URL : {production.public_url}")
        click.echo(f"  sandbox base URL    : {sandbox.public_url}")
        click.echo(f"  sandbox playground  : {sandbox.public_url}/playground")
        click.echo(f"  sandbox testing key : {key}")
        click.echo(f"  data                : {settings.data_dir.resolve()}")
        sys.stdout.flush()

    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "loop": "uvloop" if sys.platform != "win32" else "asyncio",
        "http": _http_protocol(uvicorn.__version__),
        "log_level": log_level,
        "log_config": None,  # uvicorn's loggers use adslot's (telemetry/logs.py)
        "access_log": False,
        "timeout_graceful_shutdown": 10,
    }
    app = "adslot.app:create_app"

    def run() -> None:
        if workers > 1 and not REUSE_PORT:
            announce()  # uvicorn's own supervisor binds the port after this
            uvicorn.run(app, factory=True, workers=workers, **options)
            return
        try:
            sock = bound_socket(settings.host, settings.port, reuse_port=workers > 1)
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {settings.host}:{settings.port}: {exc}") from exc
        config = uvicorn.Config(app, factory=True, **options)
        if workers > 1:
            run_workers(config, workers, sock, announce)
        else:
            serve_one(config, sock, announce)

    # SQLite's ledger writer process of each environment, for all workers: one commit for all their batches.
    with shared_writers(with_writer_processes(settings.environments), ivt_config(settings)) as socket_dir:
        os.environ["ADSLOT_LEDGER_SOCKET_DIR"] = str(socket_dir)
        if workers > 1:  # the workers' metrics meet in files there, read by /metrics (telemetry/metrics.py)
            prepare_multiprocess(settings.data_dir.resolve() / "metrics" / str(settings.port))
        run()


@main.group()
def db() -> None:
    """Database maintenance."""


@db.command("upgrade")
@ENV_OPTION
def db_upgrade(env_name: str) -> None:
    """Apply migrations (serve does this itself)."""
    run_on(env_name, lambda conn: None)
    click.echo(f"{env_name}: database at the latest migration")


for _command in (db_backup, db_restore, db_rollup):  # db_commands.py
    db.add_command(_command)


@main.group()
def keys() -> None:
    """Account API keys."""


@keys.command("create")
@ENV_OPTION
@click.option("--account", required=True, help="Account name; created if new.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    default=("ad_request",),
    show_default=True,
    type=click.Choice(["ad_request", "admin"]),
    help="Permission; repeat for several.",
)
@click.option("--label", default=None)
def keys_create(env_name: str, account: str, scopes: tuple[str, ...], label: str | None) -> None:
    """Create a key and print it once: only its hash is stored."""
    prefix = "ssp_live_" if env_name == "production" else "ssp_test_"
    key, info = run_on(
        env_name,
        audited(
            cli_actor(),
            "key.create",
            f"key for account {account}",
            lambda c: keys_repo.create_key(
                c, account=account, prefix=prefix, scopes=",".join(scopes), label=label
            ),
            after=lambda made: made[1],
        ),
        write=True,
    )
    click.echo(key)
    click.echo(
        f"key id {info.id}, account {info.account}, scopes {','.join(info.scopes)}; "
        "store it now, it is not shown again",
        err=True,
    )


@keys.command("list")
@ENV_OPTION
def keys_list(env_name: str) -> None:
    """List keys (prefix only)."""
    _echo([k.__dict__ for k in run_on(env_name, keys_repo.list_keys)])


@keys.command("revoke")
@ENV_OPTION
@click.argument("key_id", type=ID)
def keys_revoke(env_name: str, key_id: int) -> None:
    """Revoke a key by id; running servers stop accepting it within a second."""
    if not run_on(
        env_name,
        audited(cli_actor(), "key.revoke", f"key {key_id}", lambda c: keys_repo.revoke_key(c, key_id)),
        write=True,
    ):
        raise click.ClickException(f"no active key with id {key_id}")
    click.echo(f"key {key_id} revoked")


@main.group()
def venues() -> None:
    """Venues and screens."""


VENUE_OPTIONS = _options(
    click.option("--latitude", type=float),
    click.option("--longitude", type=float),
    click.option("--venue-type", help="OpenOOH venue taxonomy id, e.g. 1.1"),
    click.option("--tag", "tags", multiple=True, help="A label campaigns target; repeat."),
    click.option("--country", help="ISO 3166-1 alpha-2"),
    click.option("--region"),
    click.option("--city"),
    click.option("--impressions-per-play", type=float, help="Audience of one play (default 1.0)."),
    _json_option("--hourly-impressions", "168 impressions-per-play figures, Monday 00h first."),
)
"""The venue members add and update share (add requires --name)."""


@venues.command("add")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--name", required=True)
@click.option("--timezone", default="UTC", show_default=True)
@VENUE_OPTIONS
def venues_add(env_name: str, **fields: Any) -> None:
    """Register a venue."""
    data = _convert(fields, VenueIn)
    _echo(run_on(env_name, lambda c: inventory_repo.create_venue(c, data), write=True))


@venues.command("update")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--name")
@click.option("--timezone")
@VENUE_OPTIONS
@_clear_option(
    "latitude", "longitude", "venue_type", "tags", "country", "region", "city", "hourly_impressions"
)
def venues_update(env_name: str, venue_id: str, clear: tuple[str, ...], **fields: Any) -> None:
    """Change a venue: only the members given change."""
    patch = _convert(fields, VenuePatch, _cleared(clear, frozenset({"tags"})))
    _echo(run_on(env_name, lambda c: inventory_repo.update_venue(c, venue_id, patch), write=True))


@venues.command("list")
@ENV_OPTION
def venues_list(env_name: str) -> None:
    _echo(run_on(env_name, inventory_repo.list_venues))


SCREEN_OPTIONS = _options(
    click.option("--venue-id", required=True),
    click.option("--screen-id", required=True),
    click.option("--name"),
    click.option("--width", type=int),
    click.option("--height", type=int),
    click.option("--orientation", type=click.Choice(["landscape", "portrait", "square"])),
    click.option("--mime-type", "mime_types", multiple=True, help="A video type it plays; repeat."),
    click.option("--max-duration-seconds", type=int),
)


@venues.command("add-screen")
@ENV_OPTION
@SCREEN_OPTIONS
def venues_add_screen(env_name: str, venue_id: str, **fields: Any) -> None:
    """Add a screen to a venue."""
    data = _convert(fields, ScreenIn)
    _echo(run_on(env_name, lambda c: inventory_repo.add_screen(c, venue_id, data), write=True))


@venues.command("update-screen")
@ENV_OPTION
@SCREEN_OPTIONS
@_clear_option("name", "width", "height", "orientation", "mime_types", "max_duration_seconds")
def venues_update_screen(
    env_name: str, venue_id: str, screen_id: str, clear: tuple[str, ...], **fields: Any
) -> None:
    """Change a screen: only the members given change."""
    patch = _convert(fields, ScreenPatch, _cleared(clear))
    _echo(run_on(env_name, lambda c: inventory_repo.update_screen(c, venue_id, screen_id, patch), write=True))


@venues.command("hours")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option(
    "--set",
    "hours",
    help='Opening hours as JSON, a key per day: \'{"mon": ["08:00-22:00"], "sun": []}\' (a day left out is '
    "closed; local time).",
)
@click.option("--always-open", is_flag=True, help="Drop the venue's hours: it is always open.")
def venues_hours(env_name: str, venue_id: str, hours: str | None, always_open: bool) -> None:
    """Show or set a venue's opening hours (silence while it is closed raises no alert)."""
    from adslot.api.screens import get_hours, put_hours

    if hours is not None or always_open:
        try:
            given = None if always_open else json.loads(hours or "")
        except json.JSONDecodeError as exc:
            raise api_error(ApiError(400, "invalid_json", f"--set is not JSON: {exc}", "hours")) from exc
        _echo(run_on(env_name, lambda c: put_hours(c, venue_id, given), write=True))
    else:
        _echo(run_on(env_name, lambda c: get_hours(c, venue_id)))


@venues.command("import")
@ENV_OPTION
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def venues_import(env_name: str, csv_file: Path) -> None:
    """Create or update venues and screens from a CSV file (the columns of POST /api/v1/venues/import),
    all or nothing."""
    body = csv_file.read_bytes()
    with progress_bar("Importing") as progress:
        result = run_on(env_name, lambda c: import_venues(c, body, progress), write=True)
    _echo(result)


@main.group()
def campaigns() -> None:
    """Advertisers, campaigns and creatives."""


@campaigns.command("add-advertiser")
@ENV_OPTION
@click.option("--name", required=True)
@click.option("--category", help="Competitive separation keeps one category's campaigns apart.")
def campaigns_add_advertiser(env_name: str, **fields: Any) -> None:
    data = _convert(fields, AdvertiserIn)
    _echo(run_on(env_name, lambda c: campaigns_repo.create_advertiser(c, data), write=True))


RULE_OPTIONS = _options(
    click.option("--tier", type=click.Choice(["sponsorship", "standard", "house"])),
    click.option("--weight", type=int, help="1..1000000 (default 100)"),
    click.option("--timezone", help="IANA time zone of daily caps and pacing (default UTC)."),
    _json_option("--targeting", '{"venue_types": ["1.1"], "geo": {"countries": ["DE"]}, ...}'),
    _json_option("--exclusions", "Same shape as --targeting."),
    _json_option("--dayparts", '[{"days": ["mon", "tue"], "start_hour": 7, "end_hour": 10}]'),
    _json_option("--caps", '[{"period": "daily", "metric": "plays", "limit": 500}]'),
    click.option("--cpm", type=float, help="Price per 1,000 impressions (needed by spend caps)."),
    click.option("--pacing", type=click.Choice(["asap", "even"])),
    _json_option("--frequency", '{"per_hour": 2, "per_day": 10} per screen'),
    click.option("--separation-minutes", type=int),
    click.option("--share-of-voice", type=float, help="0 < x <= 1"),
)
"""The decisioning members add and update share; nested ones are JSON, as in the API body."""


@campaigns.command("add")
@ENV_OPTION
@click.option("--advertiser-id", type=ID, required=True)
@click.option("--name", required=True)
@click.option("--start-at", type=int, required=True, help="UTC epoch seconds")
@click.option("--end-at", type=int, required=True, help="UTC epoch seconds")
@click.option("--venue", "venue_ids", multiple=True, help="Targeted venue id; repeat. None: all venues.")
@click.option("--status", type=click.Choice(["active", "paused"]), default="active", show_default=True)
@RULE_OPTIONS
def campaigns_add(env_name: str, venue_ids: tuple[str, ...], **fields: Any) -> None:
    """Create a campaign."""
    data = _convert({**fields, "venue_ids": list(venue_ids) or None}, CampaignIn)
    _echo(run_on(env_name, lambda c: campaigns_repo.create_campaign(c, data), write=True))


@campaigns.command("update")
@ENV_OPTION
@click.argument("campaign_id", type=ID)
@click.option("--name")
@click.option("--status", type=click.Choice(["active", "paused", "archived"]))
@click.option("--start-at", type=int, help="UTC epoch seconds")
@click.option("--end-at", type=int, help="UTC epoch seconds")
@click.option("--venue", "venue_ids", multiple=True, help="Run only in these venues; repeat.")
@click.option("--all-venues", is_flag=True, default=None, help="Run in every venue.")
@RULE_OPTIONS
@_clear_option("targeting", "exclusions", "dayparts", "caps", "cpm", "frequency", "share_of_voice")
def campaigns_update(
    env_name: str, campaign_id: int, venue_ids: tuple[str, ...], clear: tuple[str, ...], **fields: Any
) -> None:
    """Change a campaign: only the members given change; nested ones are replaced whole."""
    cleared = _cleared(clear, frozenset({"dayparts", "caps"}))
    patch = _convert({**fields, "venue_ids": list(venue_ids) or None}, CampaignPatch, cleared)
    _echo(run_on(env_name, lambda c: campaigns_repo.update_campaign(c, campaign_id, patch), write=True))


@campaigns.command("forecast")
@ENV_OPTION
@click.argument("campaign_id", type=ID)
@click.option(
    "--hours", type=click.IntRange(1), help="Hours to forecast (default: the flight, at most 7 days)."
)
@click.option("--slot-seconds", type=click.IntRange(1), default=300, show_default=True)
def campaigns_forecast(env_name: str, campaign_id: int, hours: int | None, slot_seconds: int) -> None:
    """What a stored campaign would deliver, as if active, and what it would take from the live ones (the
    report as JSON). On a terminal, a progress bar on standard error."""
    try:
        data_dir = load_settings().data_dir / "forecasts"
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    with progress_bar("Forecasting") as progress:
        report = run_on(
            env_name,
            lambda c: forecast(
                c,
                ExistingCampaign(campaign_id),
                data_dir=data_dir,
                hours=hours,
                slot_seconds=slot_seconds,
                progress=progress,
            ),
            catalog=False,
        )
    _echo(report)


@campaigns.command("set-status")
@ENV_OPTION
@click.argument("campaign_id", type=ID)
@click.argument("status", type=click.Choice(["active", "paused", "archived"]))
def campaigns_set_status(env_name: str, campaign_id: int, status: str) -> None:
    patch = CampaignPatch(status=status)  # type: ignore[arg-type]
    _echo(run_on(env_name, lambda c: campaigns_repo.update_campaign(c, campaign_id, patch), write=True))


@campaigns.command("list")
@ENV_OPTION
def campaigns_list(env_name: str) -> None:
    _echo(run_on(env_name, campaigns_repo.list_campaigns))


@campaigns.command("add-creative")
@ENV_OPTION
@click.option("--campaign-id", type=ID, required=True)
@click.option("--name", required=True)
@click.option("--media-url", required=True)
@click.option("--mime-type", default="video/mp4", show_default=True)
@click.option("--width", type=int, required=True)
@click.option("--height", type=int, required=True)
@click.option("--duration-seconds", type=int, required=True)
@click.option("--bitrate-kbps", type=int)
@click.option("--weight", type=int, help="Share among the campaign's creatives (default 100).")
@click.option("--size-bytes", type=int)
@click.option("--sha256", help="Lower-case hex SHA-256 of the media file.")
@click.option(
    "--media-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A local copy of the media: fills --size-bytes and --sha256 from it.",
)
def campaigns_add_creative(env_name: str, campaign_id: int, media_file: Path | None, **fields: Any) -> None:
    """Add a creative to a campaign."""
    if media_file is not None:
        media = media_file.read_bytes()
        fields |= {"size_bytes": len(media), "sha256": hashlib.sha256(media).hexdigest()}
    data = _convert(fields, CreativeIn)
    _echo(run_on(env_name, lambda c: campaigns_repo.add_creative(c, campaign_id, data), write=True))


@campaigns.command("update-creative")
@ENV_OPTION
@click.option("--campaign-id", type=ID, required=True)
@click.option("--creative-id", type=ID, required=True)
@click.option("--name")
@click.option("--status", type=click.Choice(["active", "paused"]))
@click.option("--weight", type=int)
def campaigns_update_creative(env_name: str, campaign_id: int, creative_id: int, **fields: Any) -> None:
    """Pause, resume, rename or reweigh a creative."""
    patch = _convert(fields, CreativePatch)
    _echo(
        run_on(
            env_name,
            lambda c: campaigns_repo.update_creative(c, campaign_id, creative_id, patch),
            write=True,
        )
    )


campaigns.add_command(share_link)
campaigns.add_command(revoke_link)


@main.group()
def demand() -> None:
    """Demand partners: buyers' platforms to ask for bids over OpenRTB 2.6, a separate registry per
    environment (no bid request is sent to them yet)."""


def _comma_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """--venues lobby,hall as a list; not given: None (the default on add, unchanged on update); "": []."""
    if value is None:
        return None
    return [item.strip() for item in value.split(",")] if value.strip() else []


PARTNER_OPTIONS = _options(
    click.option("--timeout-ms", type=int, help="How long to wait for a bid, 10..2000 (default 150)."),
    click.option("--floor-cpm", type=float, help="Lowest price per 1,000 impressions (default 0)."),
    click.option("--currency", help="ISO 4217 code of the floor and the bids (default USD)."),
    click.option("--auction", type=click.Choice(["first", "second"]), help="Price rule (default first)."),
    click.option("--max-qps", type=int, help="Bid requests per second at most (default: no limit)."),
    click.option(
        "--venues",
        callback=_comma_list,
        metavar="ID,ID...",
        help="The only venues the partner may bid on (default: every venue).",
    ),
    _json_option("--deals", '[{"id": "deal-1", "floor_cpm": 5, "at": 1, "buyer_seats": ["seat-9"]}]'),
    click.option(
        "--blocked-domains",
        callback=_comma_list,
        metavar="DOMAIN,DOMAIN...",
        help="Advertiser domains whose bids are dropped (sent as badv).",
    ),
    click.option(
        "--notice-hosts",
        callback=_comma_list,
        metavar="HOST,HOST...",
        help="Hosts (host or host:port) its notices may go to besides the endpoint's; others are dropped.",
    ),
    click.option(
        "--auth-header",
        "auth_header_name",
        metavar="NAME",
        help="A credential header sent with its bid requests, to its endpoint only (e.g. Authorization).",
    ),
    click.option(
        "--auth-header-value",
        envvar="ADSLOT_AUTH_HEADER_VALUE",
        show_envvar=True,
        metavar="VALUE",
        help="The credential header's value: stored, never shown. Prefer the environment variable, which "
        "stays out of the shell history and the process list.",
    ),
)
"""The partner members add and update share (add requires --endpoint)."""


def _partner_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The flags as the API's body: --auth-header and its value as the `auth_header` object. The value is
    read only with --auth-header, so ADSLOT_AUTH_HEADER_VALUE left set changes nothing by itself."""
    name, value = fields.pop("auth_header_name", None), fields.pop("auth_header_value", None)
    if name is not None:
        fields["auth_header"] = {"name": name, "value": value or ""}
    return fields


def _partner_change(
    env_name: str, action: str, name: str, fn: Callable[[sa.Connection], T], *, deletion: bool = False
) -> T:
    """A change to an existing partner, audited with the partner as it was and as it is (nothing after a
    deletion), in one transaction; an unknown name is partner_not_found."""
    return run_on(
        env_name,
        audited(
            cli_actor(),
            action,
            f"demand partner {name}",
            fn,
            before=lambda c: demand_repo.get_partner(c, name),
            after=(lambda _: None) if deletion else None,
        ),
        write=True,
    )


@demand.command("add")
@ENV_OPTION
@click.option("--name", required=True, help="A slug: lower-case letters, digits, - and _ (64 at most).")
@click.option("--endpoint", required=True, help="The absolute http(s) URL bid requests are POSTed to.")
@PARTNER_OPTIONS
@click.option("--auto-approve", is_flag=True, help="Play its new creatives without approval.")
def demand_add(env_name: str, **fields: Any) -> None:
    """Register a demand partner (active at once)."""
    data = _convert(_partner_fields(fields), PartnerIn)
    create = audited(
        cli_actor(),
        "demand_partner.create",
        f"demand partner {data.name}",
        lambda c: demand_repo.create_partner(c, data),
    )
    _echo(run_on(env_name, create, write=True))


@demand.command("list")
@ENV_OPTION
def demand_list(env_name: str) -> None:
    """List the environment's demand partners, by name."""
    _echo(run_on(env_name, demand_repo.list_partners))


@demand.command("update")
@ENV_OPTION
@click.argument("name")
@click.option("--endpoint", help="The absolute http(s) URL bid requests are POSTed to.")
@PARTNER_OPTIONS
@click.option(
    "--auto-approve/--no-auto-approve", default=None, help="Play its new creatives without approval."
)
@_clear_option("max_qps", "venues", "notice_hosts", "auth_header")
def demand_update(env_name: str, name: str, clear: tuple[str, ...], **fields: Any) -> None:
    """Change a demand partner: only the members given change (--clear venues: every venue again;
    --clear auth_header: no credential header)."""
    patch = _convert(_partner_fields(fields), PartnerPatch, _cleared(clear, frozenset({"notice_hosts"})))
    update = partial(demand_repo.update_partner, name=name, patch=patch)
    _echo(_partner_change(env_name, "demand_partner.update", name, update))


@demand.command("pause")
@ENV_OPTION
@click.argument("name")
def demand_pause(env_name: str, name: str) -> None:
    """Pause a partner: it is to be asked for nothing; its settings are kept."""
    pause = partial(demand_repo.set_status, name=name, status="paused")
    _echo(_partner_change(env_name, "demand_partner.update", name, pause))


@demand.command("resume")
@ENV_OPTION
@click.argument("name")
def demand_resume(env_name: str, name: str) -> None:
    """Make a paused partner active again."""
    resume = partial(demand_repo.set_status, name=name, status="active")
    _echo(_partner_change(env_name, "demand_partner.update", name, resume))


@demand.command("remove")
@ENV_OPTION
@click.argument("name")
def demand_remove(env_name: str, name: str) -> None:
    """Delete a demand partner and print it as it was; its name may be used again."""
    remove = partial(demand_repo.remove_partner, name=name)
    _echo(_partner_change(env_name, "demand_partner.delete", name, remove, deletion=True))


def _public_url(env_name: str) -> str:
    """The environment's public base URL: a creative's preview_url is absolute, as the API answers it."""
    try:
        return load_settings().environment(env_name).public_url
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc


def _creative_decision(env_name: str, decision: str, creative_id: str) -> Any:
    """Approve or reject a demand creative, audited with it as it was and as it is, in one transaction; an
    id that is not a number is refused as the API refuses it, with its code and field."""
    from adslot.demand import creatives_repository as creatives_repo

    if not creative_id.isascii() or not creative_id.isdigit():
        raise api_error(ApiError(400, "invalid_field", f"{creative_id!r} is not a creative id", "id"))
    number, base_url = int(creative_id), _public_url(env_name)
    decide = creatives_repo.approve if decision == "approve" else creatives_repo.reject
    return run_on(
        env_name,
        audited(
            cli_actor(),
            f"demand_creative.{decision}",
            f"demand creative {number}",
            lambda c: decide(c, number, cli_actor(), base_url=base_url),
            before=lambda c: creatives_repo.get_creative(c, number, base_url=base_url),
        ),
        write=True,
    )


@demand.command("creatives")
@ENV_OPTION
@click.option("--status", metavar="pending|approved|rejected", help="Only creatives in this status.")
@click.option("--partner", metavar="NAME", help="Only this partner's creatives.")
def demand_creatives(env_name: str, status: str | None, partner: str | None) -> None:
    """List the creatives partners have bid, oldest first, each with its preview URL (--status pending: the
    ones waiting for approval)."""
    from adslot.demand import creatives_repository as creatives_repo
    from adslot.demand.creatives import checked_status

    try:
        wanted = checked_status(status)
    except ApiError as exc:
        raise api_error(exc) from exc
    base_url = _public_url(env_name)
    _echo(run_on(env_name, lambda c: creatives_repo.list_creatives(c, wanted, partner, base_url=base_url)))


@demand.command("approve")
@ENV_OPTION
@click.argument("creative_id", metavar="ID")
def demand_approve(env_name: str, creative_id: str) -> None:
    """Approve a demand creative: it may play from now on (approving twice changes nothing; a rejected
    creative stays rejected)."""
    _echo(_creative_decision(env_name, "approve", creative_id))


@demand.command("reject")
@ENV_OPTION
@click.argument("creative_id", metavar="ID")
def demand_reject(env_name: str, creative_id: str) -> None:
    """Reject a demand creative: it never plays again, whatever its partner bids (final)."""
    _echo(_creative_decision(env_name, "reject", creative_id))


@demand.command("test-bidder")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=9100, show_default=True, help="0: any free port."
)
@click.option(
    "--price-cpm",
    type=click.FloatRange(0, 1_000_000, min_open=True),
    default=4.2,
    show_default=True,
    help="The price bid, raised to the imp's floor.",
)
@click.option(
    "--no-bid-rate",
    type=click.FloatRange(0, 1),
    default=0.2,
    show_default=True,
    help="Share of no-bids (204).",
)
@click.option(
    "--delay-ms", type=click.IntRange(min=0), default=20, show_default=True, help="Before answering."
)
@click.option("--seed", type=int, default=None, help="Seed of the no-bid draws (default: random).")
@click.option("--log", "log_file", type=click.Path(dir_okay=False, path_type=Path), help="JSON lines here.")
@click.option("--public-url", default=None, help="Base URL of its own links (default http://HOST:PORT).")
@click.option("--below-floor", is_flag=True, help="Bid under the imp's floor, to test that it is enforced.")
def demand_test_bidder(
    host: str, port: int, log_file: Path | None, public_url: str | None, **options: Any
) -> None:
    """Run an OpenRTB 2.6 test bidder (POST /openrtb2/auction) that bids a VAST video and logs what it
    receives (to --log or stdout, and at GET /log), until Ctrl-C."""
    import contextlib

    from adslot.demand.bidder import AUCTION_PATH, base_url_for, serve_test_bidder

    try:
        base_url_for(host, port, public_url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--public-url") from exc

    def ready(base_url: str) -> None:
        click.echo(f"adslot test bidder listening on {base_url} (POST {base_url}{AUCTION_PATH})")
        sys.stdout.flush()

    with open(log_file, "a", encoding="utf-8") if log_file else contextlib.nullcontext(sys.stdout) as sink:
        try:
            serve_test_bidder(
                host=host, port=port, public_url=public_url, options=options, sink=sink, ready=ready
            )
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc


@demand.command("report")
@ENV_OPTION
@click.option("--from", "start", required=True, help="First play_time, included (UTC epoch seconds).")
@click.option("--to", "end", required=True, help="Last play_time, excluded (UTC epoch seconds).")
@click.option(
    "--timezone", "--tz", "timezone", default="UTC", show_default=True, help="IANA time zone of the hours."
)
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
def demand_report(env_name: str, **params: Any) -> None:
    """Print the demand report (per partner and hour): the API's `data` as JSON, or its CSV."""
    from adslot.reporting.demand import demand_report as build
    from adslot.reporting.formats import demand_csv
    from adslot.reporting.query import parse_demand

    query = _parsed(parse_demand, **params)
    result = run_on(env_name, lambda c: build(c, query))
    if query.fmt == "csv":
        click.echo(demand_csv(result), nl=False)
    else:
        _echo(result)


@main.group()
def report() -> None:
    """Delivery reports and the play log, as the reporting API answers them (see its OpenAPI docs)."""


def _parsed(parse: Callable[..., T], **params: Any) -> T:
    """The report query, checked by the API's own rules; a bad option ends with its error code."""
    try:
        return parse(**params)
    except ApiError as exc:
        raise click.ClickException(f"{exc.code} ({exc.field}): {exc.message}") from exc


@report.command("delivery")
@ENV_OPTION
@click.option("--from", "start", required=True, help="First play_time, included (UTC epoch seconds).")
@click.option("--to", "end", required=True, help="Last play_time, excluded (UTC epoch seconds).")
@click.option(
    "--group-by",
    default="campaign",
    show_default=True,
    help="Comma list of campaign, creative, venue, screen, day, hour.",
)
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone of days and hours.")
@click.option("--campaign-id", help="Only this campaign.")
@click.option("--venue-id", help="Only this venue.")
@click.option("--screen-id", help="Only this screen.")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
def report_delivery(env_name: str, **params: Any) -> None:
    """Print the delivery report: the API's `data` as JSON, or its CSV."""
    import time

    from adslot.reporting.formats import delivery_csv
    from adslot.reporting.query import parse_delivery
    from adslot.reporting.repository import delivery_report

    query = _parsed(parse_delivery, **params)
    result = run_on(env_name, lambda c: delivery_report(c, query, int(time.time())))
    if query.fmt == "csv":
        click.echo(delivery_csv(result), nl=False)
    else:
        _echo(result)


@report.command("playlog")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--from", "start", required=True, help="First play_time, included (UTC epoch seconds).")
@click.option("--to", "end", required=True, help="Last play_time, excluded (UTC epoch seconds).")
@click.option("--screen-id", help="Only this screen.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default="csv",
    show_default=True,
    help="csv (a header, then a line per play) or jsonl (a JSON object per line).",
)
def report_playlog(env_name: str, fmt: str, **params: Any) -> None:
    """Print every played ad request of the range, in batches, so a month of plays never sits in memory."""
    from adslot.reporting.formats import playlog_csv_header, playlog_csv_rows
    from adslot.reporting.query import parse_playlog
    from adslot.reporting.repository import playlog_batches

    query = _parsed(parse_playlog, **params)

    def write(conn: sa.Connection) -> None:
        if fmt == "csv":
            click.echo(playlog_csv_header(), nl=False)
        for batch in playlog_batches(conn, query):
            if fmt == "csv":
                click.echo(playlog_csv_rows(batch), nl=False)
            else:
                click.echo(b"".join(msgspec.json.encode(row) + b"\n" for row in batch), nl=False)

    run_on(env_name, write)


@main.command()
@click.option("--screens", type=click.IntRange(1, 20_000), default=500, show_default=True)
@click.option("--campaigns", "campaign_count", type=click.IntRange(1, 1_000), default=20, show_default=True)
@click.option("--hours", type=click.IntRange(1, 24 * 31), default=48, show_default=True)
@click.option("--slot-seconds", type=click.IntRange(10, 3600), default=300, show_default=True)
@click.option("--pop-loss", type=click.FloatRange(0, 1), default=0.03, show_default=True)
@click.option("--pop-late", type=click.FloatRange(0, 1), default=0.02, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("adslot-simulation"),
    show_default=True,
    help="Where the simulation's own SQLite database is written (never the service's).",
)
def simulate(
    screens: int,
    campaign_count: int,
    hours: int,
    slot_seconds: int,
    pop_loss: float,
    pop_late: float,
    seed: int,
    data_dir: Path,
) -> None:
    """Run the real decision engine and ledger over a virtual clock and print delivery per campaign."""
    import asyncio

    from adslot.simulation.run import SimulationConfig
    from adslot.simulation.run import simulate as run_simulation

    config = SimulationConfig(
        screens=screens,
        campaigns=campaign_count,
        hours=hours,
        slot_seconds=slot_seconds,
        pop_loss=pop_loss,
        pop_late=pop_late,
        seed=seed,
    )
    report = asyncio.run(run_simulation(config, data_dir))
    click.echo(report.render())


main.add_command(users_group)
main.add_command(screens_group)
venues.add_command(player_settings)

if __name__ == "__main__":
    main()
