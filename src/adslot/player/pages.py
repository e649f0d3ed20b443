"""The player's files at {base}/player/, from the package (never a CDN), with the headers a player needs.

Creative media and VAST from other origins stay playable (media-src, img-src and connect-src allow them) but
only the player's own scripts ever run on adslot's origin (script-src 'self'). The service worker lives at
{base}/player/sw.js, so its scope is the player's folder and nothing else of the origin.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.exceptions import NotFoundException
from litestar.params import PathParameter
from litestar.response import Redirect

from adslot.player import STATIC

CSP = (
    "default-src 'self'; script-src 'self'; worker-src 'self'; style-src 'self'; "
    "img-src * data: blob:; media-src * data: blob:; connect-src *; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'; object-src 'none'"
)
FILES = {
    "": ("index.html", "text/html"),
    "player.js": ("player.js", "text/javascript"),
    "player.css": ("player.css", "text/css"),
    "sw.js": ("sw.js", "text/javascript"),
    "house.svg": ("house.svg", "image/svg+xml"),
    "vendor/vast-client.min.js": ("vendor/vast-client.min.js", "text/javascript"),
    "vendor/vast-client.LICENSE": ("vendor/vast-client.LICENSE", "text/plain"),
    "vendor/VERSION": ("vendor/VERSION", "text/plain"),
}
"""Every file the player serves, by its path under /player/: nothing else is read from the disk."""
CONTENTS = {name: (STATIC / path).read_bytes() for name, (path, _) in FILES.items()}
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    # Revalidated each time: a screen picks up a new player at its next load (the service worker serves the
    # cached copy only when the network does not answer).
    "cache-control": "no-cache",
}
FilePath = Annotated[str, PathParameter()]


def _file(name: str) -> Response[bytes]:
    if name not in FILES:
        raise NotFoundException()
    return Response(CONTENTS[name], media_type=FILES[name][1], headers=HEADERS)


@get("/player", include_in_schema=False)
async def player_page(request: Request[Any, Any, Any]) -> Response[bytes] | Redirect:
    """The page at {base}/player/ (the framework matches /player and /player/ alike: the slash is what makes
    the page's relative URLs and its service worker's scope resolve under /player/)."""
    raw = request.scope.get("raw_path") or request.scope["path"].encode()
    if not raw.partition(b"?")[0].endswith(b"/"):
        return Redirect(request.scope.get("root_path", "") + "/player/", status_code=301)
    return _file("")


@get("/player/{name:path}", include_in_schema=False)
async def player_file(name: FilePath) -> Response[bytes]:
    return _file(name.lstrip("/"))


PLAYER_PAGES = [player_page, player_file]
