"""`adslot users ...`: console accounts, managed from the shell (the first admin has no console yet); and
`adslot campaigns share-link` / `revoke-link`: the console's share links."""

from __future__ import annotations

import sys
import time
from typing import TypeVar

import click

from adslot import audit
from adslot.console import share_links, users
from adslot.console.roles import ROLES
from adslot.fields import MAX_ID
from adslot.settings import ENVIRONMENTS, load_settings
from adslot.shell import cli_actor, run_on

T = TypeVar("T")


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


@click.group("users")
def users_group() -> None:
    """Console users (stored with the production database)."""


@users_group.command("create")
@click.option("--email", required=True)
@click.option("--role", required=True, type=click.Choice(ROLES))
@click.option(
    "--advertiser",
    "advertiser_ids",
    type=click.IntRange(1),
    multiple=True,
    help="An advertiser user's advertiser (production's id); repeat for several.",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input's first line.")
def users_create(email: str, role: str, advertiser_ids: tuple[int, ...], password_stdin: bool) -> None:
    """Create a console user; the password is asked for (twice) unless given on standard input."""
    password = _password(password_stdin)
    user = run_on(
        "production",
        audit.audited(
            cli_actor(),
            "user.create",
            f"user {email}",
            lambda c: users.create_user(c, email, role, password, list(advertiser_ids)),
        ),
        write=True,
        catalog=False,
    )
    bound = f" of advertiser(s) {', '.join(map(str, user.advertiser_ids))}" if user.advertiser_ids else ""
    click.echo(f"user {user.email} ({user.role}{bound}) created; sign in at /console")


@users_group.command("list")
def users_list() -> None:
    """List console users."""
    for user in run_on("production", users.list_users):
        state = "disabled" if user.disabled_at else "active"
        bound = ",".join(map(str, user.advertiser_ids))
        click.echo(f"{user.id}\t{user.email}\t{user.role}\t{state}" + (f"\t{bound}" if bound else ""))


@users_group.command("disable")
@click.option("--email", required=True)
def users_disable(email: str) -> None:
    """Disable a user: their sessions end at once and they can no longer sign in."""
    run_on(
        "production",
        audit.audited(cli_actor(), "user.disable", f"user {email}", lambda c: users.disable_user(c, email)),
        write=True,
        catalog=False,
    )
    click.echo(f"user {email} disabled")


@users_group.command("set-password")
@click.option("--email", required=True)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input's first line.")
def users_set_password(email: str, password_stdin: bool) -> None:
    """Set a user's password; it also unlocks the account and ends its sessions."""
    password = _password(password_stdin)
    run_on(
        "production",
        audit.audited(
            cli_actor(),
            "user.set-password",
            f"user {email}",
            lambda c: users.set_password(c, email, password),
        ),
        write=True,
        catalog=False,
    )
    click.echo(f"password of {email} set")


ENV_OPTION = click.option(
    "--env",
    "env_name",
    type=click.Choice(ENVIRONMENTS),
    default="production",
    show_default=True,
    help="Which environment's campaign.",
)


@click.command("share-link")
@ENV_OPTION
@click.option("--campaign-id", type=click.IntRange(1, MAX_ID), required=True)
@click.option(
    "--days", type=int, default=share_links.DEFAULT_DAYS, show_default=True, help="Days until it expires."
)
@click.option("--label", help="Who the link is for.")
def share_link(env_name: str, campaign_id: int, days: int, label: str | None) -> None:
    """Make a read-only link to the campaign's proof-of-play report (its whole flight): printed with its id,
    shown this once (only its hash is stored)."""
    now = int(time.time())
    who = cli_actor()
    token, link = run_on(
        env_name,
        audit.audited(
            who,
            "share-link.create",
            f"campaign {campaign_id} share link",
            lambda c: share_links.create_link(c, campaign_id, actor=who, now=now, days=days, label=label),
            after=lambda made: made[1],
        ),
        write=True,
        catalog=False,
    )
    public = load_settings().environment("production").public_url
    click.echo(f"{public}{share_links.link_path(env_name, token)}")
    click.echo(f"link {link.id}: expires {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(link.expires_at))}")


@click.command("revoke-link")
@ENV_OPTION
@click.argument("link_id", type=click.IntRange(1, MAX_ID))
def revoke_link(env_name: str, link_id: int) -> None:
    """Revoke a share link: it stops opening at once."""
    now = int(time.time())
    run_on(
        env_name,
        audit.audited(
            cli_actor(),
            "share-link.revoke",
            f"share link {link_id}",
            lambda c: share_links.revoke_link(c, link_id, now),
            before=lambda c: share_links.get_link(c, link_id),
        ),
        write=True,
        catalog=False,
    )
    click.echo(f"link {link_id} revoked")
