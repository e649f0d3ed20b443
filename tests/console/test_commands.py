"""`adslot users ...` on SQLite and PostgreSQL: the password from the terminal or standard input, the
refusals with the API's codes, and every change in the audit log."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from adslot.cli import main
from adslot.console import share_links, users
from adslot.environment import transact
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from adslot.storage.tables import audit_log
from tests.conftest import BACKENDS, cli_databases, drop_schemas

Invoke = Callable[..., Result]


@pytest.fixture(params=BACKENDS)
def invoke(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Invoke]:
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    runner = CliRunner()
    yield lambda *args, input=None: runner.invoke(main, list(args), input=input)
    if schemas:
        drop_schemas(schemas)


def engine() -> sa.Engine:
    return make_engine(load_settings().environment("production"))


def test_a_user_made_from_standard_input_can_sign_in_and_is_listed_and_audited(invoke: Invoke) -> None:
    made = invoke(
        "users",
        "create",
        "--email",
        "Ops@Example.com",
        "--role",
        "trafficker",
        "--password-stdin",
        input="a long enough password\n",
    )
    assert made.exit_code == 0, made.output
    listed = invoke("users", "list")
    assert "ops@example.com\ttrafficker\tactive" in listed.output
    db = engine()
    try:
        outcome = transact(
            db, lambda c: users.sign_in(c, "ops@example.com", "a long enough password", 1), write=True
        )
        assert outcome.user is not None
        with db.connect() as conn:
            entry = conn.execute(sa.select(audit_log)).mappings().one()
    finally:
        db.dispose()
    assert entry["action"] == "user.create" and entry["actor"].startswith("cli:")
    assert "password" not in (entry["after"] or "")


def test_the_password_is_asked_for_twice_on_the_terminal(invoke: Invoke) -> None:
    mismatch = invoke(
        "users",
        "create",
        "--email",
        "a@example.com",
        "--role",
        "viewer",
        input="a long enough password\nanother long password\n" + "a long enough password\n" * 2,
    )
    assert mismatch.exit_code == 0, mismatch.output
    assert "The two entered values do not match" in mismatch.output
    assert "a@example.com\tviewer\tactive" in invoke("users", "list").output


def test_bad_users_are_refused_with_the_apis_code_and_field(invoke: Invoke) -> None:
    short = invoke(
        "users", "create", "--email", "b@example.com", "--role", "viewer", "--password-stdin", input="short\n"
    )
    assert short.exit_code == 2 and "invalid_field" in short.output and "password" in short.output
    email = invoke(
        "users",
        "create",
        "--email",
        "nope",
        "--role",
        "viewer",
        "--password-stdin",
        input="a long enough password\n",
    )
    assert email.exit_code == 2 and "(field: email)" in email.output
    role = invoke("users", "create", "--email", "c@example.com", "--role", "owner", "--password-stdin")
    assert role.exit_code == 2
    missing = invoke("users", "disable", "--email", "ghost@example.com")
    assert missing.exit_code == 2 and "unknown_user" in missing.output


def test_disable_and_set_password_act_and_are_audited(invoke: Invoke) -> None:
    invoke(
        "users",
        "create",
        "--email",
        "d@example.com",
        "--role",
        "admin",
        "--password-stdin",
        input="a long enough password\n",
    )
    assert (
        invoke(
            "users",
            "set-password",
            "--email",
            "d@example.com",
            "--password-stdin",
            input="the new long password\n",
        ).exit_code
        == 0
    )
    assert invoke("users", "disable", "--email", "d@example.com").exit_code == 0
    assert "d@example.com\tadmin\tdisabled" in invoke("users", "list").output
    db = engine()
    try:
        with db.connect() as conn:
            actions = conn.execute(sa.select(audit_log.c.action).order_by(audit_log.c.id)).scalars().all()
    finally:
        db.dispose()
    assert actions == ["user.create", "user.set-password", "user.disable"]


def test_an_advertiser_user_is_bound_to_the_advertisers_given_and_audited(invoke: Invoke) -> None:
    made = [invoke("campaigns", "add-advertiser", "--name", name) for name in ("Acme", "Zenith", "Orbit")]
    assert all(m.exit_code == 0 for m in made), [m.output for m in made]
    args = ("users", "create", "--email", "proof@acme.example", "--role", "advertiser", "--password-stdin")
    refused = invoke(*args, input="a long enough password\n")
    assert refused.exit_code != 0 and "missing_field" in refused.output and "advertiser" in refused.output
    unknown = invoke(*args, "--advertiser", "77", input="a long enough password\n")
    assert unknown.exit_code != 0 and "no advertiser 77" in unknown.output
    bound = invoke(*args, "--advertiser", "1", "--advertiser", "3", input="a long enough password\n")
    assert bound.exit_code == 0, bound.output
    assert "proof@acme.example\tadvertiser\tactive\t1,3" in invoke("users", "list").output
    db = engine()
    try:
        outcome = transact(
            db, lambda c: users.sign_in(c, "proof@acme.example", "a long enough password", 1), write=True
        )
        assert outcome.user is not None and outcome.user.advertiser_ids == (1, 3)
        with db.connect() as conn:
            entry = conn.execute(sa.select(audit_log).where(audit_log.c.action == "user.create")).mappings()
            after = [e["after"] for e in entry]
        assert any('"advertiser_ids":[1,3]' in (a or "").replace(" ", "") for a in after), after
    finally:
        db.dispose()


def test_a_share_link_is_made_and_revoked_from_the_shell_and_audited(invoke: Invoke) -> None:
    assert invoke("campaigns", "add-advertiser", "--name", "Acme").exit_code == 0
    added = invoke(
        "campaigns",
        "add",
        "--advertiser-id",
        "1",
        "--name",
        "Spring",
        "--start-at",
        "1800000000",
        "--end-at",
        "1800086400",
    )
    assert added.exit_code == 0, added.output
    refused = invoke("campaigns", "share-link", "--campaign-id", "1", "--days", "400")
    assert refused.exit_code == 2 and "invalid_field" in refused.output and "days" in refused.output
    made = invoke("campaigns", "share-link", "--campaign-id", "1", "--days", "7", "--label", "agency")
    assert made.exit_code == 0, made.output
    url, described = made.output.splitlines()
    assert re.match(r"^https?://[^/]+/console/shared/production/adslot_share_[A-Za-z0-9_-]{32}$", url)
    assert described.startswith("link 1: expires ")
    db = engine()
    try:
        now = int(time.time())
        opened = transact(db, lambda c: share_links.open_link(c, url.rsplit("/", 1)[1], now), write=True)
        assert opened is not None and opened.opens == 1 and opened.label == "agency"
        assert opened.expires_at - opened.created_at == 7 * 86400
        assert (opened.period_start, opened.period_end) == (1800000000, 1800086400)
        revoked = invoke("campaigns", "revoke-link", "1")
        assert revoked.exit_code == 0 and "link 1 revoked" in revoked.output
        assert (
            transact(db, lambda c: share_links.open_link(c, url.rsplit("/", 1)[1], now), write=True) is None
        )
        again = invoke("campaigns", "revoke-link", "1")
        assert again.exit_code == 2 and "unknown_share_link" in again.output
        with db.connect() as conn:
            actions = conn.execute(sa.select(audit_log.c.action, audit_log.c.after)).all()
        assert [a for a, _ in actions if a.startswith("share-link")] == [
            "share-link.create",
            "share-link.revoke",
        ]
        assert not any(url.rsplit("/", 1)[1] in (after or "") for _, after in actions)
    finally:
        db.dispose()
