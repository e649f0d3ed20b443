"""The `adslot db` commands of bounded data: backup, restore, and a rollup pass by hand."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import click
import sqlalchemy as sa

from adslot.environment import prepare_database
from adslot.progress import progress_bar, quiet
from adslot.retention.rollup import DAY
from adslot.retention.task import RetentionTask
from adslot.settings import ENVIRONMENTS, MIN_RETENTION_DAYS, Settings, SettingsError, load_settings
from adslot.storage.backup import BackupError, backup, restore
from adslot.storage.database import make_engine, read_transaction
from adslot.storage.tables import ad_requests


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("backup")
@click.argument("path", type=click.Path(path_type=Path))
def db_backup(path: Path) -> None:
    """Copy the production and sandbox SQLite databases into the new directory PATH, consistently, while a
    server runs (PostgreSQL: see docs/operations.md, "Backup and restore")."""
    try:
        with progress_bar("Backing up") as progress:
            copied = backup(_settings().environments, path, progress)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    for item in copied:
        click.echo(f"{item.environment}: {path / item.file} ({item.size:,} bytes, migration {item.revision})")


@click.command("restore")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Restore even though a server seems to have the databases open.")
def db_restore(path: Path, force: bool) -> None:
    """Put the backup in PATH in place of the production and sandbox SQLite databases (the current ones are
    kept beside them as <name>.replaced-<UTC time>). Stop the server first."""
    try:
        moved = restore(_settings().environments, path, force=force)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    for old in moved:
        click.echo(f"kept the replaced database as {old}")
    click.echo(f"restored from {path}; `adslot serve` migrates it if it is older than this release")


def _waiting(engine: sa.Engine, before: int) -> int:
    """How many settled ad requests were played before `before`: the progress bar's length (a count the
    command pays once, on a terminal only)."""
    t = ad_requests.c
    with read_transaction(engine) as conn:
        query = sa.select(sa.func.count()).where(t.play_time < before, t.settled_at.is_not(None))
        return int(conn.execute(query).scalar_one())


def _before(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        day = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as exc:
        raise click.BadParameter("a UTC date, YYYY-MM-DD") from exc
    return int(day.timestamp())


@click.command("rollup")
@click.option(
    "--env",
    "env_name",
    type=click.Choice(ENVIRONMENTS),
    default="production",
    show_default=True,
    help="Which environment's database to act on.",
)
@click.option(
    "--before",
    required=True,
    callback=_before,
    help="Roll up the settled ad requests played before this UTC date (YYYY-MM-DD).",
)
def db_rollup(env_name: str, before: int) -> None:
    """Roll up and delete the settled ad requests played before a date, as ADSLOT_RETENTION_DAYS does,
    in the same small batches (safe while a server runs; reports do not change)."""
    settings = _settings()
    if before > time.time() - MIN_RETENTION_DAYS * DAY:
        raise click.ClickException(f"--before must be at least {MIN_RETENTION_DAYS} days ago")
    env = settings.environment(env_name)
    prepare_database(env)
    engine = make_engine(env)
    task = RetentionTask(
        engine, None, batch_rows=settings.retention_batch_rows, pause=settings.retention_pause_seconds
    )
    try:
        with progress_bar("Rolling up") as progress:
            waiting = _waiting(engine, before) if progress is not quiet else 0
            rolled = asyncio.run(task.run_pass(before, lambda rows: progress(rows / max(1, waiting))))
            progress(1.0)
    finally:
        engine.dispose()
    day = time.strftime("%F", time.gmtime(before))
    click.echo(f"{env_name}: rolled up {rolled:,} ad requests played before {day}")
