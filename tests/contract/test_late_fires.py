"""Fires after ad_request_expired_at: answered 410, kept as late, never counted.

The play window is at least 60 s, so these tests write an already-expired ad request straight into the ledger
(the production database the server reads) instead of waiting for one to lapse.
"""

from __future__ import annotations

import re
import uuid

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import LiveServer
from tests.contract.support import (
    QUARTILES,
    account_id_of_key,
    assert_empty_vast_error,
    assert_error,
    fire,
    fires_of,
    insert_expired,
    key_of,
    record_of,
    stored_row,
)

EVENTS = ("impression", *QUARTILES)
EVENT_COLUMNS = (
    "impression_at",
    "start_at",
    "first_quartile_at",
    "midpoint_at",
    "third_quartile_at",
    "complete_at",
)


@pytest.fixture
def expired(live: LiveServer, dbs: dict[str, sa.Engine]) -> uuid.UUID:
    engine = dbs["production"]
    return insert_expired(
        engine,
        live,
        account_id=account_id_of_key(engine, key_of(live, "production")),
        expired_seconds_ago=120,
    )


@pytest.mark.parametrize("event", EVENTS)
def test_late_fire_is_410_ad_request_expired_kept_as_late_and_not_counted(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine], expired: uuid.UUID, event: str
) -> None:
    response = fire(http, live.url, str(expired), event)
    error = assert_error(response, 410, "ad_request_expired", "ad_request_uuid")
    assert "expired" in error["message"] and "seconds ago" in error["message"]
    seconds = int(re.search(r"expired (\d+) seconds ago", error["message"]).group(1))  # type: ignore[union-attr]
    assert 120 <= seconds <= 180
    row = stored_row(dbs["production"], expired)
    assert row is not None
    assert row["late_count"] == 1
    assert row["duplicate_count"] == 0
    assert all(row[column] is None for column in EVENT_COLUMNS)
    assert fires_of(dbs["production"], expired) == 0


def test_every_late_fire_is_kept_even_repeats(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine], expired: uuid.UUID
) -> None:
    for event in ("impression", "impression", "start", "complete"):
        assert_error(fire(http, live.url, str(expired), event), 410, "ad_request_expired", "ad_request_uuid")
    assert fire(http, live.url, str(expired), "midpoint", method="HEAD").status_code == 410
    row = stored_row(dbs["production"], expired)
    assert row is not None
    assert (row["late_count"], row["duplicate_count"]) == (5, 0)
    assert all(row[column] is None for column in EVENT_COLUMNS)


def test_expired_unplayed_record_reads_as_expired_with_its_late_count(
    live: LiveServer, http: httpx.Client, expired: uuid.UUID
) -> None:
    assert record_of(http, live, str(expired))["state"] == "expired"
    fire(http, live.url, str(expired), "impression")
    record = record_of(http, live, str(expired))
    assert record["state"] == "expired", "a late impression does not make it played"
    assert record["late_count"] == 1
    assert record["events"] == dict.fromkeys(EVENTS)


def test_inline_vast_of_an_expired_ad_request_is_410_empty_vast(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine], expired: uuid.UUID
) -> None:
    assert_empty_vast_error(http.get(f"{live.url}/api/v1/ad/vast/{expired}"), 410, "ad_request_expired")
    row = stored_row(dbs["production"], expired)
    assert row is not None and row["late_count"] == 0, "fetching the VAST is not a fire"


def test_fire_just_inside_the_window_still_counts(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine]
) -> None:
    engine = dbs["production"]
    account = account_id_of_key(engine, key_of(live, "production"))
    almost = insert_expired(engine, live, account_id=account, expired_seconds_ago=-30)
    response = fire(http, live.url, str(almost), "impression")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["result"] == "counted"
    row = stored_row(engine, almost)
    assert row is not None and row["impression_at"] is not None and row["late_count"] == 0
