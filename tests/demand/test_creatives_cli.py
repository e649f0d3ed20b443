"""`adslot demand creatives|approve|reject`: the approval queue from the shell, as JSON with each creative's
absolute preview URL, per environment; refusals print the API's code and field and exit 2; every decision is
in the audit log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from adslot.audit import entries
from adslot.cli import main
from adslot.demand.creatives_repository import note_creative
from adslot.demand.repository import get_partner
from adslot.environment import transact
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, cli_databases, drop_schemas

ENDPOINT = "https://bidder.example.test/openrtb"
VAST = '<VAST version="2.0"><Ad id="a1"><InLine><AdSystem>dsp</AdSystem></InLine></Ad></VAST>'
NOW = 1_800_000_000
Run = Callable[..., str]


@pytest.fixture(params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    """The CLI against fresh databases on the backend under test; `ok=False` expects a refusal (exit 2)."""
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    monkeypatch.setenv("ADSLOT_PUBLIC_URL", "https://ads.example.test")
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(main, list(args))
        assert result.exit_code == (0 if ok else 2), result.output
        return result.output

    yield invoke
    if schemas:
        drop_schemas(schemas)


def bid(run: Run, partner: str, crid: str, *options: str, env: str = "production") -> str:
    """A partner (added if new) and one creative noted as the auction is to note it; its status."""
    if partner not in [p["name"] for p in json.loads(run("demand", "list", "--env", env))]:
        run("demand", "add", "--env", env, "--name", partner, "--endpoint", ENDPOINT, *options)
    engine = make_engine(load_settings().environment(env))
    try:
        return transact(
            engine,
            lambda c: note_creative(c, get_partner(c, partner), crid, ["brand.example"], VAST, None, NOW),
            write=True,
        )
    finally:
        engine.dispose()


def queue(run: Run, *options: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(run("demand", "creatives", *options))
    return listed


def test_the_queue_is_listed_with_preview_urls_and_filtered_by_status_and_partner(run: Run) -> None:
    assert bid(run, "dsp-one", "cr-1") == "pending"
    assert bid(run, "dsp-two", "cr-2", "--auto-approve") == "approved"
    first, second = queue(run)
    assert first == {
        "id": first["id"],
        "partner": "dsp-one",
        "crid": "cr-1",
        "adomain": ["brand.example"],
        "nurl": None,
        "has_markup": True,
        "status": "pending",
        "first_seen_at": NOW,
        "decided_at": None,
        "decided_by": None,
        "preview_url": f"https://ads.example.test/api/v1/demand/creatives/{first['id']}/preview",
    }
    assert (second["partner"], second["status"]) == ("dsp-two", "approved")
    assert queue(run, "--status", "pending") == [first]
    assert queue(run, "--partner", "dsp-two") == [second]
    assert queue(run, "--status", "pending", "--partner", "dsp-two") == []


def test_approve_then_reject_and_a_rejection_is_final(run: Run) -> None:
    bid(run, "dsp", "cr-1")
    [creative] = queue(run)
    creative_id = str(creative["id"])
    approved = json.loads(run("demand", "approve", creative_id))
    assert approved["status"] == "approved" and approved["decided_by"].startswith("cli:")
    assert json.loads(run("demand", "approve", creative_id)) == approved, "approving twice changes nothing"
    assert bid(run, "dsp", "cr-1") == "approved"

    assert json.loads(run("demand", "reject", creative_id))["status"] == "rejected"
    refused = run("demand", "approve", creative_id, ok=False)
    assert "creative_rejected:" in refused and "(field: id)" in refused
    assert queue(run, "--status", "rejected")[0]["id"] == creative["id"]
    assert bid(run, "dsp", "cr-1") == "rejected", "a rejected creative is never played again"

    engine = make_engine(load_settings().environment("production"))
    try:
        logged = [e for e in transact(engine, entries) if e.target == f"demand creative {creative_id}"]
    finally:
        engine.dispose()
    assert [e.action for e in logged] == [
        "demand_creative.reject",
        "demand_creative.approve",
        "demand_creative.approve",
    ]
    assert all(e.actor.startswith("cli:") for e in logged)


def test_removing_a_partner_empties_its_part_of_the_queue(run: Run) -> None:
    bid(run, "leaving", "cr-1")
    bid(run, "staying", "cr-1")
    run("demand", "remove", "leaving")
    assert [c["partner"] for c in queue(run)] == ["staying"]


def test_the_sandbox_and_production_keep_separate_queues(run: Run) -> None:
    bid(run, "sbx", "cr-1", env="sandbox")
    [creative] = queue(run, "--env", "sandbox")
    assert creative["preview_url"].startswith("https://ads.example.test/sandbox/api/v1/demand/creatives/")
    assert queue(run) == []
    assert "creative_not_found" in run("demand", "approve", str(creative["id"]), ok=False)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("creatives", "--status", "waiting"), "invalid_field: 'waiting' is not one of"),
        (("creatives", "--status", "waiting"), "(field: status)"),
        (
            ("creatives", "--partner", "nobody"),
            "partner_not_found: no demand partner 'nobody' (field: partner)",
        ),
        (("approve", "424242"), "creative_not_found: no demand creative 424242 (field: id)"),
        (("reject", "424242"), "creative_not_found: no demand creative 424242 (field: id)"),
        (("approve", "0"), "creative_not_found"),
        (("approve", "99999999999999999999"), "creative_not_found"),
        (("approve", "abc"), "invalid_field: 'abc' is not a creative id (field: id)"),
        (("reject", "--", "-1"), "(field: id)"),
        (("reject", "٣"), "(field: id)"),
    ],
)
def test_a_bad_id_or_filter_is_refused_with_the_apis_code_and_field(
    run: Run, args: tuple[str, ...], expected: str
) -> None:
    assert expected in run("demand", *args, ok=False)
