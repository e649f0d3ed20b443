"""An HTML5 player on its own origin, in Chromium, with a real VAST client from npm: it asks adslot for an ad
(a cross-origin POST with Ssp-Key: preflighted), resolves the wrapper (a cross-origin fetch of the inline
VAST), plays the sandbox's video for the creative's duration and fires its trackers as it goes; adslot's
record then shows the play and every event. With ADSLOT_CORS_ORIGINS=none the same page fails, as every
browser player did before CORS was answered.

The player page and @dailymotion/vast-client's browser bundle are served by a small HTTP server on another
loopback port (another origin); nothing is loaded from the internet. The bundle is installed with
`npm ci` from tests/api/clients/vast-player's lock file when node_modules is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, drop_schemas, free_port, start_server
from tests.contract.support import QUARTILES, venue_of
from tests.playground.test_playground_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, require_browser

pytestmark = pytest.mark.browser
PLAYER_DIR = Path(__file__).parent / "clients" / "vast-player"
BUNDLE = PLAYER_DIR / "node_modules" / "@dailymotion" / "vast-client" / "dist" / "vast-client.js"
PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>signage player</title></head>
<body><p>A web signage player on its own origin.</p></body></html>
"""
PLAY = """
async ({base, key, venue}) => {
  const {VASTClient, VASTTracker} = await import('/vast-client.js');
  const answer = await fetch(base + '/api/v1/ad/request', {
    method: 'POST',
    headers: {'Ssp-Key': key, 'Content-Type': 'application/json'},
    body: JSON.stringify({venue_id: venue, play_time: Math.floor(Date.now() / 1000) + 5}),
  });
  const {data} = await answer.json();
  const client = new VASTClient();
  const wrapper = new DOMParser().parseFromString(data.vast_tag, 'text/xml');
  const vast = await client.parseVAST(wrapper);  // fetches the wrapper's VASTAdTagURI: the inline VAST
  const ad = vast.ads[0];
  const creative = ad.creatives.find((c) => c.type === 'linear');
  const media = creative.mediaFiles[0];
  const video = document.createElement('video');
  video.muted = true;
  video.src = media.fileURL;
  document.body.append(video);
  const tracker = new VASTTracker(client, ad, creative);
  video.loop = true;  // the creative's duration is the slot's, however short its file
  const failed = new Promise((_, reject) => {
    video.onerror = () => reject(new Error('the video did not play: ' + media.fileURL));
  });
  await Promise.race([video.play(), failed]);
  tracker.trackImpression();
  // The tracker follows the play in real time, second by second: quartiles fired faster than the
  // creative's duration allows are flagged as invalid traffic, not counted.
  const duration = creative.duration;
  for (let second = 1; second <= Math.ceil(duration); second++) {
    await Promise.race([new Promise((resolve) => setTimeout(resolve, 1000)), failed]);
    tracker.setProgress(Math.min(second, duration));
  }
  tracker.complete();
  video.pause();
  return {uuid: data.ad_request_uuid, media: media.fileURL, played: video.played.length, duration};
}
"""


def require_npm_bundle() -> None:
    """The VAST client's browser bundle, installed from the committed lock file when missing."""
    if BUNDLE.is_file():
        return
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("ADSLOT_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail("ADSLOT_TEST_REQUIRE_BROWSER=1 but npm is not installed to install the VAST client")
        pytest.skip("the cross-origin player test needs npm to install @dailymotion/vast-client")
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=PLAYER_DIR, check=True, timeout=300, capture_output=True
    )
    assert BUNDLE.is_file(), BUNDLE


class _PlayerOrigin(BaseHTTPRequestHandler):
    """The player's own site: its page and the VAST client's bundle, nothing else."""

    def do_GET(self) -> None:
        files = {
            "/player.html": (PAGE, "text/html"),
            "/vast-client.js": (BUNDLE.read_bytes(), "text/javascript"),
        }
        found = files.get(self.path)
        if found is None:
            self.send_error(404)
            return
        body, kind = found
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def player_origin() -> Iterator[str]:
    require_browser()
    require_npm_bundle()
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _PlayerOrigin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


Played = tuple[dict[str, Any] | None, str | None, list[str]]
"""What the page played (or None), the error it failed with (or None), the URLs it asked for."""


def play_page(origin: str, base: str, key: str, venue: str) -> Played:
    """Run the player page, served from `origin`, against the environment at `base` with `key` on `venue`."""
    from playwright.sync_api import Error, sync_playwright

    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, "--autoplay-policy=no-user-gesture-required"]
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("request", lambda request: requested.append(request.url))
            page.goto(f"{origin}/player.html")
            args = {"base": base, "key": key, "venue": venue}
            try:
                return page.evaluate(PLAY, args), None, requested
            except Error as error:
                return None, str(error), requested
        finally:
            browser.close()


def played_record(base: str, key: str, uuid: str) -> dict[str, Any]:
    """The ad request's record once every fired pixel has landed (the page fires them as images)."""
    url = f"{base}/api/v1/ad/request/{uuid}"
    deadline = time.monotonic() + 10
    while True:
        record: dict[str, Any] = httpx.get(url, headers={"Ssp-Key": key}).json()["data"]
        if all(record["events"].values()) or time.monotonic() > deadline:
            return record
        time.sleep(0.1)


def _play(origin: str, server: LiveServer) -> Played:
    assert server.keys is not None
    return play_page(origin, server.sandbox_url, server.keys.sandbox, venue_of("sandbox"))


def _record(server: LiveServer, uuid: str) -> dict[str, Any]:
    assert server.keys is not None
    return played_record(server.sandbox_url, server.keys.sandbox, uuid)


@pytest.fixture
def servers(backend: str, tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    """adslot with CORS answered (the default) and with it switched off."""
    opened, opened_schemas = start_server(tmp_path / "opened", backend)
    closed, closed_schemas = start_server(tmp_path / "closed", backend, ADSLOT_CORS_ORIGINS="none")
    yield opened, closed
    for server, schemas in ((opened, opened_schemas), (closed, closed_schemas)):
        server.stop()
        if schemas:
            drop_schemas(schemas)


def test_a_player_on_another_origin_plays_the_ad_and_every_event_is_counted(
    player_origin: str, servers: tuple[LiveServer, LiveServer]
) -> None:
    opened, closed = servers
    assert not opened.url.startswith(player_origin)
    played, error, requested = _play(player_origin, opened)
    assert error is None, error
    assert played is not None
    assert played["media"] == f"{opened.sandbox_url}/media/demo.mp4"
    assert played["played"] > 0
    assert any("/sandbox/api/v1/ad/vast/" in url for url in requested), "the wrapper was resolved"
    assert not [url for url in requested if not url.startswith(("http://127.0.0.1", "data:"))], requested
    record = _record(opened, played["uuid"])
    assert record["plays"] == 1
    assert record["events"]["impression"] is not None
    for event in QUARTILES:
        assert record["events"][event] is not None, (event, record)

    # The same page against adslot without CORS: the browser refuses the ad request's answer.
    played, error, _ = _play(player_origin, closed)
    assert played is None
    assert error is not None and "Failed to fetch" in error
