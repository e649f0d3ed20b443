"""An ASGI app served by uvicorn in a thread on a loopback port, for tests that need a real peer: a bidder, a
misbehaving partner, a callback server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from tests.conftest import free_port


@contextmanager
def on_loopback(
    app: Any, name: str, port: int | None = None, *, host: str = "127.0.0.1", **options: Any
) -> Iterator[str]:
    """`app` served on `host`, a loopback address (Linux routes all of 127/8 to loopback), on `port` (else a
    free one) until the block ends; its base URL. `options` go to uvicorn.Config."""
    port = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, f"{name} did not start"
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
