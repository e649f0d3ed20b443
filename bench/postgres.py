"""The PostgreSQL side of the benchmark: is it reachable, fresh schema names, and dropping them afterwards."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def unreachable_reason(url: str) -> str | None:
    """None when PostgreSQL answers at url; otherwise why not, for the printed note."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def redacted(url: str | None) -> str | None:
    """The URL without its password, for reports and messages."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def fresh_schemas() -> tuple[str, str]:
    tag = secrets.token_hex(4)
    return f"bench_production_{tag}", f"bench_sandbox_{tag}"


def drop_schemas(url: str, schemas: tuple[str, ...]) -> None:
    with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
        for schema in schemas:
            if not schema.startswith("bench_") or not schema.replace("_", "").isalnum():
                raise ValueError(f"refusing to drop schema {schema!r}")
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


ACTIVITY_QUERIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("checkpoints", "checkpoint buffers"),
        "SELECT checkpoints_timed + checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter",
    ),
    # PostgreSQL 17 moved the checkpointer's counters to their own view.
    (
        ("checkpoints", "checkpoint buffers"),
        "SELECT num_timed + num_requested, buffers_written FROM pg_stat_checkpointer",
    ),
    (("WAL bytes", "full-page images"), "SELECT wal_bytes::bigint, wal_fpi FROM pg_stat_wal"),
    (
        ("blocks read", "blocks hit"),
        "SELECT blks_read, blks_hit FROM pg_stat_database WHERE datname = current_database()",
    ),
)
"""Server-wide counters that say what PostgreSQL did besides answering: checkpoints and the buffers they
wrote, the WAL written and how much of it was full-page images (the first change to each page after a
checkpoint), and the blocks read from outside its shared buffers."""


def activity(url: str) -> dict[str, int]:
    """The counters of ACTIVITY_QUERIES now, by name; a view this server lacks is left out."""
    found: dict[str, int] = {}
    with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
        for names, query in ACTIVITY_QUERIES:
            if names[0] in found:
                continue
            try:
                row = conn.execute(query).fetchone()
            except psycopg.Error:
                continue
            if row is not None:
                found.update(zip(names, (int(v or 0) for v in row), strict=True))
    return found


def moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """How far each counter read both times (activity()) moved in between."""
    return {name: after[name] - before[name] for name in after if name in before}
