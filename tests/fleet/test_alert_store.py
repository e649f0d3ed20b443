"""The alert outbox in the database: a delivery given up (a removed webhook, a URL or host that leads
somewhere internal) leaves the queue and shows, with why, among the attempts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from adslot.fleet import alert_store
from adslot.fleet.alerts import AlertKey
from adslot.storage.database import write_transaction
from tests.conftest import BACKENDS, migrated_engine

NOW = 1_780_000_000
WHY = "webhook host resolves to an internal address"


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("alert-store"), str(request.param))


def test_a_delivery_given_up_leaves_the_queue_and_its_reason_is_listed_with_the_attempts(
    engine: sa.Engine,
) -> None:
    receivers = [alert_store.Receiver("webhook", "7"), alert_store.Receiver("email", "ops@example.test")]
    with write_transaction(engine) as conn:
        key = AlertKey("screen_silent", "v1", "s1", NOW - 900)
        ident = alert_store.raise_alert(conn, key, "s1 silent", NOW, receivers, "production")
    assert ident is not None
    with write_transaction(engine) as conn:
        heads = alert_store.pending_heads(conn, NOW)
        (hook,) = [d for d in heads if d.alert_id == ident and d.channel == "webhook"]
        assert alert_store.claim(conn, hook, NOW)
        alert_store.give_up(conn, hook, NOW + 1, WHY)
    with engine.connect() as conn:
        left = [d for d in alert_store.pending_heads(conn, NOW + 2) if d.alert_id == ident]
        shown = [a for a in alert_store.attempts_of(conn) if a.alert_id == ident]
    assert [d.channel for d in left] == ["email"]  # the email's queue is its own
    assert [(a.channel, a.target, a.ok, a.status, a.error) for a in shown] == [
        ("webhook", "7", False, None, WHY)
    ]
