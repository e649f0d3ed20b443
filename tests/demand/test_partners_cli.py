"""`adslot demand`: partners added, listed, changed, paused, resumed and removed from the shell, as JSON, per
environment; refusals print the API's code and field and exit 2; every change is in the audit log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from adslot.audit import entries
from adslot.cli import main
from adslot.environment import transact
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, cli_databases, drop_schemas

ENDPOINT = "https://bidder.example.test/openrtb"
Run = Callable[..., str]


@pytest.fixture(params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    """The CLI against fresh databases on the backend under test; `ok=False` expects a refusal (exit 2)."""
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(main, list(args))
        assert result.exit_code == (0 if ok else 2), result.output
        return result.output

    yield invoke
    if schemas:
        drop_schemas(schemas)


def add(run: Run, name: str, *options: str, env: str = "production", ok: bool = True) -> Any:
    output = run("demand", "add", "--env", env, "--name", name, "--endpoint", ENDPOINT, *options, ok=ok)
    return json.loads(output) if ok else output


def test_a_partner_is_added_listed_paused_resumed_and_removed(run: Run) -> None:
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
    run("venues", "add", "--venue-id", "hall", "--name", "Hall")
    made = add(
        run,
        "dsp-one",
        *("--timeout-ms", "200", "--floor-cpm", "1.5", "--currency", "EUR", "--auction", "second"),
        *("--max-qps", "50", "--venues", "lobby, hall", "--auto-approve"),
    )
    assert made | {"id": 0, "created_at": 0} == {
        "id": 0,
        "name": "dsp-one",
        "endpoint": ENDPOINT,
        "timeout_ms": 200,
        "floor_cpm": 1.5,
        "currency": "EUR",
        "auction": "second",
        "max_qps": 50,
        "venues": ["hall", "lobby"],
        "auto_approve": True,
        "status": "active",
        "created_at": 0,
        "deals": [],
        "blocked_domains": [],
        "notice_hosts": [],
        "auth_header": None,
    }
    defaults = add(run, "dsp-two")
    assert (defaults["timeout_ms"], defaults["floor_cpm"], defaults["currency"]) == (150, 0.0, "USD")
    assert (defaults["auction"], defaults["max_qps"], defaults["venues"]) == ("first", None, None)
    assert defaults["auto_approve"] is False
    assert json.loads(run("demand", "list")) == [made, defaults]

    assert json.loads(run("demand", "pause", "dsp-one")) == made | {"status": "paused"}
    assert json.loads(run("demand", "list"))[0]["status"] == "paused"
    assert json.loads(run("demand", "resume", "dsp-one")) == made

    assert json.loads(run("demand", "remove", "dsp-one")) == made
    assert json.loads(run("demand", "list")) == [defaults]
    assert add(run, "dsp-one")["venues"] is None, "a removed partner's name is free again"


def test_update_changes_only_the_options_given_and_clear_gives_every_venue_back(run: Run) -> None:
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
    made = add(run, "dsp", "--venues", "lobby", "--max-qps", "10", "--auto-approve")
    changed = json.loads(run("demand", "update", "dsp", "--floor-cpm", "2.25", "--no-auto-approve"))
    assert changed == made | {"floor_cpm": 2.25, "auto_approve": False}
    cleared = json.loads(run("demand", "update", "dsp", "--clear", "venues", "--clear", "max_qps"))
    assert cleared == changed | {"venues": None, "max_qps": None}


def test_the_sandbox_and_production_keep_separate_partners(run: Run) -> None:
    add(run, "sandbox-dsp", env="sandbox")
    assert [p["name"] for p in json.loads(run("demand", "list", "--env", "sandbox"))] == ["sandbox-dsp"]
    assert json.loads(run("demand", "list", "--env", "production")) == []
    assert "partner_not_found" in run("demand", "pause", "--env", "production", "sandbox-dsp", ok=False)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (("--venues", "lobby,nowhere"), "unknown_venue: no venue 'nowhere' (field: venues[1])"),
        (("--venues", ""), "invalid_field"),
        (("--timeout-ms", "5"), "(field: timeout_ms)"),
        (("--floor-cpm", "-1"), "(field: floor_cpm)"),
        (("--currency", "usd"), "(field: currency)"),
        (("--currency", "ABC"), "'ABC' is not an ISO 4217 currency code (field: currency)"),
        (("--max-qps", "0"), "(field: max_qps)"),
    ],
)
def test_a_bad_option_is_refused_with_the_apis_code_and_field(
    run: Run, options: tuple[str, ...], expected: str
) -> None:
    run("venues", "add", "--venue-id", "lobby", "--name", "Lobby")
    assert expected in add(run, "dsp", *options, ok=False)
    assert json.loads(run("demand", "list")) == []


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("ftp://bidder.test/", "is not an absolute http(s) URL with a host (field: endpoint)"),
        ("bidder.test/openrtb", "is not an absolute http(s) URL with a host (field: endpoint)"),
        ("https://bidder.test:99999/", "is not a valid URL: Port out of range"),
    ],
)
def test_a_bad_endpoint_is_refused_saying_why(run: Run, endpoint: str, expected: str) -> None:
    output = run("demand", "add", "--name", "dsp", "--endpoint", endpoint, ok=False)
    assert "invalid_field" in output and expected in output


def test_a_duplicate_name_a_bad_name_and_an_unknown_partner_are_refused(run: Run) -> None:
    add(run, "dsp")
    assert "partner_exists: a demand partner named 'dsp' exists (field: name)" in add(run, "dsp", ok=False)
    assert "(field: name)" in add(run, "Not A Slug", ok=False)
    for command in ("pause", "resume", "remove"):
        refused = run("demand", command, "nobody", ok=False)
        assert "partner_not_found: no demand partner 'nobody' (field: name)" in refused
    assert "partner_not_found" in run("demand", "update", "nobody", "--timeout-ms", "300", ok=False)
    assert [p["name"] for p in json.loads(run("demand", "list"))] == ["dsp"]


def test_every_change_is_in_the_audit_log_with_the_shell_user(run: Run) -> None:
    add(run, "dsp")
    run("demand", "pause", "dsp")
    run("demand", "remove", "dsp")
    engine = make_engine(load_settings().environment("production"))
    try:
        logged = transact(engine, entries)
    finally:
        engine.dispose()
    assert [(e.action, e.target) for e in logged] == [
        ("demand_partner.delete", "demand partner dsp"),
        ("demand_partner.update", "demand partner dsp"),
        ("demand_partner.create", "demand partner dsp"),
    ]
    assert all(e.actor.startswith("cli:") for e in logged)
    assert logged[0].after is None and logged[2].before is None
    assert [(c.field, c.after) for c in logged[1].changes()] == [("status", '"paused"')]


def test_deals_and_blocked_domains_are_stored_checked_and_replaced_whole(run: Run) -> None:
    deals = '[{"id": "deal-1", "floor_cpm": 5, "at": 3, "buyer_seats": ["seat-9"]}, {"id": "deal-2"}]'
    made = add(run, "pmp", "--deals", deals, "--blocked-domains", "Casino.example,bad.example.")
    assert made["deals"] == [
        {"id": "deal-1", "floor_cpm": 5.0, "at": 3, "buyer_seats": ["seat-9"]},
        {"id": "deal-2", "floor_cpm": 0.0, "at": None, "buyer_seats": None},
    ]
    assert made["blocked_domains"] == ["bad.example", "casino.example"]
    twice = run("demand", "update", "pmp", "--deals", '[{"id": "d"}, {"id": "d"}]', ok=False)
    assert "invalid_field" in twice and "deals[1].id" in twice
    cleared = json.loads(run("demand", "update", "pmp", "--deals", "[]", "--blocked-domains", "x.example"))
    assert cleared["deals"] == [] and cleared["blocked_domains"] == ["x.example"]
    assert json.loads(run("demand", "update", "pmp", "--blocked-domains", ""))["blocked_domains"] == []
    bad = run("demand", "update", "pmp", "--blocked-domains", "not a domain", ok=False)
    assert "invalid_field" in bad and "blocked_domains[0]" in bad


def test_notice_hosts_are_stored_normalised_checked_and_replaced_whole(run: Run) -> None:
    made = add(run, "dsp", "--notice-hosts", "Win.Example.,win.example,10.0.0.7:8080,[2001:DB8::1]")
    assert made["notice_hosts"] == ["10.0.0.7:8080", "[2001:db8::1]", "win.example"]
    bad = run("demand", "update", "dsp", "--notice-hosts", "win.example,http://x.example/", ok=False)
    assert "invalid_field" in bad and "(field: notice_hosts[1])" in bad
    assert json.loads(run("demand", "update", "dsp", "--notice-hosts", "b.example"))["notice_hosts"] == [
        "b.example"
    ]
    assert json.loads(run("demand", "update", "dsp", "--clear", "notice_hosts"))["notice_hosts"] == []


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://user:s3cret-pw@bidder.test/openrtb",
        "https://s3cret-pw@bidder.test/",
        "https://:s3cret-pw@bidder.test:99999/",
    ],
)
def test_an_endpoint_with_credentials_is_refused_without_repeating_them(run: Run, endpoint: str) -> None:
    output = run("demand", "add", "--name", "dsp", "--endpoint", endpoint, ok=False)
    assert "invalid_endpoint" in output and "(field: endpoint)" in output
    assert "s3cret-pw" not in output
    assert json.loads(run("demand", "list")) == []


def test_a_credential_header_is_stored_but_only_its_name_is_ever_printed_or_audited(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADSLOT_AUTH_HEADER_VALUE", "Bearer s3cret-token")
    made = add(run, "dsp", "--auth-header", "Authorization")
    assert made["auth_header"] == "Authorization"
    listed = run("demand", "list")
    assert json.loads(listed)[0]["auth_header"] == "Authorization"
    timeout = run("demand", "update", "dsp", "--timeout-ms", "300")  # the variable alone changes nothing
    assert json.loads(timeout)["auth_header"] == "Authorization"
    changed = run(
        "demand", "update", "dsp", "--auth-header", "X-Api-Key", "--auth-header-value", "other-s3cret"
    )
    assert json.loads(changed)["auth_header"] == "X-Api-Key"
    reserved = run("demand", "update", "dsp", "--auth-header", "Content-Type", ok=False)
    assert "invalid_field" in reserved and "(field: auth_header.name)" in reserved
    monkeypatch.delenv("ADSLOT_AUTH_HEADER_VALUE")
    missing = run("demand", "update", "dsp", "--auth-header", "X-Other", ok=False)
    assert "(field: auth_header.value)" in missing
    assert json.loads(run("demand", "update", "dsp", "--clear", "auth_header"))["auth_header"] is None
    engine = make_engine(load_settings().environment("production"))
    try:
        logged = transact(engine, entries)
        stored = transact(
            engine,
            lambda c: c.exec_driver_sql(
                "SELECT auth_header_name, auth_header_value FROM demand_partners"
            ).all(),
        )
    finally:
        engine.dispose()
    assert stored == [(None, None)]
    audit_text = json.dumps([(e.before, e.after) for e in logged])
    assert "X-Api-Key" in audit_text
    assert "s3cret" not in audit_text
    for output in (json.dumps(made), listed, timeout, changed, reserved, missing):
        assert "s3cret" not in output
