"""adslot's command line: serve, database, keys, venues, screens, advertisers, campaigns, creatives."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import msgspec
import sqlalchemy as sa

from adslot.auth import repository as keys_repo
from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CampaignPatch, CreativeIn
from adslot.catalog import bump_version
from adslot.environment import prepare_database
from adslot.errors import ApiError
from adslot.inventory import repository as inventory_repo
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.settings import ENVIRONMENTS, SettingsError, load_settings
from adslot.storage.database import make_engine

T = TypeVar("T")
ENV_OPTION = click.option(
    "--env",
    "env_name",
    type=click.Choice(ENVIRONMENTS),
    default="production",
    show_default=True,
    help="Which environment's database to act on.",
)


def _run(env_name: str, fn: Callable[[sa.Connection], T], *, write: bool = False) -> T:
    """Run fn in one transaction on the environment's (migrated) database; writes bump the catalog."""
    try:
        env = load_settings().environment(env_name)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    prepare_database(env)
    engine = make_engine(env)
    try:
        with engine.begin() as conn:
            result = fn(conn)
            if write:
                bump_version(conn)
            return result
    except ApiError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from exc
    finally:
        engine.dispose()


def _echo(value: Any) -> None:
    click.echo(json.dumps(msgspec.to_builtins(value), indent=2))


def _convert(data: dict[str, Any], kind: type[T]) -> T:
    try:
        return msgspec.convert({k: v for k, v in data.items() if v is not None}, kind)
    except msgspec.ValidationError as exc:
        raise click.ClickException(str(exc)) from exc


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
    key = None
    for env in settings.environments:
        key = prepare_database(env) or key
    production, sandbox = settings.environment("production"), settings.environment("sandbox")
    click.echo(f"adslot serving on http://{settings.host}:{settings.port} ({workers} worker(s))")
    click.echo(f"  production base URL : {production.public_url}")
    click.echo(f"  sandbox base URL    : {sandbox.public_url}")
    click.echo(f"  sandbox playground  : {sandbox.public_url}/playground")
    click.echo(f"  sandbox testing key : {key}")
    click.echo(f"  data                : {settings.data_dir.resolve()}")
    sys.stdout.flush()
    uvicorn.run(
        "adslot.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        loop="uvloop" if sys.platform != "win32" else "asyncio",
        http="httptools",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=10,
    )


@main.group()
def db() -> None:
    """Database maintenance."""


@db.command("upgrade")
@ENV_OPTION
def db_upgrade(env_name: str) -> None:
    """Apply migrations (serve does this itself)."""
    _run(env_name, lambda conn: None)
    click.echo(f"{env_name}: database at the latest migration")


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
    key, info = _run(
        env_name,
        lambda c: keys_repo.create_key(
            c, account=account, prefix=prefix, scopes=",".join(scopes), label=label
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
    _echo([k.__dict__ for k in _run(env_name, keys_repo.list_keys)])


@keys.command("revoke")
@ENV_OPTION
@click.argument("key_id", type=int)
def keys_revoke(env_name: str, key_id: int) -> None:
    """Revoke a key by id; running servers stop accepting it within a second."""
    if not _run(env_name, lambda c: keys_repo.revoke_key(c, key_id), write=True):
        raise click.ClickException(f"no active key with id {key_id}")
    click.echo(f"key {key_id} revoked")


@main.group()
def venues() -> None:
    """Venues and screens."""


@venues.command("add")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--name", required=True)
@click.option("--timezone", default="UTC", show_default=True)
@click.option("--latitude", type=float)
@click.option("--longitude", type=float)
@click.option("--venue-type")
def venues_add(env_name: str, **fields: Any) -> None:
    data = _convert(fields, VenueIn)
    _echo(_run(env_name, lambda c: inventory_repo.create_venue(c, data), write=True))


@venues.command("list")
@ENV_OPTION
def venues_list(env_name: str) -> None:
    _echo(_run(env_name, inventory_repo.list_venues))


@venues.command("add-screen")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--screen-id", required=True)
@click.option("--name")
@click.option("--width", type=int)
@click.option("--height", type=int)
def venues_add_screen(env_name: str, venue_id: str, **fields: Any) -> None:
    data = _convert(fields, ScreenIn)
    _echo(_run(env_name, lambda c: inventory_repo.add_screen(c, venue_id, data), write=True))


@main.group()
def campaigns() -> None:
    """Advertisers, campaigns and creatives."""


@campaigns.command("add-advertiser")
@ENV_OPTION
@click.option("--name", required=True)
@click.option("--category")
def campaigns_add_advertiser(env_name: str, **fields: Any) -> None:
    data = _convert(fields, AdvertiserIn)
    _echo(_run(env_name, lambda c: campaigns_repo.create_advertiser(c, data), write=True))


@campaigns.command("add")
@ENV_OPTION
@click.option("--advertiser-id", type=int, required=True)
@click.option("--name", required=True)
@click.option("--start-at", type=int, required=True, help="UTC epoch seconds")
@click.option("--end-at", type=int, required=True, help="UTC epoch seconds")
@click.option("--venue", "venue_ids", multiple=True, help="Targeted venue id; repeat. None: all venues.")
@click.option("--status", type=click.Choice(["active", "paused"]), default="active", show_default=True)
def campaigns_add(env_name: str, venue_ids: tuple[str, ...], **fields: Any) -> None:
    data = _convert({**fields, "venue_ids": list(venue_ids) or None}, CampaignIn)
    _echo(_run(env_name, lambda c: campaigns_repo.create_campaign(c, data), write=True))


@campaigns.command("set-status")
@ENV_OPTION
@click.argument("campaign_id", type=int)
@click.argument("status", type=click.Choice(["active", "paused", "archived"]))
def campaigns_set_status(env_name: str, campaign_id: int, status: str) -> None:
    patch = CampaignPatch(status=status)  # type: ignore[arg-type]
    _echo(_run(env_name, lambda c: campaigns_repo.update_campaign(c, campaign_id, patch), write=True))


@campaigns.command("list")
@ENV_OPTION
def campaigns_list(env_name: str) -> None:
    _echo(_run(env_name, campaigns_repo.list_campaigns))


@campaigns.command("add-creative")
@ENV_OPTION
@click.option("--campaign-id", type=int, required=True)
@click.option("--name", required=True)
@click.option("--media-url", required=True)
@click.option("--mime-type", default="video/mp4", show_default=True)
@click.option("--width", type=int, required=True)
@click.option("--height", type=int, required=True)
@click.option("--duration-seconds", type=int, required=True)
@click.option("--bitrate-kbps", type=int)
def campaigns_add_creative(env_name: str, campaign_id: int, **fields: Any) -> None:
    data = _convert(fields, CreativeIn)
    _echo(_run(env_name, lambda c: campaigns_repo.add_creative(c, campaign_id, data), write=True))


if __name__ == "__main__":
    main()
