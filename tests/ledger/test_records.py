"""The state of an ad request as the ledger reports it: issued, played or expired."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from adslot.ledger.claims import NO_CLAIMS, Claim, Claims
from adslot.ledger.records import EVENT_COLUMNS, AdRequest, Fire, Issue, NoFill, Release, Settle, reserves

PLAY_TIME = 1_700_000_000
EXPIRES_AT = PLAY_TIME + 900


def ad_request(**changes: object) -> AdRequest:
    record = AdRequest(
        id=uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"),
        account_id=1,
        venue_id="venue-1",
        screen_id=None,
        play_time=PLAY_TIME,
        created_at=PLAY_TIME - 120,
        expires_at=EXPIRES_AT,
        campaign_id=1,
        creative_id=1,
    )
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def test_new_ad_request_is_issued_before_its_play_time() -> None:
    assert ad_request().state(PLAY_TIME - 60) == "issued"


def test_unplayed_ad_request_is_issued_until_its_expiry() -> None:
    assert ad_request().state(PLAY_TIME) == "issued"
    assert ad_request().state(EXPIRES_AT - 1) == "issued"


def test_unplayed_ad_request_is_still_issued_at_the_expiry_second() -> None:
    assert ad_request().state(EXPIRES_AT) == "issued"


def test_unplayed_ad_request_is_expired_after_its_expiry() -> None:
    assert ad_request().state(EXPIRES_AT + 1) == "expired"
    assert ad_request().state(EXPIRES_AT + 86_400) == "expired"


def test_ad_request_with_an_impression_is_played() -> None:
    assert ad_request(impression_at=PLAY_TIME + 5).state(PLAY_TIME + 10) == "played"


def test_played_ad_request_stays_played_after_its_expiry() -> None:
    assert ad_request(impression_at=PLAY_TIME + 5).state(EXPIRES_AT + 3600) == "played"


def test_played_state_does_not_depend_on_when_the_impression_came() -> None:
    late = ad_request(impression_at=EXPIRES_AT + 30)
    assert late.state(EXPIRES_AT + 60) == "played"


@pytest.mark.parametrize("column", [c for c in EVENT_COLUMNS.values() if c != "impression_at"])
def test_quartile_events_without_an_impression_do_not_make_it_played(column: str) -> None:
    record = ad_request(**{column: PLAY_TIME + 1})
    assert record.state(PLAY_TIME + 2) == "issued"
    assert record.state(EXPIRES_AT + 1) == "expired"


def test_an_ad_request_its_player_released_is_released_before_and_after_its_expiry() -> None:
    record = ad_request(settled_at=PLAY_TIME - 30, settle_reason="released")
    assert record.state(PLAY_TIME) == "released"
    assert record.state(EXPIRES_AT + 1) == "released"


def test_settlement_at_expiry_does_not_change_the_reported_state() -> None:
    assert ad_request(settled_at=EXPIRES_AT + 60, settle_reason="expired").state(EXPIRES_AT + 61) == "expired"
    played = ad_request(impression_at=PLAY_TIME + 5, settled_at=EXPIRES_AT + 60, settle_reason="played")
    assert played.state(EXPIRES_AT + 61) == "played"


def test_state_is_computed_without_changing_the_record() -> None:
    record = ad_request()
    before = dataclasses.asdict(record)
    record.state(EXPIRES_AT + 1)
    assert dataclasses.asdict(record) == before


def test_event_columns_map_every_spec_event_to_its_own_column() -> None:
    assert list(EVENT_COLUMNS) == [
        "impression",
        "start",
        "firstQuartile",
        "midpoint",
        "thirdQuartile",
        "complete",
    ]
    assert len(set(EVENT_COLUMNS.values())) == len(EVENT_COLUMNS)
    fields = {f.name for f in dataclasses.fields(AdRequest)}
    assert set(EVENT_COLUMNS.values()) <= fields


def test_only_reserving_ad_requests_releases_and_the_sweep_are_known_to_lock_counters() -> None:
    record = ad_request()
    capped = Claims((Claim("c1:life:plays", 1, 10),))
    assert reserves(Issue(record, capped))
    assert reserves(Release(record.id, 1, PLAY_TIME))
    assert reserves(Settle(PLAY_TIME))
    assert not reserves(Issue(record, None))
    assert not reserves(Issue(record, NO_CLAIMS))
    assert not reserves(Fire(record.id, "impression", "wrapper", PLAY_TIME))
    assert not reserves(NoFill("venue-1", None, PLAY_TIME))
