"""`adslot screens player-link` and `adslot venues player-settings`: the player from the shell."""

from __future__ import annotations

import json

import click

from adslot.audit import audited
from adslot.auth.keys import LIVE_PREFIX, TEST_PREFIX
from adslot.errors import ApiError
from adslot.player import links, venue_settings
from adslot.settings import ENVIRONMENTS, SettingsError, load_settings
from adslot.shell import api_error, cli_actor, run_on

ENV_OPTION = click.option(
    "--env",
    "env_name",
    type=click.Choice(ENVIRONMENTS),
    default="production",
    show_default=True,
    help="Which environment's database to act on.",
)


@click.group("screens")
def screens_group() -> None:
    """Screens' players."""


@screens_group.command("player-link")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--screen-id", required=True)
@click.option(
    "--account", default=links.ACCOUNT, show_default=True, help="The account its ad requests count for."
)
def player_link(env_name: str, venue_id: str, screen_id: str, account: str) -> None:
    """Make a key for the screen (ad_request scope only) and print the link that puts it on air; revoking
    the key (`adslot keys revoke`) stops the screen."""
    try:
        base_url = load_settings().environment(env_name).public_url
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    prefix = LIVE_PREFIX if env_name == "production" else TEST_PREFIX
    made = run_on(
        env_name,
        audited(
            cli_actor(),
            "player.link",
            f"player link for {venue_id}/{screen_id}",
            lambda c: links.create_link(
                c, base_url=base_url, prefix=prefix, venue_id=venue_id, screen_id=screen_id, account=account
            ),
            after=lambda link: {"key_id": link.key_id, "prefix": link.prefix},
        ),
        write=True,
    )
    click.echo(made.url)
    click.echo(
        f"key id {made.key_id} ({made.prefix}…); the link holds the key: open it on the screen only",
        err=True,
    )


@click.command("player-settings")
@ENV_OPTION
@click.option("--venue-id", required=True)
@click.option("--slot-seconds", type=int, default=venue_settings.SLOT_SECONDS, show_default=True)
@click.option("--lead-seconds", type=int, default=venue_settings.LEAD_SECONDS, show_default=True)
@click.option(
    "--fallback-url", "fallback_urls", multiple=True, help="House media when there is no ad; repeat."
)
def player_settings(
    env_name: str, venue_id: str, slot_seconds: int, lead_seconds: int, fallback_urls: tuple[str, ...]
) -> None:
    """Set the venue's player settings: slot length, how far ahead it asks, its fallback media."""
    try:
        settings = venue_settings.check(slot_seconds, lead_seconds, list(fallback_urls))
    except ApiError as exc:
        raise api_error(exc) from exc
    run_on(
        env_name,
        audited(
            cli_actor(),
            "venue.player_settings",
            f"venue {venue_id}",
            lambda c: venue_settings.write(c, venue_id, settings),
            after=lambda _: settings.__dict__,
        ),
        write=True,
    )
    click.echo(json.dumps({"venue_id": venue_id, **settings.__dict__}))
