"""The edge headers of a request, read once: its id and, on a player path, its CORS answer headers."""

from __future__ import annotations

from collections.abc import Iterable

from adslot.edge.cors import CorsPolicy, Headers, is_player_path
from adslot.edge.request_ids import HEADER, new_request_id, usable
from adslot.settings import Settings

ORIGIN = b"origin"


class EdgeHeaders:
    """One per app (AdslotApp.edge), from its settings; both lanes ask it."""

    def __init__(self, settings: Settings, mounts: Iterable[str]) -> None:
        self.cors = CorsPolicy(settings.cors_origins, settings.cors_max_age_seconds)
        self._mounts = sorted((m for m in mounts if m), key=len, reverse=True)
        self._constant = self.cors.any_origin or not self.cors.enabled
        """Whether every answer's CORS lines are the same, whatever the Origin."""
        self._constant_block = self.cors.answer_block(b"*")
        """The CORS lines for any Origin sent, when they are constant."""
        self._absent_block = self.cors.answer_block(None)

    def relative(self, path: str) -> str:
        """`path` relative to the environment mount it falls under (production's is the root)."""
        for mount in self._mounts:
            if path == mount or path.startswith(mount + "/"):
                return path[len(mount) :]
        return path

    def player(self, path: str) -> bool:
        """Whether CORS answers on `path` (a full path, mount included)."""
        return self.cors.enabled and is_player_path(self.relative(path))

    def for_lane(self, headers: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
        """For the hot lane, whose every path is a player's: the request id and the encoded CORS lines.
        One pass over the headers; with any origin allowed, the lines are one constant."""
        sent = origin = None
        for name, value in headers:
            if name == HEADER:
                sent = value
            elif name == ORIGIN:
                origin = value
        if sent is None or not usable(sent):
            sent = new_request_id()
        if origin is None:
            return sent, self._absent_block
        return sent, self._constant_block if self._constant else self.cors.answer_block(origin)

    def answer_headers(self, origin: bytes | None) -> Headers:
        return self.cors.answer_headers(origin)
