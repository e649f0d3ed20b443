"""The built-in test bidder answers real OpenRTB 2.6 over a socket: bids adslot's own checks accept, with
VAST that validates against the IAB schema, no-bids and delays as configured, 400 for garbage, and a log of
every request, answer, notice and pixel that a test can read back at GET /log."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
import xmlschema

from adslot.demand.auction import Asked, check_response
from adslot.demand.bid_request import Audience, Opportunity, build_bid_request, encode_bid_request
from adslot.demand.bidder import (
    ADVERTISER_DOMAIN,
    AUCTION_PATH,
    CAMPAIGN_ID,
    CREATIVE_ID,
    MEDIA_PATH,
    SEAT,
    BidderSettings,
    create_bidder,
)
from adslot.demand.bidder_log import BidderLog
from adslot.demand.macros import MacroValues, substitute
from adslot.demand.terms import PartnerTerms, to_micros
from tests.conftest import free_port
from tests.demand.openrtb_schema import schema_errors
from tests.loopback import on_loopback
from tests.vast.schema import MISSING_SCHEMA, SCHEMA_PATH
from tests.vast.schema import schema_errors as vast_errors

NOW = 1_800_000_000
REQUEST_ID = "req-1"
FLOOR_MICROS = 2_500_000
TERMS = PartnerTerms("test-bidder", floor_cpm_micros=FLOOR_MICROS, currency="EUR")
EVENTS = ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")


def opportunity(**changes: Any) -> Opportunity:
    fields: dict[str, Any] = {
        "ad_request_uuid": "uuid-never-sent",
        "venue_id": "lobby",
        "venue_name": "Main lobby",
        "play_time": NOW + 60,
        "expires_at": NOW + 600,
        "venue_type": "1.1",
        "screen_id": "s1",
        "width": 1080,
        "height": 1920,
        "max_duration": 10,
        "audience": Audience(12.5),
    }
    return Opportunity(**(fields | changes))


def bid_request(terms: PartnerTerms = TERMS, **changes: Any) -> bytes:
    request = build_bid_request(
        opportunity(**changes), terms, request_id=REQUEST_ID, transaction_id="tx-1", now=NOW
    )
    return encode_bid_request(request)


@contextmanager
def running(host: str = "127.0.0.1", **settings: Any) -> Iterator[httpx.Client]:
    """The bidder under uvicorn in a thread on a loopback address (127.0.0.1 unless told: Linux routes all
    of 127/8 to loopback); a client on its own address. Its links point there too unless `base_url` says."""
    port = free_port(host)
    base_url = f"http://{host}:{port}"
    app = create_bidder(
        BidderSettings(**({"base_url": base_url, "no_bid_rate": 0, "delay_ms": 0} | settings))
    )
    with (
        on_loopback(app, "the test bidder", port, host=host),
        httpx.Client(base_url=base_url, timeout=10) as client,
    ):
        yield client


def auction(client: httpx.Client, body: bytes | None = None) -> httpx.Response:
    return client.post(AUCTION_PATH, content=bid_request() if body is None else body)


def only_bid(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    (seatbid,) = response.json()["seatbid"]
    (bid,) = seatbid["bid"]
    return dict(bid)


@pytest.fixture(scope="module")
def vast_schema() -> xmlschema.XMLSchema:
    if not SCHEMA_PATH.is_file():
        pytest.skip(MISSING_SCHEMA)
    return xmlschema.XMLSchema(str(SCHEMA_PATH))


def test_its_bid_passes_the_exchanges_checks_at_its_price_with_its_stable_ids() -> None:
    with running(price_cpm=4.2) as client:
        response = auction(client)
    checked = check_response(Asked(TERMS, REQUEST_ID), response.content)
    assert checked.drops == ()
    (valid,) = checked.bids
    assert (valid.seat, valid.price_micros, valid.currency) == (SEAT, 4_200_000, "EUR")
    assert response.json()["cur"] == "EUR"
    assert response.headers["x-openrtb-version"] == "2.6"
    bid = valid.bid
    assert (bid.crid, bid.adomain, bid.cid, bid.impid) == (CREATIVE_ID, [ADVERTISER_DOMAIN], CAMPAIGN_ID, "1")


def test_its_notice_urls_point_at_itself_with_the_spec_macros() -> None:
    with running() as client:
        bid = only_bid(auction(client))
        base = str(client.base_url).rstrip("/")
    assert (
        bid["nurl"] == f"{base}/win?auction=${{AUCTION_ID}}&price=${{AUCTION_PRICE}}&imp=${{AUCTION_IMP_ID}}"
    )
    assert bid["burl"] == (
        f"{base}/bill?auction=${{AUCTION_ID}}&price=${{AUCTION_PRICE}}"
        "&mult=${AUCTION_MULTIPLIER}&ts=${AUCTION_IMP_TS}"
    )
    assert bid["lurl"] == f"{base}/loss?auction=${{AUCTION_ID}}&reason=${{AUCTION_LOSS}}"


def test_the_bid_response_validates_against_the_openrtb_2_6_schema() -> None:
    with running() as client:
        response = auction(client)
    assert schema_errors("BidResponse", response.json()) == []


def test_its_adm_is_vast_2_0_that_validates_against_the_iab_schema_before_and_after_substitution(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    with running() as client:
        adm = only_bid(auction(client))["adm"]
    assert re.search(r'<VAST version="2.0"><Ad id="[^"]+"><InLine>', adm)
    assert vast_errors(vast_schema, adm) == []
    assert vast_errors(vast_schema, substitute(adm, MacroValues(auction_id=REQUEST_ID))) == []


def test_its_vast_fits_the_imp_size_and_duration_and_is_served_and_tracked_by_itself() -> None:
    with running() as client:
        bid = only_bid(auction(client))
        base = str(client.base_url).rstrip("/")
    adm = bid["adm"]
    assert (bid["w"], bid["h"], bid["dur"]) == (1080, 1920, 10)
    assert 'type="video/mp4" width="1080" height="1920"' in adm
    assert "<Duration>00:00:10</Duration>" in adm
    assert f"<![CDATA[{base}{MEDIA_PATH}]]>" in adm
    assert f"<Impression><![CDATA[{base}/pixel/impression?auction=${{AUCTION_ID}}]]></Impression>" in adm
    for event in EVENTS:
        assert f'<Tracking event="{event}"><![CDATA[{base}/pixel/{event}?auction=${{AUCTION_ID}}]]>' in adm


def test_an_imp_without_size_or_duration_gets_a_1920x1080_15_second_creative() -> None:
    with running() as client:
        bid = only_bid(auction(client, bid_request(width=None, height=None, max_duration=None)))
    assert (bid["w"], bid["h"], bid["dur"]) == (1920, 1080, 15)
    assert "<Duration>00:00:15</Duration>" in bid["adm"]


def test_its_price_is_raised_to_the_floor() -> None:
    with running(price_cpm=1.0) as client:
        response = auction(client)
    (valid,) = check_response(Asked(TERMS, REQUEST_ID), response.content).bids
    assert valid.price_micros == FLOOR_MICROS


def test_below_floor_bids_under_the_floor_and_the_exchange_drops_it_as_below_floor() -> None:
    with running(price_cpm=4.2, below_floor=True) as client:
        response = auction(client)
    checked = check_response(Asked(TERMS, REQUEST_ID), response.content)
    assert checked.bids == ()
    (drop,) = checked.drops
    assert drop.reason == "below_floor"
    assert drop.bid is not None and to_micros(drop.bid.price) < FLOOR_MICROS


def test_no_bid_rate_1_always_answers_204_and_0_never_does() -> None:
    with running(no_bid_rate=1) as client:
        never = [auction(client) for _ in range(20)]
    with running(no_bid_rate=0) as client:
        always = [auction(client) for _ in range(20)]
    assert {(r.status_code, r.content) for r in never} == {(204, b"")}
    assert {r.status_code for r in always} == {200}


def test_a_seeded_no_bid_rate_gives_the_same_answers_every_run() -> None:
    runs = []
    for _ in range(2):
        with running(no_bid_rate=0.5, seed=7) as client:
            runs.append([auction(client).status_code for _ in range(20)])
    assert runs[0] == runs[1]
    assert set(runs[0]) == {200, 204}


def test_delay_ms_delays_bids_and_no_bids_alike() -> None:
    for rate in (0, 1):
        with running(delay_ms=150, no_bid_rate=rate) as client:
            auction(client)  # a first request opens the connection
            started = time.monotonic()
            response = auction(client)
            elapsed = time.monotonic() - started
        assert response.status_code in (200, 204)
        assert elapsed >= 0.15


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b'{"id": "r"}', b'{"id": "r", "imp": []}', b'{"id": 3, "imp": [{"id": "1"}]}'],
    ids=["garbage", "not-an-object", "no-imp", "empty-imp", "wrong-type"],
)
def test_a_body_that_is_not_a_bid_request_is_400_with_a_json_error_and_is_logged(body: bytes) -> None:
    with running() as client:
        response = auction(client, body)
        log = client.get("/log").json()
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_bid_request"
    assert [entry["kind"] for entry in log] == ["bad_request"]


def test_every_request_and_answer_is_logged_with_the_dooh_facts_it_received() -> None:
    with running(no_bid_rate=0) as client:
        auction(client)
        log = client.get("/log").json()
    request, answer = log
    assert request["kind"] == "request"
    assert {key: request[key] for key in ("id", "imp_id", "dt", "multiplier", "bidfloor", "dooh_id")} == {
        "id": REQUEST_ID,
        "imp_id": "1",
        "dt": (NOW + 60) * 1000,
        "multiplier": 12.5,
        "bidfloor": 2.5,
        "dooh_id": "lobby",
    }
    assert "violations" not in request
    assert (answer["kind"], answer["request_id"], answer["price"]) == ("bid", REQUEST_ID, 4.2)
    assert answer["seq"] > request["seq"]


def test_notices_and_pixels_are_logged_with_their_query_and_readable_at_log() -> None:
    with running() as client:
        bid = only_bid(auction(client))
        win = MacroValues(auction_id=REQUEST_ID, imp_id="1", price_micros=3_100_000)
        bill = MacroValues(
            auction_id=REQUEST_ID, price_micros=3_100_000, multiplier=12.5, imp_ts_ms=NOW * 1000
        )
        answers = [
            client.get(substitute(bid["nurl"], win)),
            client.get(substitute(bid["burl"], bill)),
            client.get(substitute(bid["lurl"], MacroValues(auction_id=REQUEST_ID, loss=102))),
        ]
        pixels = re.findall(r"<!\[CDATA\[([^\]]*/pixel/[^\]]*)\]\]>", bid["adm"])
        fired = [client.get(substitute(url, MacroValues(auction_id=REQUEST_ID))) for url in pixels]
        raw = client.get(pixels[0])  # a pixel fired without substitution
        log = client.get("/log").json()
        only_pixels = client.get("/log", params={"kind": "pixel"}).json()
    assert [answer.status_code for answer in answers] == [204, 204, 204]
    assert {(r.status_code, r.headers["content-type"]) for r in [*fired, raw]} == {(200, "image/gif")}
    notices = {entry["kind"]: entry["query"] for entry in log if entry["kind"] in ("win", "bill", "loss")}
    assert notices == {
        "win": {"auction": REQUEST_ID, "price": "3.1", "imp": "1"},
        "bill": {"auction": REQUEST_ID, "price": "3.1", "mult": "12.5", "ts": str(NOW * 1000)},
        "loss": {"auction": REQUEST_ID, "reason": "102"},
    }
    assert [entry["event"] for entry in only_pixels] == ["impression", *EVENTS, "impression"]
    assert all(entry["query"] == {"auction": REQUEST_ID} for entry in only_pixels[:-1])
    assert only_pixels[-1]["macros_left"] == ["auction"]
    assert all("macros_left" not in entry for entry in only_pixels[:-1])


def test_its_media_file_is_the_sandbox_demo_video_read_from_the_package() -> None:
    demo = resources.files("adslot.sandbox").joinpath("assets/demo.mp4").read_bytes()
    with running() as client:
        media = client.get(MEDIA_PATH)
        head = client.head(MEDIA_PATH)
    assert (media.status_code, media.headers["content-type"], media.content) == (200, "video/mp4", demo)
    assert (head.status_code, head.headers["content-length"], head.content) == (200, str(len(demo)), b"")


def test_its_links_use_the_public_url_when_one_is_given() -> None:
    with running(base_url="https://bidder.example.test/tb") as client:
        bid = only_bid(auction(client))
    assert bid["nurl"].startswith("https://bidder.example.test/tb/win?")
    assert "https://bidder.example.test/tb/media/creative.mp4" in bid["adm"]


def test_unknown_paths_are_404_and_a_get_on_the_auction_is_405() -> None:
    with running() as client:
        assert client.get("/nothing").status_code == 404
        assert client.get("/pixel/unknown-event").status_code == 404
        assert client.get(AUCTION_PATH).status_code == 405
        assert client.get("/log").json() == []


def test_the_log_keeps_only_its_last_entries_and_writes_every_one_as_a_json_line() -> None:
    sink = io.StringIO()
    log = BidderLog(sink, max_entries=3)
    for number in range(5):
        log.add("pixel", event="start", n=number, absent=None)
    assert [entry["n"] for entry in log.entries()] == [2, 3, 4]
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [line["n"] for line in lines] == [0, 1, 2, 3, 4]
    assert all("absent" not in line for line in lines)


def test_settings_out_of_range_are_refused() -> None:
    for bad in ({"price_cpm": 0}, {"no_bid_rate": 1.5}, {"delay_ms": -1}):
        with pytest.raises(ValueError):
            BidderSettings(base_url="http://127.0.0.1:1", **bad)


def test_the_command_starts_prints_its_banner_answers_and_logs_to_its_file(tmp_path: Path) -> None:
    log_file = tmp_path / "bidder.jsonl"
    command = [sys.executable, "-m", "adslot.cli", "demand", "test-bidder", "--port", "0"]
    options = [
        "--no-bid-rate",
        "0",
        "--delay-ms",
        "0",
        "--price-cpm",
        "3",
        "--seed",
        "1",
        "--log",
        str(log_file),
    ]
    process = subprocess.Popen(
        [*command, *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.fullmatch(
            r"adslot test bidder listening on (http://127\.0\.0\.1:\d+) \(POST (\S+)\)\n", banner
        )
        assert match, banner
        base = match.group(1)
        assert match.group(2) == f"{base}{AUCTION_PATH}"
        bid = only_bid(httpx.post(match.group(2), content=bid_request(), timeout=10))
        assert bid["price"] == 3 and bid["nurl"].startswith(f"{base}/win?")
        assert httpx.get(f"{base}/log", timeout=10).json()[0]["id"] == REQUEST_ID
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    kinds = [json.loads(line)["kind"] for line in log_file.read_text(encoding="utf-8").splitlines()]
    assert kinds == ["request", "bid"]


def test_the_command_refuses_a_public_url_that_is_not_http() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "adslot.cli", "demand", "test-bidder", "--public-url", "ftp://x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--public-url" in done.stderr


def test_a_bidder_created_with_max_entries_answers_only_its_last_entries_at_log() -> None:
    bidder = create_bidder(BidderSettings(base_url="http://127.0.0.1:1"), max_entries=2)
    for number in range(3):
        bidder.log.add("media", n=number)
    assert [entry["n"] for entry in bidder.log.entries()] == [1, 2]
