"""CORS on the player-facing paths only, so that an HTML5 player on its own origin can use adslot.

A player's key travels in the `Ssp-Key` header and no cookie is ever sent, so opening these paths to other
origins lends a page nothing it does not already hold: hence any origin by default (ADSLOT_CORS_ORIGINS).
The console and the management and report API are never opened: their paths are not player paths, and
their preflights reach Litestar, whose answer carries no Access-Control-* header, which a browser refuses.

Every header is encoded once, per policy and allowed origin: an answer adds a constant, never builds one.
"""

from __future__ import annotations

from adslot.errors import ApiError

PLAYER_PREFIXES = ("/api/v1/ad/", "/media/")
"""Paths (relative to an environment's mount) a player calls: the ad request and its record and release,
the inline VAST, the pixels, the manifest, batch Proof of Play (`/api/v1/ad/pop/batch`), and media."""
PLAYER_PATHS = frozenset({"/ad/request"})
"""The spec's short form of the ad request, outside the prefixes."""
ALLOW_METHODS = b"GET, HEAD, POST"
ALLOW_HEADERS = b"Content-Type, Ssp-Key, X-Request-Id"
EXPOSE_HEADERS = (
    b"X-Ad-Request-Uuid, X-Ad-Request-Expired-At, X-Adslot-Error, X-Request-Id, Retry-After, Server-Timing"
)
"""What a page's script may read beyond the safelisted headers: the uuid and expiry of a format=xml
answer, the inline VAST's error code, the request id, when to retry a 503, and where an ad request that
asked demand partners spent its time."""

Headers = tuple[tuple[bytes, bytes], ...]
Answer = tuple[int, Headers, bytes]
"""Status, headers and body of a preflight's answer."""
VARY = (b"vary", b"Origin")
NOT_ALLOWED = ApiError(403, "origin_not_allowed", "this origin may not call adslot from a browser", "Origin")


def is_player_path(path: str) -> bool:
    """Whether `path`, relative to an environment's mount, is one a player calls."""
    return path.startswith(PLAYER_PREFIXES) or path in PLAYER_PATHS


def _lines(headers: Headers) -> bytes:
    return b"".join(b"%s: %s\r\n" % pair for pair in headers)


class CorsPolicy:
    """ADSLOT_CORS_ORIGINS made into headers: ("*",) any origin, () none, else the listed origins (whose
    answers carry `Vary: Origin`, since they differ by it)."""

    def __init__(self, origins: tuple[str, ...], max_age_seconds: int) -> None:
        self.enabled = bool(origins)
        self.any_origin = origins == ("*",)
        expose = (b"access-control-expose-headers", EXPOSE_HEADERS)
        preflight = (
            (b"access-control-allow-methods", ALLOW_METHODS),
            (b"access-control-allow-headers", ALLOW_HEADERS),
            (b"access-control-max-age", b"%d" % max_age_seconds),
        )
        self._answers: dict[bytes, Headers] = {}
        self._preflights: dict[bytes, Headers] = {}
        self._other: Headers = ()
        """The CORS headers of an answer to an origin not listed (any origin allowed: to every origin)."""
        self._absent: Headers = ()
        """The CORS headers of an answer to a request without Origin: a player that is no browser, which needs
        none. `Vary: Origin` keeps a cache from handing such an answer to a page."""
        if self.any_origin:
            self._other = ((b"access-control-allow-origin", b"*"), expose)
            self._absent = (VARY,)
            self._any_preflight: Headers = ((b"access-control-allow-origin", b"*"), *preflight)
        elif self.enabled:
            self._other = (VARY,)
            self._absent = (VARY,)
            for origin in (o.encode("ascii") for o in origins):
                allow = (b"access-control-allow-origin", origin)
                self._answers[origin] = (allow, VARY, expose)
                self._preflights[origin] = (allow, VARY, *preflight)
        self._blocks = {origin: _lines(headers) for origin, headers in self._answers.items()}
        self._other_block = _lines(self._other)
        self._absent_block = _lines(self._absent)
        self._refusal: Answer = (
            403,
            (
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(NOT_ALLOWED.body())),
                VARY,
            ),
            NOT_ALLOWED.body(),
        )

    def answer_headers(self, origin: bytes | None) -> Headers:
        """The CORS headers of an answer on a player path to a request from `origin` (None: no Origin)."""
        if origin is None:
            return self._absent
        return self._answers.get(origin, self._other)

    def answer_block(self, origin: bytes | None) -> bytes:
        """answer_headers as the hot lane writes them: `name: value\\r\\n` lines."""
        if origin is None:
            return self._absent_block
        return self._blocks.get(origin, self._other_block)

    def preflight(self, origin: bytes) -> Answer:
        """The answer to a preflight (OPTIONS with Origin and Access-Control-Request-Method) on a player path:
        204 with what may be sent, cached for ADSLOT_CORS_MAX_AGE_SECONDS; an origin not listed gets 403
        `origin_not_allowed` and no Access-Control-* header. The requested method and headers are not
        checked here: the browser checks them against the allowed lists, and the answer stays one per
        origin."""
        if self.any_origin:
            return 204, self._any_preflight, b""
        headers = self._preflights.get(origin)
        if headers is None:
            return self._refusal
        return 204, headers, b""
