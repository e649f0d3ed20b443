"""Online backup and restore of the SQLite databases (`adslot db backup`, `adslot db restore`).

A backup is a directory: one file per environment (`production.sqlite3`, `sandbox.sqlite3`) and
`manifest.json`, which names each file with its migration revision, size and SHA-256. Each file is copied by
SQLite's online backup API in one step, that is inside one read transaction: in WAL mode that is one
consistent snapshot of the database (every commit before it, none after), taken while the ledger writer goes
on committing, which a reader never blocks. The copy is checked (`PRAGMA integrity_check`) before the
manifest is written, and the manifest is written last, so a directory without one is not a backup.

A restore checks everything before it changes anything: the manifest, each file's checksum, its integrity
and that its revision is one this adslot knows (an older one is migrated by `adslot serve` as any database
is). It refuses while a server has the databases open (storage/in_use.py). The current files are moved aside,
never deleted (`<name>.replaced-<UTC time>`, with their WAL), and the copies take their place.

PostgreSQL is backed up with its own tools (docs/operations.md, "Backup and restore").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.script import ScriptDirectory

from adslot.settings import EnvironmentSettings
from adslot.storage.database import is_sqlite, sqlite_path
from adslot.storage.in_use import in_use
from adslot.storage.migrate import MIGRATIONS

MANIFEST = "manifest.json"
FORMAT = 1
POSTGRES_ADVICE = (
    "adslot db backup and restore handle SQLite databases only; back up PostgreSQL with pg_dump or "
    "pg_basebackup as docs/operations.md#backup-and-restore shows"
)


class BackupError(Exception):
    """A backup or restore that cannot be done; its message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Copied:
    environment: str
    file: str
    revision: str | None
    size: int
    sha256: str


def sqlite_files(environments: Sequence[EnvironmentSettings]) -> dict[str, Path]:
    """Each environment's database file, or BackupError when one is not SQLite."""
    if not all(is_sqlite(env.database_url) for env in environments):
        raise BackupError(POSTGRES_ADVICE)
    return {env.name: sqlite_path(env.database_url) for env in environments}


def _digest(path: Path, read: Callable[[int], None] | None = None) -> str:
    """The file's SHA-256; `read(bytes)` is told of each MiB read."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
            if read is not None:
                read(len(chunk))
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _opened(path: Path, *, read_only: bool) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        if read_only:
            conn.execute("PRAGMA query_only=1")
        yield conn
    finally:
        conn.close()


def _revision(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError:
        return None
    return None if row is None else str(row[0])


def _integrity(conn: sqlite3.Connection) -> str | None:
    """None when the database is sound, else what SQLite found wrong."""
    try:
        found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if found == ["ok"] else "; ".join(found[:5])


def backup(
    environments: Sequence[EnvironmentSettings],
    target: Path,
    progress: Callable[[float], None] | None = None,
) -> list[Copied]:
    """Copy every environment's database into the new directory `target`, consistently, while it serves.

    `progress(share)` is told how far it is, by bytes: each database counts once copied and once digested
    (the copy is one step, for one snapshot, so it moves the share once)."""
    files = sqlite_files(environments)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"{target} already exists: name a new directory (or an empty one)")
    for name, source in files.items():
        if not source.exists():
            raise BackupError(f"the {name} database {source} does not exist")
    target.mkdir(parents=True, exist_ok=True)
    copied: list[Copied] = []
    total = 2 * sum(source.stat().st_size for source in files.values()) or 1
    done = [0]

    def moved(size: int) -> None:
        done[0] += size
        if progress is not None:
            progress(min(1.0, done[0] / total))

    for name, source in files.items():
        file = f"{name}.sqlite3"
        destination = target / file
        with _opened(source, read_only=True) as src, _opened(destination, read_only=False) as dst:
            src.backup(dst)  # all pages in one step: one read transaction, one snapshot
            problem = _integrity(dst)
            revision = _revision(dst)
        if problem is not None:
            raise BackupError(f"the copy of the {name} database failed its integrity check: {problem}")
        _fsync(destination)
        moved(source.stat().st_size)
        copied.append(Copied(name, file, revision, destination.stat().st_size, _digest(destination, moved)))
    manifest = {
        "format": FORMAT,
        "created_at": int(time.time()),
        "environments": {
            c.environment: {"file": c.file, "revision": c.revision, "bytes": c.size, "sha256": c.sha256}
            for c in copied
        },
    }
    partial = target / (MANIFEST + ".partial")
    partial.write_text(json.dumps(manifest, indent=2) + "\n")
    _fsync(partial)
    partial.replace(target / MANIFEST)
    return copied


def _known_revisions() -> tuple[set[str], str | None]:
    scripts = ScriptDirectory(str(MIGRATIONS))
    return {script.revision for script in scripts.walk_revisions()}, scripts.get_current_head()


def _listed(source: Path, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The manifest's entry of each environment; BackupError when PATH is not a backup of them all."""
    try:
        manifest = json.loads((source / MANIFEST).read_text())
        listed = manifest["environments"]
        assert manifest["format"] == FORMAT and isinstance(listed, dict)
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise BackupError(f"{source} is not an adslot backup (no readable {MANIFEST}): {exc}") from exc
    entries = {}
    for name in names:
        entry = listed.get(name)
        if not isinstance(entry, dict):
            raise BackupError(f"the backup has no {name} database")
        path = source / str(entry.get("file"))
        if path.parent != source or not path.is_file():
            raise BackupError(f"the backup's {name} file {entry.get('file')!r} is missing")
        entries[name] = entry
    return entries


def _check(copy: Path, original: Path, entry: dict[str, Any]) -> None:
    """BackupError unless `copy` (of the backup's `original`) matches its checksum, is sound and is at a
    migration this adslot knows. Checked on the copy, so the backup itself is only read."""
    if _digest(copy) != entry.get("sha256"):
        raise BackupError(
            f"{original} does not match its checksum in {MANIFEST}: the file was changed or damaged"
        )
    with _opened(copy, read_only=True) as conn:
        problem = _integrity(conn)
        revision = _revision(conn)
    if problem is not None:
        raise BackupError(f"{original} failed its integrity check: {problem}")
    known, head = _known_revisions()
    if revision not in known:
        raise BackupError(
            f"{original} is at migration {revision!r}, which this adslot does not know (its latest is "
            f"{head}): restore it with the adslot release that took it, or a newer one"
        )


def _aside(database: Path, stamp: str) -> Path | None:
    """Move the database and its WAL files to `<name>.replaced-<stamp>` (still openable), if it exists."""
    if not database.exists():
        for suffix in ("-wal", "-shm"):
            database.with_name(database.name + suffix).unlink(missing_ok=True)
        return None
    moved = database.with_name(f"{database.name}.replaced-{stamp}")
    for suffix in ("-wal", "-shm", ""):
        current = database.with_name(database.name + suffix)
        if current.exists():
            current.replace(moved.with_name(moved.name + suffix))
    return moved


def restore(environments: Sequence[EnvironmentSettings], source: Path, *, force: bool = False) -> list[Path]:
    """Put the backup's databases in place of the environments'; the paths the old ones were moved to.

    Each file is first copied beside the database it replaces and checked there; nothing is replaced until
    every copy passed."""
    files = sqlite_files(environments)
    entries = _listed(source, list(files))
    busy = [str(path) for path in files.values() if in_use(path)]
    if busy and not force:
        raise BackupError(
            f"a server has {', '.join(busy)} open: stop it first (restoring under it would lose what it "
            "writes next), or pass --force if no adslot runs on these files"
        )
    incoming = {name: database.with_name(database.name + ".restoring") for name, database in files.items()}
    try:
        for name, database in files.items():
            database.parent.mkdir(parents=True, exist_ok=True)
            original = source / str(entries[name]["file"])
            shutil.copyfile(original, incoming[name])
            _check(incoming[name], original, entries[name])
            _fsync(incoming[name])
    except BaseException:
        for copy in incoming.values():
            for suffix in ("", "-wal", "-shm"):
                copy.with_name(copy.name + suffix).unlink(missing_ok=True)
        raise
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved: list[Path] = []
    for name, database in files.items():
        old = _aside(database, stamp)
        if old is not None:
            moved.append(old)
        incoming[name].replace(database)
    return moved
