"""A real OpenRTB 2.6 bidder to point adslot at: `adslot demand test-bidder`.

An integrator needs a buyer before signing one, and the tests of adslot's exchange need one that answers
over a real socket: this bidder decodes each bid request with the same types adslot sends it with, answers
a video bid whose VAST, media file, notices (`nurl`, `burl`, `lurl`) and tracking pixels all point back at
itself, and logs everything it receives (bidder_log.py), so what adslot sent, substituted and fired can be
read back at `GET /log`.

A plain ASGI callable, not Litestar: it has eight fixed routes, and a bidder asked for a bid within `tmax`
should cost nothing beyond its configured delay.

Endpoints (paths relative to the bidder's base URL):

- `POST /openrtb2/auction`: a BidRequest in, a BidResponse (200) or no bid (204) out; 400 for a body that
  is not a BidRequest.
- `GET /win`, `GET /bill`, `GET /loss`: the notices its bids name as `nurl`, `burl` and `lurl` (204).
- `GET /pixel/{event}`: the VAST impression and tracking events (a 1x1 GIF).
- `GET /media/creative.mp4`: the video its VAST plays (the sandbox's demo video).
- `GET /log`: what it received and answered, oldest first (`?kind=request|bid|no_bid|...` filters).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

import msgspec

from adslot.demand import openrtb
from adslot.demand.bidder_log import MAX_ENTRIES, BidderLog
from adslot.vast.headers import NO_SCRIPT_HEADERS
from adslot.vast.inline import duration
from adslot.vast.wrapper import XML_DECLARATION
from adslot.vast.xml import attr, cdata, text

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

AUCTION_PATH = "/openrtb2/auction"
"""Where bid requests are POSTed: the path Prebid Server made the habit for OpenRTB endpoints."""
MEDIA_PATH = "/media/creative.mp4"
SEAT = "test-bidder"
CREATIVE_ID = "test-bidder-creative-1"
"""Stable, so adslot's creative approval (a crid it has not seen is held) meets it once per bidder."""
CAMPAIGN_ID = "test-bidder-campaign-1"
AD_ID = "test-bidder-ad-1"
ADVERTISER_DOMAIN = "testbidder.example"
AD_SYSTEM = "adslot test bidder"
NOTICES = ("win", "bill", "loss")
PIXEL_EVENTS = ("impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete")
QUARTILE_EVENTS = PIXEL_EVENTS[1:]
DEFAULT_SIZE = (1920, 1080)
"""A full-HD landscape screen: what the VAST declares when the request names no video size."""
DEFAULT_DURATION = 15
DEFAULT_CURRENCY = "USD"
MAX_REQUEST_BYTES = 1024 * 1024
"""A bid request is a few KiB; a larger body is refused (413) rather than read into memory."""
DEMO_VIDEO = ("adslot.sandbox", "assets/demo.mp4")
"""The sandbox's demo video (640x360, 10 s), read from the installed package rather than copied."""
TRANSPARENT_GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
"""What a tracking pixel answers: some players draw the answer, and a broken image is noise in their logs."""
OPENRTB_VERSION = ((b"x-openrtb-version", b"2.6"),)
"""The version header OpenRTB asks both sides to send with every bid request and response."""
_REQUEST_DECODER = msgspec.json.Decoder(openrtb.BidRequest)


@dataclass(frozen=True, slots=True)
class BidderSettings:
    """How the bidder behaves; the defaults are the command line's."""

    base_url: str
    """Where its own links (VAST pixels, media, notices) point: reachable by adslot and by the players."""
    price_cpm: float = 4.2
    no_bid_rate: float = 0.2
    delay_ms: int = 20
    seed: int | None = None
    """Seeds the no-bid draws, so a test (or a demo) sees the same sequence every run."""
    below_floor: bool = False
    """Bid under the imp's floor on purpose (half of it, or less), to test that the floor is enforced."""

    def __post_init__(self) -> None:
        if not self.price_cpm > 0:
            raise ValueError("price_cpm must be positive")
        if not 0 <= self.no_bid_rate <= 1:
            raise ValueError("no_bid_rate must be between 0 and 1")
        if self.delay_ms < 0:
            raise ValueError("delay_ms cannot be negative")


def base_url_for(host: str, port: int, public_url: str | None = None) -> str:
    """`public_url` when given (the bidder behind a proxy, or bound to 0.0.0.0), else its own address."""
    if public_url:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the public URL must be an absolute http(s) URL, not {public_url!r}")
        return public_url.rstrip("/")
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def demo_video() -> bytes | None:
    """The video the VAST names; None when the package was installed without its assets (then 404)."""
    try:
        return resources.files(DEMO_VIDEO[0]).joinpath(DEMO_VIDEO[1]).read_bytes()
    except (FileNotFoundError, ModuleNotFoundError):
        return None


# The answer: pure functions of the request and the settings.


def bid_price(settings: BidderSettings, floor: float) -> float:
    """The configured price, raised to the floor: a real bidder that wants the slot never bids under it.

    With `below_floor`, the price is at most half the floor instead; a floor of 0 cannot be undercut by a
    positive price, so then the configured price is bid.
    """
    if settings.below_floor and floor > 0:
        return min(settings.price_cpm, floor / 2)
    return max(settings.price_cpm, floor)


def video_shape(imp: openrtb.Imp) -> tuple[int, int, int]:
    """Width, height and seconds of the creative: fitted to the imp, as a buyer picks a rendition."""
    video = imp.video
    if video is None:
        return (*DEFAULT_SIZE, DEFAULT_DURATION)
    width, height = (video.w, video.h) if video.w and video.h else DEFAULT_SIZE
    return width, height, video.maxduration or DEFAULT_DURATION


def pixel_url(base_url: str, event: str) -> str:
    """A tracking URL carrying `${AUCTION_ID}`: the exchange substitutes it in markup (spec 4.4), so a
    fire that arrives with the macro intact shows in the log that it did not."""
    return f"{base_url}/pixel/{event}?auction=${{AUCTION_ID}}"


def build_vast(base_url: str, width: int, height: int, seconds: int) -> str:
    """A VAST 2.0 InLine with one linear creative, every URL on the bidder itself."""
    tracking = "".join(
        f'<Tracking event="{event}">{cdata(pixel_url(base_url, event))}</Tracking>'
        for event in QUARTILE_EVENTS
    )
    return (
        f'{XML_DECLARATION}<VAST version="2.0">'
        f'<Ad id="{attr(AD_ID)}"><InLine>'
        f'<AdSystem version="1.0">{text(AD_SYSTEM)}</AdSystem>'
        f"<AdTitle>{text('adslot test bidder creative')}</AdTitle>"
        f"<Impression>{cdata(pixel_url(base_url, 'impression'))}</Impression>"
        f'<Creatives><Creative id="{attr(CREATIVE_ID)}" AdID="{attr(AD_ID)}"><Linear>'
        f"<Duration>{duration(seconds)}</Duration>"
        f"<TrackingEvents>{tracking}</TrackingEvents>"
        "<MediaFiles>"
        f'<MediaFile delivery="progressive" type="video/mp4" width="{width}" height="{height}">'
        f"{cdata(base_url + MEDIA_PATH)}</MediaFile>"
        "</MediaFiles></Linear></Creative></Creatives>"
        "</InLine></Ad></VAST>"
    )


def notice_urls(base_url: str) -> tuple[str, str, str]:
    """`nurl`, `burl` and `lurl`, asking for every macro a DOOH buyer reconciles its bill with."""
    return (
        f"{base_url}/win?auction=${{AUCTION_ID}}&price=${{AUCTION_PRICE}}&imp=${{AUCTION_IMP_ID}}",
        f"{base_url}/bill?auction=${{AUCTION_ID}}&price=${{AUCTION_PRICE}}"
        f"&mult=${{AUCTION_MULTIPLIER}}&ts=${{AUCTION_IMP_TS}}",
        f"{base_url}/loss?auction=${{AUCTION_ID}}&reason=${{AUCTION_LOSS}}",
    )


def build_bid_response(
    request: openrtb.BidRequest, settings: BidderSettings, serial: int
) -> openrtb.BidResponse:
    """One seat, one bid, for the request's first imp; `serial` makes the bid's id unique per bidder."""
    imp = request.imp[0]
    width, height, seconds = video_shape(imp)
    nurl, burl, lurl = notice_urls(settings.base_url)
    bid = openrtb.Bid(
        id=f"test-bid-{serial}",
        impid=imp.id,
        price=bid_price(settings, imp.bidfloor or 0.0),
        nurl=nurl,
        burl=burl,
        lurl=lurl,
        adm=build_vast(settings.base_url, width, height, seconds),
        adid=AD_ID,
        adomain=[ADVERTISER_DOMAIN],
        cid=CAMPAIGN_ID,
        crid=CREATIVE_ID,
        w=width,
        h=height,
        dur=seconds,
    )
    return openrtb.BidResponse(
        id=request.id,
        seatbid=[openrtb.SeatBid(bid=[bid], seat=SEAT)],
        bidid=f"test-response-{serial}",
        cur=request.cur[0] if request.cur else DEFAULT_CURRENCY,
    )


def request_summary(request: openrtb.BidRequest) -> dict[str, Any]:
    """What the log keeps of a request: the DOOH facts an exchange gets wrong most (7.9), and the rules the
    schemas cannot check (openrtb.spec_violations)."""
    imp = request.imp[0]
    return {
        "id": request.id,
        "imp_id": imp.id,
        "dt": _whole(imp.dt),
        "multiplier": imp.qty.multiplier if imp.qty is not None else None,
        "bidfloor": imp.bidfloor,
        "bidfloorcur": imp.bidfloorcur,
        "dooh_id": request.dooh.id if request.dooh is not None else None,
        "tmax": request.tmax,
        "cur": request.cur,
        "violations": openrtb.spec_violations(request) or None,
    }


def _whole(number: float | None) -> float | int | None:
    """1796443200000.0 as 1796443200000: `dt` is decoded as a float, but is sent as whole milliseconds."""
    return int(number) if number is not None and number.is_integer() else number


def macros_left(query: dict[str, str]) -> list[str] | None:
    """The query values still holding a `${...}` macro: the exchange did not substitute them."""
    left = sorted(key for key, value in query.items() if "${" in value)
    return left or None


# The ASGI application.


class Bidder:
    """The test bidder as an ASGI callable; serve it with uvicorn (`serve_test_bidder`)."""

    def __init__(self, settings: BidderSettings, log: BidderLog, media: bytes | None = None) -> None:
        self.settings = settings
        self.log = log
        self.media = media
        self._random = random.Random(settings.seed)
        self._serial = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        if path == AUCTION_PATH:
            if method != "POST":
                await _fail(send, 405, "method_not_allowed", "POST a BidRequest here")
                return
            await self._auction(receive, send)
        elif method not in ("GET", "HEAD"):
            await _fail(send, 405, "method_not_allowed", "only GET is served here")
        else:
            await self._get(path, query, send, head=method == "HEAD")

    async def _auction(self, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        if body is None:
            self.log.add("bad_request", error=f"body over {MAX_REQUEST_BYTES} bytes")
            await _fail(send, 413, "too_large", f"a bid request is at most {MAX_REQUEST_BYTES} bytes")
            return
        try:
            request = _REQUEST_DECODER.decode(body)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
            self.log.add("bad_request", error=str(error))
            await _fail(send, 400, "invalid_bid_request", f"not an OpenRTB 2.6 BidRequest: {error}")
            return
        if not request.imp:
            self.log.add("bad_request", id=request.id, error="no imp")
            await _fail(send, 400, "invalid_bid_request", "a bid request needs at least one imp")
            return
        self.log.add("request", **request_summary(request))
        await asyncio.sleep(self.settings.delay_ms / 1000)
        if self._random.random() < self.settings.no_bid_rate:
            self.log.add("no_bid", request_id=request.id)
            await _send(send, 204, headers=OPENRTB_VERSION)
            return
        self._serial += 1
        response = build_bid_response(request, self.settings, self._serial)
        bid = response.seatbid[0].bid[0] if response.seatbid else None
        self.log.add(
            "bid",
            request_id=request.id,
            bid_id=bid.id if bid else None,
            price=bid.price if bid else None,
            cur=response.cur,
        )
        await _send(send, 200, msgspec.json.encode(response), "application/json", headers=OPENRTB_VERSION)

    async def _get(self, path: str, query: dict[str, str], send: Send, *, head: bool) -> None:
        kind = path.lstrip("/")
        if kind in NOTICES:
            self.log.add(kind, query=query, macros_left=macros_left(query))
            await _send(send, 204)
        elif path.startswith("/pixel/") and path.removeprefix("/pixel/") in PIXEL_EVENTS:
            event = path.removeprefix("/pixel/")
            self.log.add("pixel", event=event, query=query, macros_left=macros_left(query))
            await _send(send, 200, TRANSPARENT_GIF, "image/gif", head=head)
        elif path == MEDIA_PATH and self.media is not None:
            self.log.add("media")
            await _send(send, 200, self.media, "video/mp4", head=head)
        elif path == "/log":
            await _json(send, 200, self.log.entries(query.get("kind")), head=head)
        else:
            await _fail(send, 404, "not_found", f"no {path} here", head=head)


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop: acknowledge, so uvicorn's lifespan 'auto' is not left waiting."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body; None once it exceeds MAX_REQUEST_BYTES."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _fail(send: Send, status: int, code: str, message: str, *, head: bool = False) -> None:
    """adslot's error envelope (errors.py), so a client reads the bidder's errors as the server's."""
    envelope = {"status": status, "error": {"code": code, "message": message, "field": None}}
    await _json(send, status, envelope, head=head)


async def _json(send: Send, status: int, value: Any, *, head: bool = False) -> None:
    await _send(send, status, msgspec.json.encode(value), "application/json", head=head)


_ALWAYS = ((b"cache-control", b"no-store"), *((k.encode(), v.encode()) for k, v in NO_SCRIPT_HEADERS))
"""On every answer: a bid response carries VAST markup, and the demo bidder is served on adslot's origin."""


async def _send(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: str | None = None,
    *,
    head: bool = False,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    headers = (*_ALWAYS, *headers)
    if content_type is not None:
        headers += ((b"content-type", content_type.encode()),)
    if status != 204:
        headers += ((b"content-length", str(len(body)).encode()),)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head or status == 204 else body})


def create_bidder(
    settings: BidderSettings, sink: TextIO | None = None, *, max_entries: int = MAX_ENTRIES
) -> Bidder:
    """A bidder logging to `sink` (None: in memory only), keeping its last `max_entries` for `GET /log`, and
    serving the demo video when it is installed."""
    return Bidder(settings, BidderLog(sink, max_entries), demo_video())


def serve_test_bidder(
    *,
    host: str,
    port: int,
    public_url: str | None,
    options: dict[str, Any],
    sink: TextIO | None,
    ready: Callable[[str], None],
) -> None:
    """Listen on host:port (0: any free port), call `ready(base_url)` once connections are accepted, then
    serve until SIGINT or SIGTERM. `options` are BidderSettings' members other than base_url."""
    import uvicorn

    from adslot.workers import bound_socket, serve_one

    sock = bound_socket(host, port, reuse_port=False)
    bound_port = int(sock.getsockname()[1])
    settings = BidderSettings(base_url=base_url_for(host, bound_port, public_url), **options)
    config = uvicorn.Config(
        create_bidder(settings, sink),
        host=host,
        port=bound_port,
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    serve_one(config, sock, lambda: ready(settings.base_url))
