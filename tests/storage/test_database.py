"""A create that loses a race with a concurrent one for the same key answers 409, never a 500.

The race is made deterministic with two real transactions, both write_transaction as the management API
runs them: the first inserts the key and holds its transaction open; the create runs meanwhile in a thread.
On PostgreSQL its existence check sees nothing, its insert waits on the first transaction's lock, and when
the first commits the insert hits the duplicate key. On SQLite the create waits for its turn to write and
runs after the first commits: its existence check sees the key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from adslot.campaigns.repository import create_advertiser
from adslot.campaigns.schemas import AdvertiserIn
from adslot.errors import ApiError
from adslot.inventory.csv_import import import_venues
from adslot.inventory.repository import add_screen, create_venue
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.storage.database import conflict_as, is_unique_violation, write_transaction
from adslot.storage.tables import advertisers, screens, venues
from tests.conftest import BACKENDS, migrated_engine

HOLD_SECONDS = 1.0
"""How long the first transaction stays open: far longer than the create needs to reach its insert."""


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("storage"), str(request.param))


def _race(
    engine: sa.Engine, first: sa.Executable, create: Callable[[sa.Connection], object]
) -> BaseException | None:
    """Run `create` in its own transaction while `first` is inserted and not yet committed; its error (None
    if it succeeded, which only SQLite's serial order allows)."""
    outcome: list[BaseException] = []
    began: list[float] = []

    def contender() -> None:
        try:
            with write_transaction(engine) as conn:
                began.append(time.monotonic())
                create(conn)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=contender)
    with write_transaction(engine) as holder:
        holder.execute(first)
        thread.start()
        time.sleep(HOLD_SECONDS)
        committing = time.monotonic()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the contending create never finished"
    # Proof that the race was real, as each database orders it.
    if engine.dialect.name == "sqlite":
        assert began and began[0] > committing, "a SQLite write ran while another write held the lock"
        return outcome[0] if outcome else None
    assert began and began[0] < committing
    assert outcome, "the contending create succeeded beside an identical committed row"
    assert isinstance(outcome[0].__cause__, sa.exc.IntegrityError), "the insert's duplicate key answered"
    return outcome[0]


def _lost(error: BaseException | None, code: str) -> None:
    assert error is not None, "the contending create succeeded beside an identical committed row"
    assert isinstance(error, ApiError), f"expected a 409, got {error!r}"
    assert (error.status, error.code) == (409, code)


def test_a_venue_created_twice_at_once_answers_409_venue_exists(engine: sa.Engine) -> None:
    first = sa.insert(venues).values(venue_id="race-v", name="A", timezone="UTC", created_at=1)
    error = _race(engine, first, lambda conn: create_venue(conn, VenueIn("race-v", "B", "UTC")))
    _lost(error, "venue_exists")
    assert error.field == "venue_id"  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert conn.execute(sa.select(venues.c.name).where(venues.c.venue_id == "race-v")).scalar() == "A"


def test_a_screen_added_twice_at_once_answers_409_screen_exists(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(venues).values(venue_id="race-s", name="S", timezone="UTC", created_at=1))
    first = sa.insert(screens).values(venue_id="race-s", screen_id="s1", created_at=1)
    error = _race(engine, first, lambda conn: add_screen(conn, "race-s", ScreenIn("s1")))
    _lost(error, "screen_exists")


def test_an_advertiser_created_twice_at_once_answers_409_advertiser_exists(engine: sa.Engine) -> None:
    first = sa.insert(advertisers).values(name="RaceCo", created_at=1)
    error = _race(engine, first, lambda conn: create_advertiser(conn, AdvertiserIn("RaceCo")))
    _lost(error, "advertiser_exists")


def test_an_import_that_races_a_create_answers_409_and_imports_nothing_or_runs_after_it(
    engine: sa.Engine,
) -> None:
    """PostgreSQL: the import's insert meets the create's key, 409, nothing imported. SQLite: the import
    waits for the create's commit and then does what it does to an existing venue, update it."""
    first = sa.insert(venues).values(venue_id="race-i1", name="A", timezone="UTC", created_at=1)
    body = b"venue_id,name,timezone\nrace-i0,Zero,UTC\nrace-i1,One,UTC\n"
    error = _race(engine, first, lambda conn: import_venues(conn, body))
    with engine.connect() as conn:
        query = sa.select(venues.c.venue_id, venues.c.name).where(venues.c.venue_id.like("race-i%"))
        names = {venue_id: name for venue_id, name in conn.execute(query)}
    if engine.dialect.name == "sqlite":
        assert error is None
        assert names == {"race-i0": "Zero", "race-i1": "One"}
    else:
        _lost(error, "concurrent_change")
        assert names == {"race-i1": "A"}


def test_a_foreign_key_failure_is_not_mistaken_for_a_duplicate(engine: sa.Engine) -> None:
    """Only a duplicate key becomes the 409: any other integrity failure is a bug and stays an error."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        with pytest.raises(sa.exc.IntegrityError) as raised, conflict_as(ApiError(409, "x", "x")):
            conn.execute(sa.insert(screens).values(venue_id="no-such-venue", screen_id="s", created_at=1))
        assert not is_unique_violation(raised.value)
        conn.rollback()
