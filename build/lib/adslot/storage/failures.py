"""A database that cannot serve right now, told apart from a bug: the first is a 503 that players retry.

A DOOH player treats a 5xx on an ad request as "no ad this slot" and a failed pixel as one to fire again.
A 503 with Retry-After says the second plainly, and a retry is always safe here: a pixel fired again counts
once, and an ad request asked again is a new one (an unanswered one that was stored anyway expires unplayed
and its reservation returns). A 500 stays the answer to a bug, with its traceback in the log.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

import asyncpg
import psycopg

UNAVAILABLE_RETRY_AFTER_SECONDS = 1


class LedgerUnavailable(RuntimeError):
    """The ledger cannot take writes now: its writer is stopping, restarting or gone, or its database
    refused the batch for a reason that passes (busy, unreachable, out of space). Nothing was answered as
    stored."""


class OutcomeUnknown(LedgerUnavailable):
    """A batch reached a writer that went away before answering, and no writer could be asked since whether
    it was committed. Answered 503 and never retried by the server itself: only the player's retry (a
    pixel counts once; an ad request asked again is a new one) is safe without knowing."""


_SQLITE = frozenset(
    {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY"}
)
"""Primary result codes of a database that is busy, out of space, or whose file cannot be read or written;
SQLITE_ERROR (a wrong statement, a missing table) is not among them: that is a bug or a missed migration."""
_POSTGRES_CLASSES = frozenset({"08", "40", "53", "57", "58"})
"""SQLSTATE classes: connection exception, transaction rollback (serialization failure, deadlock),
insufficient resources (disk full, too many connections), operator intervention (shutdown, cancel),
system error (I/O)."""
_MAX_DEPTH = 4


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database (or the ledger's writer) cannot serve now, rather than a bug.

    Follows the exception's cause, since SQLAlchemy and the drivers wrap what the database said."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < _MAX_DEPTH:
        if _passing(current):
            return True
        current = getattr(current, "orig", None) or current.__cause__
        seen += 1
    return False


def _passing(exc: BaseException) -> bool:
    if isinstance(exc, LedgerUnavailable):
        return True
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", None) or ""
        primary = "_".join(name.split("_")[:2])  # SQLITE_IOERR_WRITE is an SQLITE_IOERR
        return primary in _SQLITE
    if isinstance(exc, asyncpg.PostgresError):
        return str(getattr(exc, "sqlstate", ""))[:2] in _POSTGRES_CLASSES
    if isinstance(exc, psycopg.Error):  # the management API's, the CLI's, the reports' driver
        sqlstate = exc.sqlstate or ""
        return (isinstance(exc, psycopg.OperationalError) and not sqlstate) or sqlstate[
            :2
        ] in _POSTGRES_CLASSES
    return connection_lost(exc)


class OutageLog:
    """One warning line per outage, not a traceback per request: the first failure that says the storage
    cannot serve is logged with its cause; those that follow within `quiet_seconds` of the last are only
    counted, and the first after a quiet spell (a new outage) is logged again with that count. A failure that
    is not an outage is a bug: logged with its traceback every time."""

    def __init__(
        self, logger: logging.Logger, quiet_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = logger
        self._quiet = quiet_seconds
        self._clock = clock
        self._last: float | None = None
        self._since = 0

    def failed(self, what: str, exc: BaseException) -> None:
        if not unavailable(exc):
            self._log.error("%s failed", what, exc_info=exc)
            return
        now = self._clock()
        if self._last is not None and now - self._last <= self._quiet:
            self._last = now
            self._since += 1
            return
        before = f" ({self._since} more during the last outage)" if self._since else ""
        self._log.warning(
            "%s: storage unavailable: %s: %s; answering 503 until it recovers%s",
            what,
            type(exc).__name__,
            exc,
            before,
        )
        self._last = now
        self._since = 0


_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})
"""SQLSTATEs of a server ending the session: admin shutdown (a terminated backend), crash, not accepting."""


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the connection to PostgreSQL went away, rather than the database refusing a
    statement: a statement sent on it may or may not have been committed (ledger stores then answer
    OutcomeUnknown for a write that was in flight)."""
    if isinstance(exc, OSError):  # refused, reset, timed out, unreachable
        return True
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = str(getattr(exc, "sqlstate", ""))
        return sqlstate[:2] == "08" or sqlstate in _SERVER_GONE
    if isinstance(exc, asyncpg.InterfaceError):
        message = str(exc)
        return "closed" in message or "closing" in message  # the connection or the pool went away
    # The server's FATAL notice (a terminated backend) reached an idle connection before its socket closed:
    # the driver's protocol state is broken, the next statement is refused; a fresh connection serves.
    return isinstance(exc, asyncpg.InternalClientError) and "cannot switch to state" in str(exc)
