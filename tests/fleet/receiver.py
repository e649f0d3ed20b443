"""A webhook receiver on loopback that keeps what it is sent, and can be taken down and brought back."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port


@dataclass
class Received:
    delivery: str
    signature: str
    body: bytes

    @property
    def alert(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    def signed_by(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.signature)


@dataclass
class Receiver:
    port: int = field(default_factory=free_port)
    received: list[Received] = field(default_factory=list)
    redirect_to: str | None = None
    """When set, each POST is kept and answered 307 to this URL."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def up(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.received.append(
                        Received(
                            self.headers.get("X-Adslot-Delivery", ""),
                            self.headers.get("X-Adslot-Signature", ""),
                            body,
                        )
                    )
                if receiver.redirect_to is not None:
                    self.send_response(307)
                    self.send_header("Location", receiver.redirect_to)
                else:
                    self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def alerts(self, venue: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r.alert for r in self.received if r.alert["venue_id"] == venue]

    def all(self) -> list[Received]:
        with self.lock:
            return list(self.received)
