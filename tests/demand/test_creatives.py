"""The creative approval queue in storage: a crid first seen from a partner waits for approval (or is approved
at once for an auto-approved partner), a known one keeps its status, two workers noting one new crid at once
store one row; approval is idempotent, a rejection final; removing a partner removes its creatives; migration
0014 adds and drops the table."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from adslot.demand import creatives_repository
from adslot.demand.creatives import checked_status, decided, playable, reviewable
from adslot.demand.creatives_repository import (
    approve,
    get_creative,
    list_creatives,
    markup,
    note_creative,
    reject,
)
from adslot.demand.partners import Partner, PartnerIn
from adslot.demand.repository import create_partner, remove_partner
from adslot.errors import ApiError
from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine, write_transaction
from adslot.storage.tables import demand_creatives
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings, migrated_engine
from tests.storage.test_migrations import at_revision

ENDPOINT = "https://bidder.example.test/openrtb"
BASE = "https://ads.example.test/sandbox"
VAST = '<VAST version="2.0"><Ad id="a1"><InLine><AdSystem>dsp</AdSystem></InLine></Ad></VAST>'
NOW = 1_800_000_000


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("creatives"), str(request.param))


@pytest.fixture
def conn(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection whose transaction is rolled back after the test: each test starts with no creative."""
    with engine.connect() as connection:
        transaction = connection.begin()
        yield connection
        transaction.rollback()


def partner(conn: sa.Connection, name: str = "dsp", *, auto_approve: bool = False) -> Partner:
    return create_partner(conn, PartnerIn(name=name, endpoint=ENDPOINT, auto_approve=auto_approve))


def note(
    conn: sa.Connection,
    bidder: Partner,
    crid: str,
    adm: str | None = VAST,
    nurl: str | None = None,
    now: int = NOW,
) -> str:
    """What the auction is to do for each valid bid."""
    return note_creative(conn, bidder, crid, ["brand.example"], adm, nurl, now)


def refusal(conn: sa.Connection, action: Callable[[], object]) -> ApiError:
    """The ApiError `action` raises, in a savepoint: PostgreSQL aborts a transaction a statement failed in."""
    with pytest.raises(ApiError) as refused, conn.begin_nested():
        action()
    return refused.value


def test_a_crid_never_seen_from_the_partner_is_stored_pending_with_its_markup(conn: sa.Connection) -> None:
    bidder = partner(conn)
    assert note(conn, bidder, "cr-1") == "pending"
    [listed] = list_creatives(conn, base_url=BASE)
    assert (listed.partner, listed.crid, listed.adomain, listed.status) == (
        "dsp",
        "cr-1",
        ["brand.example"],
        "pending",
    )
    assert (listed.first_seen_at, listed.decided_at, listed.decided_by) == (NOW, None, None)
    assert listed.has_markup and listed.nurl is None
    assert listed.preview_url == f"{BASE}/api/v1/demand/creatives/{listed.id}/preview"
    assert markup(conn, listed.id) == VAST
    assert not playable(listed.status)


def test_an_auto_approved_partners_new_creative_is_approved_at_once(conn: sa.Connection) -> None:
    trusted = partner(conn, "trusted", auto_approve=True)
    assert note(conn, trusted, "cr-1") == "approved"
    [listed] = list_creatives(conn, base_url=BASE)
    assert (listed.status, listed.decided_at, listed.decided_by) == ("approved", NOW, "auto-approve")
    assert playable(listed.status)


def test_a_known_creative_keeps_its_status_and_its_first_markup(conn: sa.Connection) -> None:
    bidder = partner(conn)
    note(conn, bidder, "cr-1")
    [first] = list_creatives(conn, base_url=BASE)
    approve(conn, first.id, "cli:ops", base_url=BASE)
    assert note(conn, bidder, "cr-1", adm='<VAST version="2.0"/>', now=NOW + 60) == "approved"
    note(conn, bidder, "cr-2")
    reject(conn, list_creatives(conn, base_url=BASE)[1].id, "cli:ops", base_url=BASE)
    assert note(conn, bidder, "cr-2", now=NOW + 60) == "rejected"
    assert markup(conn, first.id) == VAST
    assert [c.first_seen_at for c in list_creatives(conn, base_url=BASE)] == [NOW, NOW]


def test_the_same_crid_from_another_partner_is_another_creative(conn: sa.Connection) -> None:
    one, other = partner(conn, "one"), partner(conn, "other")
    note(conn, one, "shared")
    approve(conn, list_creatives(conn, base_url=BASE)[0].id, "cli:ops", base_url=BASE)
    assert note(conn, other, "shared") == "pending"
    assert [(c.partner, c.status) for c in list_creatives(conn, base_url=BASE)] == [
        ("one", "approved"),
        ("other", "pending"),
    ]


def test_a_nurl_creative_keeps_its_nurl_and_its_preview_is_a_409_naming_it(conn: sa.Connection) -> None:
    bidder = partner(conn)
    nurl = "https://bidder.example.test/win?price=${AUCTION_PRICE}"
    assert note(conn, bidder, "by-nurl", adm=None, nurl=nurl) == "pending"
    [listed] = list_creatives(conn, base_url=BASE)
    assert (listed.nurl, listed.has_markup) == (nurl, False)
    refused = refusal(conn, lambda: markup(conn, listed.id))
    assert (refused.status, refused.code, refused.field) == (409, "no_stored_markup", "id")
    assert nurl in refused.message


def test_with_adm_the_nurl_is_only_a_win_notice_and_is_not_kept(conn: sa.Connection) -> None:
    note(conn, partner(conn), "cr-1", nurl="https://bidder.example.test/win")
    assert list_creatives(conn, base_url=BASE)[0].nurl is None


@pytest.mark.parametrize(
    ("crid", "adm", "nurl"),
    [
        (None, VAST, None),
        ("", VAST, None),
        ("c" * 257, VAST, None),
        ("cr", None, None),
        ("cr", None, "https://bidder.example.test/" + "n" * 2048),
    ],
    ids=["no-crid", "empty-crid", "crid-too-long", "no-markup", "nurl-too-long"],
)
def test_a_creative_that_cannot_be_held_for_approval_is_rejected_and_stored_nowhere(
    conn: sa.Connection, crid: str | None, adm: str | None, nurl: str | None
) -> None:
    assert note_creative(conn, partner(conn), crid, None, adm, nurl, NOW) == "rejected"
    assert list_creatives(conn, base_url=BASE) == []


def test_the_longest_crid_is_stored_whole(conn: sa.Connection) -> None:
    assert note(conn, partner(conn), "c" * 256) == "pending"
    assert list_creatives(conn, base_url=BASE)[0].crid == "c" * 256


def test_approving_lets_it_play_and_approving_again_changes_nothing(conn: sa.Connection) -> None:
    note(conn, partner(conn), "cr-1")
    creative_id = list_creatives(conn, base_url=BASE)[0].id
    approved = approve(conn, creative_id, "api key 7", base_url=BASE)
    assert (approved.status, approved.decided_by) == ("approved", "api key 7")
    assert approved.decided_at is not None and approved.decided_at >= int(time.time()) - 5
    assert approve(conn, creative_id, "cli:someone-else", base_url=BASE) == approved


def test_a_rejection_is_final_even_of_an_approved_creative(conn: sa.Connection) -> None:
    note(conn, partner(conn), "cr-1")
    creative_id = list_creatives(conn, base_url=BASE)[0].id
    approve(conn, creative_id, "cli:ops", base_url=BASE)
    rejected = reject(conn, creative_id, "cli:legal", base_url=BASE)
    assert (rejected.status, rejected.decided_by) == ("rejected", "cli:legal")
    assert reject(conn, creative_id, "cli:ops", base_url=BASE) == rejected
    refused = refusal(conn, lambda: approve(conn, creative_id, "cli:ops", base_url=BASE))
    assert (refused.status, refused.code, refused.field) == (409, "creative_rejected", "id")
    assert get_creative(conn, creative_id, base_url=BASE) == rejected
    assert not playable(rejected.status)


def test_a_decision_the_rules_refuse_after_a_concurrent_one_is_refused(
    conn: sa.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rejection committed between approve's read and its update: the update (on the status it read)
    changes nothing, and the rules, applied again, refuse the approval."""
    note(conn, partner(conn), "cr-1")
    creative_id = list_creatives(conn, base_url=BASE)[0].id
    read = creatives_repository.get_creative
    calls = []

    def rejected_meanwhile(c: sa.Connection, cid: int, *, base_url: str) -> object:
        found = read(c, cid, base_url=base_url)
        if not calls:
            c.execute(sa.update(demand_creatives).values(status="rejected"))
        calls.append(cid)
        return found

    monkeypatch.setattr(creatives_repository, "get_creative", rejected_meanwhile)
    refused = refusal(conn, lambda: approve(conn, creative_id, "cli:ops", base_url=BASE))
    assert refused.code == "creative_rejected"


def test_the_list_filters_by_status_and_partner_and_an_unknown_partner_is_a_404(conn: sa.Connection) -> None:
    one, other = partner(conn, "one"), partner(conn, "other")
    for bidder, crid in ((one, "a"), (other, "b"), (one, "c")):
        note(conn, bidder, crid)
    approve(conn, list_creatives(conn, base_url=BASE)[0].id, "cli:ops", base_url=BASE)
    assert [c.crid for c in list_creatives(conn, base_url=BASE)] == ["a", "b", "c"]
    assert [c.crid for c in list_creatives(conn, "pending", base_url=BASE)] == ["b", "c"]
    assert [c.crid for c in list_creatives(conn, partner="one", base_url=BASE)] == ["a", "c"]
    assert [c.crid for c in list_creatives(conn, "pending", "one", base_url=BASE)] == ["c"]
    assert list_creatives(conn, "rejected", base_url=BASE) == []
    refused = refusal(conn, lambda: list_creatives(conn, partner="nobody", base_url=BASE))
    assert (refused.status, refused.code, refused.field) == (404, "partner_not_found", "partner")


@pytest.mark.parametrize("creative_id", [0, -1, 424242, 2**31, 2**63])
def test_an_unknown_id_is_a_404_for_every_action(conn: sa.Connection, creative_id: int) -> None:
    for action in (
        lambda: get_creative(conn, creative_id, base_url=BASE),
        lambda: approve(conn, creative_id, "cli:ops", base_url=BASE),
        lambda: reject(conn, creative_id, "cli:ops", base_url=BASE),
        lambda: markup(conn, creative_id),
    ):
        refused = refusal(conn, action)
        assert (refused.status, refused.code, refused.field) == (404, "creative_not_found", "id")


def test_removing_a_partner_removes_its_creatives_and_a_new_one_of_its_name_starts_afresh(
    conn: sa.Connection,
) -> None:
    bidder, kept = partner(conn, "gone"), partner(conn, "kept")
    note(conn, bidder, "cr-1")
    note(conn, kept, "cr-1")
    approve(conn, list_creatives(conn, base_url=BASE)[0].id, "cli:ops", base_url=BASE)
    remove_partner(conn, "gone")
    assert [c.partner for c in list_creatives(conn, base_url=BASE)] == ["kept"]
    assert conn.execute(sa.select(sa.func.count()).select_from(demand_creatives)).scalar() == 1
    assert note(conn, partner(conn, "gone"), "cr-1") == "pending"


@pytest.fixture
def committed_partner(engine: sa.Engine) -> Iterator[Partner]:
    """A partner committed for real (threads see it), removed with its creatives afterwards."""
    with write_transaction(engine) as c:
        made = partner(c, "racer")
    yield made
    with write_transaction(engine) as c:
        remove_partner(c, "racer")


def test_two_workers_noting_one_new_crid_at_once_both_succeed_with_one_row(
    engine: sa.Engine, committed_partner: Partner
) -> None:
    """The first holds its uncommitted row while the second notes the crid: the second waits (PostgreSQL's
    unique index, SQLite's write lock), then answers the row the first committed."""
    answers: list[str] = []
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with write_transaction(engine) as c:
                answers.append(note(c, committed_partner, "race", adm='<VAST version="2.0"/>', now=NOW + 1))
        except BaseException as exc:  # reported by the test, in its thread
            errors.append(exc)

    with write_transaction(engine) as first:
        answers.append(note(first, committed_partner, "race"))
        worker = threading.Thread(target=second)
        worker.start()
        worker.join(0.5)
        assert worker.is_alive(), "the second note must wait for the first's row"
    worker.join(30)
    assert not errors and answers == ["pending", "pending"]
    with engine.connect() as c:
        rows = c.execute(sa.select(demand_creatives.c.adm, demand_creatives.c.first_seen_at)).all()
    assert [tuple(r) for r in rows] == [(VAST, NOW)]


def test_a_note_that_loses_the_insert_race_reads_the_winners_row(
    conn: sa.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path of the second worker whose read came before the first's commit (PostgreSQL), on both
    backends: its insert hits the unique constraint, and it answers the stored status."""
    trusted = partner(conn, "trusted", auto_approve=True)
    conn.execute(
        sa.insert(demand_creatives).values(
            partner_id=trusted.id, crid="race", status="rejected", first_seen_at=NOW, adm=VAST
        )
    )
    real = creatives_repository._status_of
    reads: list[str | None] = []

    def first_read_misses(c: sa.Connection, partner_id: int, crid: str) -> str | None:
        reads.append(real(c, partner_id, crid) if reads else None)
        return reads[-1]

    monkeypatch.setattr(creatives_repository, "_status_of", first_read_misses)
    assert note(conn, trusted, "race") == "rejected"
    assert reads == [None, "rejected"], "the insert must have been tried, and lost"
    assert len(list_creatives(conn, partner="trusted", base_url=BASE)) == 1


def test_the_rules_a_decision_follows() -> None:
    assert decided("pending", "approved", 1) and decided("pending", "rejected", 1)
    assert decided("approved", "rejected", 1)
    assert not decided("approved", "approved", 1) and not decided("rejected", "rejected", 1)
    with pytest.raises(ApiError) as refused:
        decided("rejected", "approved", 1)
    assert refused.value.code == "creative_rejected"
    assert [playable(s) for s in ("pending", "approved", "rejected")] == [False, True, False]
    assert reviewable("cr", None, "https://b.test/vast") and not reviewable("cr", "", None)


@pytest.mark.parametrize("value", ["Pending", "", "approved ", "all"])
def test_a_status_filter_that_is_no_status_is_a_400_naming_the_field(value: str) -> None:
    with pytest.raises(ApiError) as refused:
        checked_status(value)
    assert (refused.value.status, refused.value.code, refused.value.field) == (400, "invalid_field", "status")
    assert checked_status("pending") == "pending" and checked_status(None) is None


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvironmentSettings]:
    settings, schemas = make_settings(tmp_path, str(request.param), free_port())
    yield settings.environment("production")
    if schemas:
        drop_schemas(schemas)


def test_migration_0014_adds_the_creatives_table_one_row_per_partner_and_crid_and_its_downgrade_drops_it(
    env: EnvironmentSettings,
) -> None:
    engine = make_engine(env)
    schema = env.database_schema
    try:
        config = at_revision(engine, schema, "0013")
        assert "demand_creatives" not in sa.inspect(engine).get_table_names(schema=schema)
        command.upgrade(config, "0014")
        partners = sa.table(
            "demand_partners",
            *(sa.column(c) for c in ("id", "name", "endpoint", "timeout_ms", "floor_cpm_micros")),
            *(sa.column(c) for c in ("currency", "auction", "auto_approve", "status", "created_at")),
            schema=schema,
        )
        table = demand_creatives.to_metadata(sa.MetaData(), schema=schema)
        with engine.begin() as conn:
            conn.execute(
                sa.insert(partners).values(
                    id=1,
                    name="dsp",
                    endpoint=ENDPOINT,
                    timeout_ms=150,
                    floor_cpm_micros=0,
                    currency="USD",
                    auction="first",
                    auto_approve=False,
                    status="active",
                    created_at=1,
                )
            )
            conn.execute(sa.insert(table).values(partner_id=1, crid="cr", status="pending", first_seen_at=1))
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(sa.insert(table).values(partner_id=1, crid="cr", status="approved", first_seen_at=2))
        command.downgrade(config, "0013")
        assert "demand_creatives" not in sa.inspect(engine).get_table_names(schema=schema)
    finally:
        engine.dispose()
