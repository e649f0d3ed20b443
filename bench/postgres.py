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
