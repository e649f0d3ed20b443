"""`adslot db backup` and `adslot db restore`: a backup taken while a server writes holds every ad request
acknowledged before it began, restores into a fresh data directory that a new server serves, and gives the
same delivery report; a damaged backup, one from an unknown migration, a running server and PostgreSQL are
each refused with a message that says what to do, and leave the databases as they were."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from adslot.cli import main
from adslot.settings import load_settings
from adslot.storage.backup import MANIFEST, BackupError, backup, restore
from adslot.storage.database import sqlite_path
from tests.conftest import cli_databases, free_port
from tests.served import Acked, Server, cli, load_until, records_via_api, served_setup


def _failing(environ: dict[str, str], *args: str) -> str:
    """The error output of a CLI command that must fail."""
    done = subprocess.run(
        [sys.executable, "-m", "adslot.cli", *args], env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0, done.stdout
    return done.stderr


def _report(environ: dict[str, str]) -> str:
    hour = int(time.time()) // 3600 * 3600
    span = ["--from", str(hour - 86_400), "--to", str(hour + 86_400)]
    return cli(
        environ, "report", "delivery", *span, "--group-by", "campaign,creative,hour", "--format", "csv"
    )


def _elsewhere(environ: dict[str, str], data_dir: Path) -> dict[str, str]:
    return environ | {"ADSLOT_DATA_DIR": str(data_dir), "ADSLOT_PORT": str(free_port())}


def test_a_backup_under_load_restores_every_acknowledged_ad_request_and_the_same_report(
    tmp_path: Path,
) -> None:
    setup = served_setup("sqlite", tmp_path / "live")
    server, key, _ = next(setup)
    try:
        server.start()
        acked = Acked()

        def back_up() -> list[str]:
            with acked.lock:
                before = list(acked.requests)
            cli(server.environ, "db", "backup", str(tmp_path / "under-load"))
            return before

        before = load_until(server, key, acked, back_up, min_new=150)
        assert len(before) >= 150
        assert "stop it first" in _failing(server.environ, "db", "restore", str(tmp_path / "under-load"))
        cli(server.environ, "db", "backup", str(tmp_path / "quiet"))
        expected = _report(server.environ)
        assert len(expected.splitlines()) > 1  # a header and figures
    finally:
        server.terminate()
        next(setup, None)

    restored = _elsewhere(server.environ, tmp_path / "restored")
    assert "restored from" in cli(restored, "db", "restore", str(tmp_path / "under-load"))
    again = Server(restored, int(restored["ADSLOT_PORT"]))
    again.start()
    try:
        found = records_via_api(again, key, before)
        assert sorted(found) == sorted(before)
    finally:
        again.terminate()

    quiet = _elsewhere(server.environ, tmp_path / "quiet-restored")
    cli(quiet, "db", "restore", str(tmp_path / "quiet"))
    assert _report(quiet) == expected


@pytest.fixture
def backed_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Migrated SQLite databases with a key, and a backup of them."""
    cli_databases("sqlite", tmp_path / "data", monkeypatch)
    runner = CliRunner()
    for env_name in ("production", "sandbox"):
        assert runner.invoke(main, ["keys", "create", "--env", env_name, "--account", "a"]).exit_code == 0
    result = runner.invoke(main, ["db", "backup", str(tmp_path / "backup")])
    assert result.exit_code == 0, result.output
    assert "production:" in result.output and "sandbox:" in result.output
    return tmp_path / "backup"


def _rewrite_manifest(backup_dir: Path) -> None:
    """Make the manifest's checksums those of the files as they are now (damage that a checksum misses)."""
    import hashlib

    manifest = json.loads((backup_dir / MANIFEST).read_text())
    for entry in manifest["environments"].values():
        entry["sha256"] = hashlib.sha256((backup_dir / entry["file"]).read_bytes()).hexdigest()
    (backup_dir / MANIFEST).write_text(json.dumps(manifest))


def _restore_refused(backup_dir: Path, needle: str) -> None:
    environments = load_settings().environments
    databases = [sqlite_path(env.database_url) for env in environments]
    before = [path.read_bytes() for path in databases]
    with pytest.raises(BackupError, match=needle):
        restore(environments, backup_dir)
    assert [path.read_bytes() for path in databases] == before
    assert not list(databases[0].parent.glob("*.replaced-*"))
    assert not list(databases[0].parent.glob("*.restoring*"))  # the checked copies are removed


def test_restore_refuses_a_file_changed_since_the_backup(backed_up: Path) -> None:
    with (backed_up / "sandbox.sqlite3").open("r+b") as stream:  # the second: production's copy was made
        stream.seek(5000)
        stream.write(b"\x00\xff" * 8)
    _restore_refused(backed_up, "does not match its checksum")


def test_restore_refuses_a_corrupt_database_whatever_its_checksum(backed_up: Path) -> None:
    file = backed_up / "production.sqlite3"
    page = int.from_bytes(file.read_bytes()[16:18], "big")
    with file.open("r+b") as stream:
        for number in range(1, 6):  # the headers of the first B-tree pages after the schema's
            stream.seek(page * number)
            stream.write(b"\x0d\xff\xff\xff\xff\xff\xff\xff")
    _rewrite_manifest(backed_up)
    _restore_refused(backed_up, "integrity check")


def test_restore_refuses_a_database_from_a_migration_it_does_not_know(backed_up: Path) -> None:
    conn = sqlite3.connect(backed_up / "sandbox.sqlite3")
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.close()  # the last connection out writes its WAL back into the file
    _rewrite_manifest(backed_up)
    _restore_refused(backed_up, "'9999', which this adslot does not know")


def test_restore_refuses_a_directory_that_is_not_a_backup(tmp_path: Path, backed_up: Path) -> None:
    (tmp_path / "empty").mkdir()
    _restore_refused(tmp_path / "empty", "not an adslot backup")


def test_restore_keeps_the_databases_it_replaces(backed_up: Path) -> None:
    environments = load_settings().environments
    production = sqlite_path(environments[0].database_url)
    with sqlite3.connect(production) as conn:
        conn.execute("INSERT INTO accounts (name, created_at) VALUES ('after the backup', 1)")
    moved = restore(environments, backed_up)
    assert sorted(path.name.split(".replaced-")[0] for path in moved) == [
        "production.sqlite3",
        "sandbox.sqlite3",
    ]
    with sqlite3.connect(production) as conn:
        assert conn.execute("SELECT count(*) FROM accounts WHERE name = 'after the backup'").fetchone() == (
            0,
        )
    with sqlite3.connect(moved[0]) as conn:
        assert conn.execute("SELECT count(*) FROM accounts WHERE name = 'after the backup'").fetchone() == (
            1,
        )


def test_backup_refuses_an_existing_directory(backed_up: Path) -> None:
    with pytest.raises(BackupError, match="already exists"):
        backup(load_settings().environments, backed_up)


def test_backup_and_restore_refuse_postgresql_and_point_to_its_procedure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADSLOT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ADSLOT_DATABASE_URL", "postgresql://adslot@127.0.0.1:5432/adslot")
    runner = CliRunner()
    for args in (["db", "backup", str(tmp_path / "b")], ["db", "restore", str(tmp_path)]):
        result = runner.invoke(main, args)
        assert result.exit_code == 1
        assert "SQLite databases only" in result.output and "pg_dump" in result.output
        assert "docs/operations.md#backup-and-restore" in result.output
    assert not (tmp_path / "b").exists()
    assert os.listdir(tmp_path) == []
