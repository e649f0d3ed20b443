"""What every command does to act on an environment: one transaction on its migrated database, refusals
printed with the API's error code, and who the audit log names."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from typing import TypeVar

import click
import sqlalchemy as sa

from adslot.environment import prepare_database, transact
from adslot.errors import ApiError
from adslot.settings import SettingsError, load_settings
from adslot.storage.database import make_engine

T = TypeVar("T")


class CommandError(click.ClickException):
    """Refused input, printed with the API's error code; exit status 2, like any other usage error."""

    exit_code = 2


def api_error(exc: ApiError) -> CommandError:
    where = f" (field: {exc.field})" if exc.field else ""
    lines = [f"{exc.code}: {exc.message}{where}"]
    lines += [
        f"  line {p.line}: {p.column or '-'}: {p.code}: {p.message}" for p in getattr(exc, "details", ())
    ]
    return CommandError("\n".join(lines))


def run_on(
    env_name: str, fn: Callable[[sa.Connection], T], *, write: bool = False, catalog: bool = True
) -> T:
    """Run fn in one transaction on the environment's (migrated) database; writes bump the catalog
    unless `catalog=False` (console users and sessions, which no worker caches)."""
    try:
        env = load_settings().environment(env_name)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    prepare_database(env)
    engine = make_engine(env)
    try:
        return transact(engine, fn, write=write, catalog=catalog)
    except ApiError as exc:
        raise api_error(exc) from exc
    finally:
        engine.dispose()


def cli_actor() -> str:
    """Who the audit log names for a change made with the CLI."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return f"cli:uid {os.getuid()}"
