"""A create that loses a race with a concurrent one for the same key answers 409, never a 500.

The race is made deterministic with two real connections: the first inserts the key and holds its
transaction open; the create runs meanwhile in a thread, so its existence check sees nothing and its insert
waits on the first transaction's lock; when the first commits, the insert hits the duplicate key.
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
from adslot.storage.database import conflict_as, is_unique_violation
from adslot.storage.tables import advertisers, screens, venues
from tests.conftest import BACKENDS, migrated_engine

HOLD_SECONDS = 1.0
"""How long the first transaction stays open: far longer than the create needs to reach its insert."""


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("storage"), str(request.param))


def _race(
    engine: sa.Engine, first: sa.Executable, create: Callable[[sa.Connection], object]
) -> BaseException:
    """Run `create` in its own transaction while `first` is inserted and not yet committed; its error."""
    outcome: list[BaseException] = []

    def contender() -> None:
        try:
            with engine.begin() as conn:
                create(conn)
        except BaseException as exc:
            outcome.append(exc)

    with engine.connect() as holder:
        if engine.dialect.name == "sqlite":
            holder.exec_driver_sql("BEGIN IMMEDIATE")
        holder.execute(first)
        thread = threading.Thread(target=contender)
        thread.start()
        time.sleep(HOLD_SECONDS)
        holder.commit()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the contending create never finished"
    assert outcome, "the contending create succeeded beside an identical committed row"
    return outcome[0]


def _lost_at_insert(error: BaseException, code: str) -> None:
    assert isinstance(error, ApiError), f"expected a 409, got {error!r}"
    assert (error.status, error.code) == (409, code)
    # Proof that the race was real: the existence check passed and the insert's duplicate key answered.
    assert isinstance(error.__cause__, sa.exc.IntegrityError)


def test_a_venue_created_twice_at_once_answers_409_venue_exists(engine: sa.Engine) -> None:
    first = sa.insert(venues).values(venue_id="race-v", name="A", timezone="UTC", created_at=1)
    error = _race(engine, first, lambda conn: create_venue(conn, VenueIn("race-v", "B", "UTC")))
    _lost_at_insert(error, "venue_exists")
    assert error.field == "venue_id"  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert conn.execute(sa.select(venues.c.name).where(venues.c.venue_id == "race-v")).scalar() == "A"


def test_a_screen_added_twice_at_once_answers_409_screen_exists(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(venues).values(venue_id="race-s", name="S", timezone="UTC", created_at=1))
    first = sa.insert(screens).values(venue_id="race-s", screen_id="s1", created_at=1)
    error = _race(engine, first, lambda conn: add_screen(conn, "race-s", ScreenIn("s1")))
    _lost_at_insert(error, "screen_exists")


def test_an_advertiser_created_twice_at_once_answers_409_advertiser_exists(engine: sa.Engine) -> None:
    first = sa.insert(advertisers).values(name="RaceCo", created_at=1)
    error = _race(engine, first, lambda conn: create_advertiser(conn, AdvertiserIn("RaceCo")))
    _lost_at_insert(error, "advertiser_exists")


def test_an_import_that_races_a_create_answers_409_and_imports_nothing(engine: sa.Engine) -> None:
    first = sa.insert(venues).values(venue_id="race-i1", name="A", timezone="UTC", created_at=1)
    body = b"venue_id,name,timezone\nrace-i0,Zero,UTC\nrace-i1,One,UTC\n"
    error = _race(engine, first, lambda conn: import_venues(conn, body))
    _lost_at_insert(error, "concurrent_change")
    with engine.connect() as conn:
        found = conn.execute(sa.select(venues.c.venue_id).where(venues.c.venue_id == "race-i0")).first()
        assert found is None


def test_a_foreign_key_failure_is_not_mistaken_for_a_duplicate(engine: sa.Engine) -> None:
    """Only a duplicate key becomes the 409: any other integrity failure is a bug and stays an error."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        with pytest.raises(sa.exc.IntegrityError) as raised, conflict_as(ApiError(409, "x", "x")):
            conn.execute(sa.insert(screens).values(venue_id="no-such-venue", screen_id="s", created_at=1))
        assert not is_unique_violation(raised.value)
        conn.rollback()
