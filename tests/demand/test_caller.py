"""Asking partners: real HTTP servers on 127.0.0.1 that sleep, never answer, trickle, fail, or send garbage
or huge bodies cost `ask` no more than tmax plus a few milliseconds and are each counted by their reason; a
partner that keeps failing is backed off; max_qps, pause, venues and keep-alive are honoured. The breaker's
rules run on a fake clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from adslot.demand.auction import MAX_RESPONSE_BYTES, run_auction
from adslot.demand.bid_request import Opportunity
from adslot.demand.breaker import CircuitBreaker
from adslot.demand.caller import AskResult, PartnerCaller, PartnerOutcome
from adslot.demand.partners import Partner
from tests.demand.test_auction import VAST
from tests.vast.test_markup import laughs

SLACK_S = 0.050
"""What the issue allows over tmax."""
NOW = 1_800_000_000
OPPORTUNITY = Opportunity(
    ad_request_uuid="0190f0f0-0000-7000-8000-000000000001",
    venue_id="lobby",
    venue_name="Main lobby",
    play_time=NOW + 60,
    expires_at=NOW + 120,
    width=1920,
    height=1080,
)


@dataclass
class Seen:
    """What one bidder saw, read from the test's thread (ints and list appends are atomic enough)."""

    connections: int = 0
    requests: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)


Behaviour = Callable[[dict[str, Any], asyncio.StreamWriter], Awaitable[bool]]
"""Answers one request (its decoded JSON body); returns whether the connection may serve another."""


class Bidders:
    """Plain asyncio HTTP/1.1 servers on 127.0.0.1, in their own thread and event loop, so a misbehaving
    bidder shares nothing with the caller under test but the loopback interface."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list[asyncio.Server] = []
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, behaviour: Behaviour) -> tuple[str, Seen]:
        """A bidder answering with `behaviour`: its endpoint and what it sees."""
        seen = Seen()
        server = asyncio.run_coroutine_threadsafe(self._start(behaviour, seen), self.loop).result(5)
        self.servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/openrtb", seen

    async def _start(self, behaviour: Behaviour, seen: Seen) -> asyncio.Server:
        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.tasks.add(task)
            seen.connections += 1
            try:
                while True:
                    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                    headers = {
                        name.strip().lower(): value.strip()
                        for name, value in (line.split(":", 1) for line in head[1:] if line)
                    }
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                    request = msgspec.json.decode(body) if body else {}
                    seen.requests.append((headers, request))
                    if not await behaviour(request, writer):
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                self.tasks.discard(task)
                writer.close()

        return await asyncio.start_server(connected, "127.0.0.1", 0)

    def stop(self) -> None:
        async def stopping() -> None:
            for server in self.servers:
                server.close()
            for task in list(self.tasks):
                task.cancel()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(stopping(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def bidders() -> Iterator[Bidders]:
    servers = Bidders()
    yield servers
    servers.stop()


async def respond(
    writer: asyncio.StreamWriter, status: int, body: bytes = b"", content_type: str = "application/json"
) -> bool:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    return True


def bid_body(request: dict[str, Any], price: float) -> bytes:
    bid = {"id": "b1", "impid": "1", "price": price, "adm": VAST, "crid": "c1"}
    return msgspec.json.encode({"id": request["id"], "seatbid": [{"seat": "s1", "bid": [bid]}]})


def bidding(price: float) -> Behaviour:
    async def behaviour(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        return await respond(writer, 200, bid_body(request, price))

    return behaviour


def status(code: int, body: bytes = b"") -> Behaviour:
    async def behaviour(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        return await respond(writer, code, body)

    return behaviour


def sleeping(seconds: float) -> Behaviour:
    async def behaviour(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(seconds)
        return await respond(writer, 200, bid_body(request, 9.0))

    return behaviour


async def never_answering(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
    await asyncio.Event().wait()
    return False


async def trickling(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
    """A valid answer, one byte every 20 ms: each read succeeds, the whole never arrives in time."""
    body = bid_body(request, 9.0)
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode())
    for byte in body:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(0.020)
    return True


def streaming_huge(sent: list[int]) -> Behaviour:
    """A chunked body that never ends, 64 KiB every 5 ms: a reader that stops at the limit is done in about
    0.1 s, one that reads on until tmax is not."""

    async def behaviour(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b" " * 65536
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            sent[0] += len(chunk)
            await asyncio.sleep(0.005)

    return behaviour


def partner(name: str, endpoint: str, **changes: Any) -> Partner:
    fields: dict[str, Any] = {
        "id": 1,
        "name": name,
        "endpoint": endpoint,
        "timeout_ms": 120,
        "floor_cpm": 2.0,
        "currency": "USD",
        "auction": "first",
        "max_qps": None,
        "venues": None,
        "auto_approve": False,
        "status": "active",
        "created_at": NOW,
        **changes,
    }
    return Partner(**fields)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(coroutine_fn: Callable[[PartnerCaller], Awaitable[Any]], **options: Any) -> Any:
    """Run a scenario against a fresh caller in a fresh event loop, closing the caller after."""

    async def scenario() -> Any:
        caller = PartnerCaller(**options)
        try:
            return await coroutine_fn(caller)
        finally:
            await caller.close()

    return asyncio.run(scenario())


async def timed_ask(caller: PartnerCaller, partners: list[Partner]) -> tuple[AskResult, float]:
    started = time.perf_counter()
    result = await caller.ask(partners, OPPORTUNITY, NOW)
    return result, time.perf_counter() - started


def by_partner(result: AskResult) -> dict[str, PartnerOutcome]:
    return {item.partner: item for item in result.outcomes}


def test_slow_failing_and_garbage_partners_cost_at_most_tmax_and_are_each_counted_by_reason(
    bidders: Bidders,
) -> None:
    endpoints = {
        "sleeper": bidders.start(sleeping(5.0))[0],
        "failing": bidders.start(status(500, b"oops"))[0],
        "garbage": bidders.start(status(200, b"{not json"))[0],
        "cheap": bidders.start(bidding(1.0))[0],
        "good": bidders.start(bidding(4.2))[0],
    }
    partners = [partner(name, url, timeout_ms=120) for name, url in endpoints.items()]

    async def scenario(caller: PartnerCaller) -> tuple[AskResult, float, dict[str, Any]]:
        result, elapsed = await timed_ask(caller, partners)
        return result, elapsed, caller.tallies()

    result, elapsed, tallies = run(scenario)
    print(f"elapsed with a 5 s sleeper, tmax 120 ms: {elapsed * 1000:.1f} ms")
    assert elapsed < 0.120 + SLACK_S
    outcomes = by_partner(result)
    assert (outcomes["sleeper"].outcome, outcomes["sleeper"].reason) == ("timeout", "timeout")
    assert (outcomes["failing"].outcome, outcomes["failing"].reason) == ("error", "http_500")
    assert (outcomes["garbage"].outcome, outcomes["garbage"].reason) == ("dropped", "bad_json")
    assert outcomes["cheap"].outcome == "dropped"
    assert outcomes["good"].outcome == "bid"
    assert tallies["sleeper"].timeouts == 1
    assert tallies["failing"].errors_by_reason == {"http_500": 1}
    assert tallies["garbage"].drops == {"bad_json": 1}
    assert tallies["cheap"].drops == {"below_floor": 1}
    assert tallies["good"].bids == 1
    assert all(tally.requests == 1 for tally in tallies.values())
    auction = run_auction(result.checked)
    assert auction.winner is not None
    assert auction.winner.bid.partner == "good"
    assert auction.winner.price_micros == 4_200_000


def test_each_partner_gets_its_own_request_id_one_shared_tid_and_the_openrtb_headers(
    bidders: Bidders,
) -> None:
    one_url, one = bidders.start(bidding(4.0))
    two_url, two = bidders.start(status(204))
    result = run(
        lambda caller: caller.ask([partner("one", one_url), partner("two", two_url)], OPPORTUNITY, NOW)
    )
    (headers_one, request_one), (headers_two, request_two) = one.requests[0], two.requests[0]
    assert request_one["id"] != request_two["id"]
    assert request_one["source"]["tid"] == request_two["source"]["tid"] == result.transaction_id
    assert request_one["tmax"] == 120
    for headers in (headers_one, headers_two):
        assert headers["content-type"] == "application/json"
        assert headers["x-openrtb-version"] == "2.6"
    assert by_partner(result)["two"].outcome == "no_bid"


def test_each_partner_is_cut_at_its_own_timeout_not_the_slowest(bidders: Bidders) -> None:
    fast_url, _ = bidders.start(sleeping(5.0))
    slow_url, _ = bidders.start(sleeping(5.0))
    partners = [partner("short", fast_url, timeout_ms=50), partner("long", slow_url, timeout_ms=150)]
    result, elapsed = run(lambda caller: timed_ask(caller, partners))
    outcomes = by_partner(result)
    assert outcomes["short"].elapsed_ms < 50 + SLACK_S * 1000
    assert outcomes["long"].elapsed_ms >= 150
    assert elapsed < 0.150 + SLACK_S


@pytest.mark.parametrize(
    ("behaviour", "label"), [(never_answering, "never answers"), (trickling, "trickles byte by byte")]
)
def test_a_partner_that_never_finishes_its_answer_times_out_within_tmax(
    bidders: Bidders, behaviour: Behaviour, label: str
) -> None:
    url, seen = bidders.start(behaviour)
    result, elapsed = run(lambda caller: timed_ask(caller, [partner("slow", url, timeout_ms=150)]))
    print(f"elapsed, partner that {label}, tmax 150 ms: {elapsed * 1000:.1f} ms")
    assert len(seen.requests) == 1
    assert by_partner(result)["slow"].outcome == "timeout"
    assert elapsed < 0.150 + SLACK_S


def test_a_huge_streamed_body_is_dropped_as_too_large_without_reading_it_all(bidders: Bidders) -> None:
    sent = [0]
    url, _ = bidders.start(streaming_huge(sent))

    async def scenario(caller: PartnerCaller) -> tuple[AskResult, float, int, dict[str, Any]]:
        result, elapsed = await timed_ask(caller, [partner("huge", url, timeout_ms=2000)])
        return result, elapsed, sent[0], caller.tallies()

    result, elapsed, written, tallies = run(scenario)
    print(f"huge body: dropped after {elapsed * 1000:.1f} ms, the bidder had written {written} bytes")
    outcome = by_partner(result)["huge"]
    assert (outcome.outcome, outcome.reason) == ("dropped", "too_large")
    assert tallies["huge"].drops == {"too_large": 1}
    assert elapsed < 1.0  # the body never ends: only stopping at the limit returns before tmax
    assert written < 4 * MAX_RESPONSE_BYTES  # what was read, plus what the socket buffers held


def test_a_declared_length_over_the_limit_is_dropped_before_reading(bidders: Bidders) -> None:
    async def declaring(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n{" % (MAX_RESPONSE_BYTES * 50))
        await writer.drain()
        await asyncio.Event().wait()
        return False

    url, _ = bidders.start(declaring)
    result, elapsed = run(lambda caller: timed_ask(caller, [partner("big", url, timeout_ms=1000)]))
    assert (by_partner(result)["big"].outcome, by_partner(result)["big"].reason) == ("dropped", "too_large")
    assert elapsed < 0.5


def test_a_refused_connection_is_an_error_named_connect() -> None:
    import socket

    with socket.socket() as placeholder:  # a port nobody listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    result = run(lambda caller: caller.ask([partner("gone", f"http://127.0.0.1:{port}/")], OPPORTUNITY, NOW))
    assert (by_partner(result)["gone"].outcome, by_partner(result)["gone"].reason) == ("error", "connect")


def test_a_failing_partner_is_backed_off_then_probed_once_and_closed_by_a_success(bidders: Bidders) -> None:
    answers: list[Behaviour] = [status(503)]

    async def switchable(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        return await answers[0](request, writer)

    url, seen = bidders.start(switchable)
    flaky = partner("flaky", url)
    clock = FakeClock()

    async def scenario(caller: PartnerCaller) -> None:
        for _ in range(5):
            await caller.ask([flaky], OPPORTUNITY, NOW)
        assert caller.state("flaky") == "open"
        skipped = await caller.ask([flaky], OPPORTUNITY, NOW)
        assert by_partner(skipped)["flaky"].outcome == "skipped_breaker"
        assert len(seen.requests) == 5
        clock.now += 10.0
        assert caller.state("flaky") == "half_open"
        probe = await caller.ask([flaky], OPPORTUNITY, NOW)  # still failing: open again, for 20 s
        assert by_partner(probe)["flaky"].outcome == "error"
        assert caller.state("flaky") == "open"
        clock.now += 10.0
        assert caller.state("flaky") == "open"
        clock.now += 10.0
        answers[0] = bidding(4.0)
        recovered = await caller.ask([flaky], OPPORTUNITY, NOW)
        assert by_partner(recovered)["flaky"].outcome == "bid"
        assert caller.state("flaky") == "closed"
        tally = caller.tallies()["flaky"]
        assert tally.breaker == "closed"
        assert (tally.requests, tally.errors, tally.bids) == (7, 6, 1)
        assert tally.skipped == {"skipped_breaker": 1}

    run(scenario, clock=clock)
    assert len(seen.requests) == 7


def test_max_qps_lets_the_burst_through_then_skips_until_tokens_return(bidders: Bidders) -> None:
    url, seen = bidders.start(bidding(4.0))
    limited = partner("limited", url, max_qps=5)
    clock = FakeClock()

    async def scenario(caller: PartnerCaller) -> dict[str, Any]:
        first = [await caller.ask([limited], OPPORTUNITY, NOW) for _ in range(20)]
        assert [by_partner(r)["limited"].outcome for r in first].count("skipped_qps") == 15
        clock.now += 1.0
        for _ in range(20):
            await caller.ask([limited], OPPORTUNITY, NOW)
        return caller.tallies()

    tallies = run(scenario, clock=clock)
    assert len(seen.requests) == 10
    assert tallies["limited"].requests == 10
    assert tallies["limited"].skipped == {"skipped_qps": 30}


def test_paused_partners_and_partners_limited_to_other_venues_are_not_asked(bidders: Bidders) -> None:
    paused_url, paused_seen = bidders.start(bidding(4.0))
    elsewhere_url, elsewhere_seen = bidders.start(bidding(4.0))
    here_url, here_seen = bidders.start(bidding(4.0))
    partners = [
        partner("paused", paused_url, status="paused"),
        partner("elsewhere", elsewhere_url, venues=["atrium"]),
        partner("here", here_url, venues=["atrium", "lobby"]),
    ]
    result = run(lambda caller: caller.ask(partners, OPPORTUNITY, NOW))
    assert [item.partner for item in result.outcomes] == ["here"]
    assert (len(paused_seen.requests), len(elsewhere_seen.requests), len(here_seen.requests)) == (0, 0, 1)


def test_connections_are_kept_alive_across_asks(bidders: Bidders) -> None:
    url, seen = bidders.start(bidding(4.0))

    async def scenario(caller: PartnerCaller) -> None:
        for _ in range(10):
            result = await caller.ask([partner("dsp", url)], OPPORTUNITY, NOW)
            assert by_partner(result)["dsp"].outcome == "bid"

    run(scenario)
    assert len(seen.requests) == 10
    assert seen.connections == 1


def test_a_breaker_opens_after_threshold_consecutive_failures_only() -> None:
    breaker = CircuitBreaker(threshold=3, cooldown=10, max_cooldown=40)
    for _ in range(2):
        breaker.failure(0)
    breaker.success(0)
    for _ in range(2):
        breaker.failure(0)
    assert breaker.state(0) == "closed"
    breaker.failure(1)
    assert breaker.state(1) == "open"
    assert not breaker.allow(10.9)
    assert breaker.state(11) == "half_open"


def test_a_half_open_breaker_lets_one_probe_through_and_doubles_its_cooldown_up_to_the_cap() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=10, max_cooldown=25)
    breaker.failure(0)
    assert breaker.allow(10)
    assert not breaker.allow(10.5)  # the probe is out
    breaker.failure(11)  # the probe failed: open for 20 s
    assert breaker.state(30.9) == "open"
    assert breaker.allow(31)
    breaker.failure(31)  # doubled again, capped at 25
    assert breaker.cooldown == 25
    assert breaker.state(55.9) == "open"
    assert breaker.allow(56)
    breaker.success(56)
    assert breaker.state(56) == "closed"
    assert breaker.cooldown == 10


def test_a_stale_failure_while_open_changes_nothing_and_a_lost_probe_is_given_up() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=10)
    breaker.failure(0)
    breaker.failure(5)  # a request sent before it opened
    assert breaker.cooldown == 10
    assert breaker.state(10) == "half_open"
    assert breaker.allow(10)
    assert not breaker.allow(19.9)
    assert breaker.allow(20)  # the first probe's ask was cancelled: another may go


def test_an_answer_with_unsafe_markup_is_the_partners_error_and_opens_its_breaker(bidders: Bidders) -> None:
    async def bombing(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        bids = [{"id": f"b{n}", "impid": "1", "price": 9.0, "adm": laughs(), "crid": "c1"} for n in range(30)]
        answer = {"id": request["id"], "seatbid": [{"seat": "s1", "bid": bids}]}
        return await respond(writer, 200, msgspec.json.encode(answer))

    url, seen = bidders.start(bombing)
    hostile = partner("hostile", url)

    async def scenario(caller: PartnerCaller) -> None:
        for _ in range(5):
            result = await caller.ask([hostile], OPPORTUNITY, NOW)
            outcome = by_partner(result)["hostile"]
            assert (outcome.outcome, outcome.reason) == ("error", "unsafe_markup")
        assert caller.state("hostile") == "open"
        skipped = await caller.ask([hostile], OPPORTUNITY, NOW)
        assert by_partner(skipped)["hostile"].outcome == "skipped_breaker"
        tally = caller.tallies()["hostile"]
        assert (tally.requests, tally.errors, tally.dropped, tally.bids) == (5, 5, 0, 0)
        assert tally.errors_by_reason == {"unsafe_markup": 5}
        assert tally.drops == {"unsafe_markup": 5}

    run(scenario, clock=FakeClock())
    assert len(seen.requests) == 5


def test_a_partners_credential_header_goes_with_its_own_bid_requests_only(bidders: Bidders) -> None:
    one_url, one = bidders.start(bidding(4.0))
    two_url, two = bidders.start(bidding(3.0))
    headers = {"one": ("X-Api-Key", "s3cret-one")}
    run(
        lambda caller: caller.ask(
            [partner("one", one_url), partner("two", two_url)], OPPORTUNITY, NOW, headers
        )
    )
    (seen_one, _), (seen_two, _) = one.requests[0], two.requests[0]
    assert seen_one["x-api-key"] == "s3cret-one"
    assert seen_one["content-type"] == "application/json"  # adslot's own headers stay as they are
    assert "x-api-key" not in seen_two and "s3cret-one" not in repr(seen_two)


def test_a_credential_that_would_split_the_request_head_is_never_sent(bidders: Bidders) -> None:
    url, seen = bidders.start(bidding(4.0))
    headers = {"one": ("X-Api-Key", "s3cret\r\nX-Injected: 1")}
    result = run(lambda caller: caller.ask([partner("one", url)], OPPORTUNITY, NOW, headers))
    assert (by_partner(result)["one"].outcome, by_partner(result)["one"].reason) == ("error", "bad_endpoint")
    assert seen.connections == 0 and seen.requests == []


def test_a_partner_changed_between_asks_is_asked_under_its_new_terms_and_credential(
    bidders: Bidders,
) -> None:
    """Terms, endpoint and headers are kept per partner between asks: a change must still reach the next."""
    first_url, first = bidders.start(bidding(4.0))
    second_url, second = bidders.start(bidding(4.0))

    async def scenario(caller: PartnerCaller) -> None:
        await caller.ask([partner("one", first_url)], OPPORTUNITY, NOW, {"one": ("X-Api-Key", "old")})
        await caller.ask([partner("one", first_url)], OPPORTUNITY, NOW, {"one": ("X-Api-Key", "old")})
        changed = partner("one", second_url, floor_cpm=3.0, timeout_ms=140)
        await caller.ask([changed], OPPORTUNITY, NOW, {"one": ("X-Api-Key", "new")})
        await caller.ask([partner("one", first_url)], OPPORTUNITY, NOW)

    run(scenario)
    assert [request["imp"][0]["bidfloor"] for _, request in first.requests] == [2.0, 2.0, 2.0]
    assert [request["tmax"] for _, request in first.requests] == [120, 120, 120]
    assert [headers.get("x-api-key") for headers, _ in first.requests] == ["old", "old", None]
    ((headers, request),) = second.requests
    assert (request["imp"][0]["bidfloor"], request["tmax"], headers["x-api-key"]) == (3.0, 140, "new")
