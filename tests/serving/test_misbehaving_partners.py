"""Demand partners that misbehave cost a player nothing beyond their timeout: one that sleeps, one that fails
with HTTP 500, one that answers garbage and one that bids under its floor. Each, alone in turn, is asked for
slots on a venue with a direct campaign (which then plays) and on one without (no ad, 204); every ad request
is answered within the partner's `timeout_ms` plus a little beyond its durable record, and each ask is counted
by its reason, in the caller's tallies and in demand_stats.

The budget leaves out the wait for the ledger's commit, which the answer's Server-Timing header reports
(`record`): that wait is the disk's, the same with or without a partner, and an fsync that a busy machine
stalls for a second says nothing about what a partner costs. The auction's own time (`demand`) is held to the
budget as well. A partner that keeps failing is then skipped by its circuit breaker
(not asked at all), and the ad request no longer waits for it.

The misbehaving partners are tiny ASGI apps under uvicorn in a thread on a loopback port; the one that bids
under its floor is the built-in test bidder (`below_floor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.demand.bidder import AUCTION_PATH
from adslot.demand.caller import PartnerTally
from adslot.environment import Environment
from adslot.storage.database import make_engine
from adslot.storage.tables import demand_stats
from tests.conftest import (
    PROD_VENUE,
    LiveServer,
    drop_schemas,
    eventually,
    play_time,
    start_server,
)
from tests.demand.test_bidder import running
from tests.loopback import on_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

EMPTY_VENUE = "venue-empty"
TIMEOUT_MS = 150
SLACK_MS = 50
"""What an ad request may take beyond the partner's timeout: adslot's own work, on loopback."""
SLEEP_S = 5.0
FLOOR_CPM = 5.0
"""The below-floor partner's floor: the test bidder then bids half of it (2.5), under it."""
REPEATS = 2
"""Ad requests per venue and partner: 4 failures in a row, one fewer than opens a breaker (5)."""
BREAKER_THRESHOLD = 5
"""caller.DEFAULT_THRESHOLD: the consecutive failures that open a partner's breaker."""


@dataclass
class Misbehaving:
    """A partner app and the bid requests it received."""

    behaviour: str
    hits: list[float] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:  # the whole bid request first, as a real bidder reads it
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False) and message["type"] == "http.request"
        self.hits.append(time.monotonic())
        if self.behaviour == "sleeps":
            # Sleeps before answering, unless adslot hangs up first (it does, at its timeout): then there is
            # no one to answer, and the server stops without waiting out the sleep.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SLEEP_S):
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    return
            await _answer(send, 204, b"")
        elif self.behaviour == "http_500":
            await _answer(send, 500, b'{"error": "internal server error"}')
        elif self.behaviour == "bad_json":
            await _answer(send, 200, b'{"id": "not closed", "seatbid": [')
        else:
            raise AssertionError(self.behaviour)


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


App = Callable[[Scope, Receive, Send], Awaitable[None]]


@contextmanager
def serving(app: App, path: str = AUCTION_PATH) -> Iterator[str]:
    """The partner app under uvicorn in a thread on a loopback port; its bid request endpoint."""
    with on_loopback(app, f"the partner {app!r}", timeout_graceful_shutdown=2) as url:
        yield f"{url}{path}"


@dataclass(frozen=True)
class Case:
    """A way to misbehave, and how each ask of such a partner is counted."""

    behaviour: str
    outcome: Callable[[PartnerTally], int]
    """The tally of its outcome: timeouts, errors or dropped answers."""
    reason: Callable[[PartnerTally], int]
    """The tally of its reason within that outcome."""
    metrics: tuple[str, str]
    """The demand_stats metrics of the same two counts."""
    floor_cpm: float = 0.0

    def partner(self, suffix: str) -> str:
        return f"{self.behaviour.replace('_', '-')}-{suffix}"


CASES = [
    Case("sleeps", lambda t: t.timeouts, lambda t: t.timeouts, ("timeouts", "timeouts")),
    Case(
        "http_500",
        lambda t: t.errors,
        lambda t: t.errors_by_reason.get("http_500", 0),
        ("errors", "error:http_500"),
    ),
    Case("bad_json", lambda t: t.dropped, lambda t: t.drops.get("bad_json", 0), ("dropped", "drop:bad_json")),
    Case(
        "below_floor",
        lambda t: t.dropped,
        lambda t: t.drops.get("below_floor", 0),
        ("dropped", "drop:below_floor"),
        FLOOR_CPM,
    ),
]


@pytest.fixture(scope="module")
def endpoints() -> Iterator[dict[str, str]]:
    """Every misbehaving partner, running, by behaviour."""
    with contextlib.ExitStack() as stack:
        found = {
            behaviour: stack.enter_context(serving(Misbehaving(behaviour)))
            for behaviour in ("sleeps", "http_500", "bad_json")
        }
        bidder = stack.enter_context(running(price_cpm=4.2, below_floor=True))
        found["below_floor"] = f"{bidder.base_url}{AUCTION_PATH}"
        yield found


@pytest.fixture(scope="module")
def adslot(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server, schemas = start_server(tmp_path_factory.mktemp("adslot"), backend)
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@contextmanager
def enrolled(
    server: LiveServer, name: str, endpoint: str, *, timeout_ms: int, floor_cpm: float = 0
) -> Iterator[None]:
    """The partner, active on both venues, for the block: paused afterwards, so it is asked alone."""
    assert server.keys is not None
    admin = {"Ssp-Key": server.keys.production_admin}
    answer = httpx.post(
        f"{server.url}/api/v1/demand/partners",
        headers=admin,
        json={
            "name": name,
            "endpoint": endpoint,
            "timeout_ms": timeout_ms,
            "floor_cpm": floor_cpm,
            "venues": [PROD_VENUE, EMPTY_VENUE],
            "auto_approve": True,
        },
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    try:
        yield
    finally:
        paused = httpx.patch(
            f"{server.url}/api/v1/demand/partners/{name}",
            headers=admin,
            json={"status": "paused"},
            timeout=10,
        )
        assert paused.status_code == 200, paused.text


def environment(server: LiveServer) -> Environment:
    assert server.app is not None
    return server.app.environments["production"]


def tally(server: LiveServer, name: str) -> PartnerTally:
    return environment(server).exchange.caller.tallies()[name]


@dataclass(frozen=True)
class Took:
    """How long an ad request took, in seconds: seen from the player, and as its Server-Timing tells."""

    venue: str
    elapsed: float
    demand: float
    """The auction."""
    record: float
    """The wait for the ledger's durable commit."""

    @property
    def beyond_record(self) -> float:
        """What the player waited for, but the disk."""
        return self.elapsed - self.record


def server_timing(answer: httpx.Response) -> dict[str, float]:
    """The answer's Server-Timing metrics, in seconds."""
    found: dict[str, float] = {}
    for metric in answer.headers["server-timing"].split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        durations = [float(param.removeprefix("dur=")) for param in params if param.startswith("dur=")]
        assert len(durations) == 1, answer.headers["server-timing"]
        found[name] = durations[0] / 1000
    return found


def took(venue: str, answer: httpx.Response, elapsed: float) -> Took:
    timing = server_timing(answer)
    return Took(venue, elapsed, timing["demand"], timing["record"])


def timed_ad_request(client: httpx.Client, server: LiveServer, venue: str) -> tuple[httpx.Response, float]:
    """The ad request's answer and the seconds the HTTP call took, seen from the player."""
    assert server.keys is not None
    started = time.perf_counter()
    answer = client.post(
        f"{server.url}/api/v1/ad/request",
        headers={"Ssp-Key": server.keys.production},
        json={"venue_id": venue, "play_time": play_time()},
    )
    return answer, time.perf_counter() - started


def campaign_of(client: httpx.Client, server: LiveServer, answer: httpx.Response) -> int | None:
    assert server.keys is not None
    ident = answer.json()["data"]["ad_request_uuid"]
    record = client.get(
        f"{server.url}/api/v1/ad/request/{ident}", headers={"Ssp-Key": server.keys.production}
    )
    assert record.status_code == 200, record.text
    campaign: int | None = record.json()["data"]["campaign_id"]
    return campaign


def stats_of(server: LiveServer, name: str) -> dict[str, int]:
    """The partner's demand_stats metrics, summed over hours."""
    engine = make_engine(server.settings.environment("production"))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(demand_stats.c.metric, sa.func.sum(demand_stats.c["count"]))
                .where(demand_stats.c.partner == name)
                .group_by(demand_stats.c.metric)
            ).all()
    finally:
        engine.dispose()
    return {metric: int(count) for metric, count in rows}


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as opened:
        yield opened


@pytest.mark.parametrize("case", CASES, ids=[case.behaviour for case in CASES])
def test_a_misbehaving_partner_delays_no_ad_request_past_its_timeout_and_the_direct_campaign_still_plays(
    case: Case, adslot: LiveServer, endpoints: dict[str, str], client: httpx.Client
) -> None:
    name = case.partner("partner")
    direct = adslot.extra["campaign_id"]
    budget = (TIMEOUT_MS + SLACK_MS) / 1000
    seen: list[Took] = []
    with enrolled(adslot, name, endpoints[case.behaviour], timeout_ms=TIMEOUT_MS, floor_cpm=case.floor_cpm):
        for _ in range(REPEATS):
            answer, elapsed = timed_ad_request(client, adslot, PROD_VENUE)
            assert answer.status_code == 200, answer.text
            seen.append(took(PROD_VENUE, answer, elapsed))
            assert campaign_of(client, adslot, answer) == direct
            answer, elapsed = timed_ad_request(client, adslot, EMPTY_VENUE)
            assert answer.status_code == 204, answer.text
            seen.append(took(EMPTY_VENUE, answer, elapsed))
    assert all(one.demand <= budget and one.beyond_record <= budget for one in seen), (case.behaviour, seen)
    counted = tally(adslot, name)
    asks = 2 * REPEATS
    assert counted.requests == asks, counted
    assert case.outcome(counted) == asks and case.reason(counted) == asks, counted
    assert counted.bids == 0 and not counted.skipped, counted
    assert counted.breaker == "closed", counted  # 4 failures in a row: one short of opening it


def test_each_misbehaviour_is_counted_by_its_reason_in_demand_stats(
    adslot: LiveServer, endpoints: dict[str, str], client: httpx.Client
) -> None:
    for case in CASES:
        with enrolled(
            adslot,
            case.partner("stats"),
            endpoints[case.behaviour],
            timeout_ms=TIMEOUT_MS,
            floor_cpm=case.floor_cpm,
        ):
            answer, _ = timed_ad_request(client, adslot, EMPTY_VENUE)
            assert answer.status_code == 204, answer.text

    def written() -> dict[str, dict[str, int]]:
        return {case.partner("stats"): stats_of(adslot, case.partner("stats")) for case in CASES}

    # DemandStats adds what it counted to the table every 5 seconds.
    assert eventually(lambda: all(written().values()), timeout=12), written()
    for case in CASES:
        outcome, reason = case.metrics
        expected = {"requests": 1, outcome: 1, reason: 1}
        assert written()[case.partner("stats")] == expected, case.behaviour


def test_a_partner_that_keeps_failing_is_skipped_by_its_breaker_and_no_longer_slows_the_ad_request(
    adslot: LiveServer, client: httpx.Client
) -> None:
    slow_ms = 300  # long enough that an ask is told apart from a skip, whatever the machine's noise
    app = Misbehaving("sleeps")
    with serving(app) as endpoint, enrolled(adslot, "keeps-failing", endpoint, timeout_ms=slow_ms):
        asked = [timed_ad_request(client, adslot, PROD_VENUE) for _ in range(BREAKER_THRESHOLD)]
        assert eventually(lambda: len(app.hits) == BREAKER_THRESHOLD, timeout=2), app.hits
        skipped = [timed_ad_request(client, adslot, PROD_VENUE) for _ in range(3)]
        counted = tally(adslot, "keeps-failing")
        hits = len(app.hits)
    direct = adslot.extra["campaign_id"]
    for answer, _ in [*asked, *skipped]:
        assert answer.status_code == 200, answer.text
        assert campaign_of(client, adslot, answer) == direct
    waited = [took(PROD_VENUE, answer, elapsed) for answer, elapsed in asked]
    fast = [took(PROD_VENUE, answer, elapsed) for answer, elapsed in skipped]
    slow, most = slow_ms / 1000, (slow_ms + SLACK_MS) / 1000
    assert all(slow <= one.demand <= most and one.beyond_record <= most for one in waited), waited
    assert all(one.demand < TIMEOUT_MS / 1000 and one.beyond_record < TIMEOUT_MS / 1000 for one in fast), fast
    assert hits == BREAKER_THRESHOLD  # not asked at all while its breaker is open
    assert counted.timeouts == BREAKER_THRESHOLD and counted.requests == BREAKER_THRESHOLD, counted
    assert counted.skipped == {"skipped_breaker": 3}, counted
    assert counted.breaker == "open", counted
