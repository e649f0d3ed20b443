"""The notices' GET: the status only, on kept-alive connections reused per origin, a closed one replaced,
every failure a reason and never an exception, each within its timeout. Against raw loopback servers that
answer exactly as each test writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvloop

from adslot.demand.notice_client import NoticeClient

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"


def in_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[str], None]:
    """The test run to its end in a new event loop: asyncio's, and uvloop's, which adslot serves on."""

    def run(loop: str) -> None:
        if loop == "uvloop":
            uvloop.run(test())
        else:
            asyncio.run(test())

    run.__name__ = run.__qualname__ = test.__name__
    parametrized: Callable[[str], None] = pytest.mark.parametrize("loop", ["asyncio", "uvloop"])(run)
    return parametrized


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server; yields its base URL and a list that gets one entry per connection accepted."""
    connections: list[int] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        server.close()


def answering(*answers: bytes, heads: list[bytes] | None = None) -> Handler:
    """Reads request heads one after another on a connection and writes the next answer to each."""
    queue = list(answers)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while queue:
            head = await reader.readuntil(b"\r\n\r\n")
            if heads is not None:
                heads.append(head)
            writer.write(queue.pop(0))
            await writer.drain()

    return handle


def client(timeout_s: float = 2.0) -> NoticeClient:
    return NoticeClient(timeout_s=timeout_s, keepalive_s=30.0)


@in_loop
async def test_a_2xx_is_sent_and_any_other_status_is_its_reason_without_following_a_redirect() -> None:
    moved = b"HTTP/1.1 302 Found\r\nLocation: http://elsewhere.example/\r\nContent-Length: 0\r\n\r\n"
    failed = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!"
    async with serving(answering(NO_CONTENT, moved, failed)) as (url, _):
        notices = client()
        assert await notices.get(f"{url}/win") is None
        assert await notices.get(f"{url}/win") == "http_302"
        assert await notices.get(f"{url}/win") == "http_500"
        await notices.close()


@in_loop
async def test_notices_to_one_origin_reuse_one_connection_whatever_the_body_framing() -> None:
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world"
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    heads: list[bytes] = []
    async with serving(answering(sized, chunked, NO_CONTENT, heads=heads)) as (url, connections):
        notices = client()
        for _ in range(3):
            assert await notices.get(f"{url}/loss?auction=a1&reason=102") is None
        await notices.close()
    assert len(connections) == 1
    host = url.removeprefix("http://").encode()
    assert heads[0] == (
        b"GET /loss?auction=a1&reason=102 HTTP/1.1\r\nHost: " + host + b"\r\n"
        b"User-Agent: adslot\r\nAccept-Encoding: identity\r\n\r\n"
    )


@in_loop
async def test_an_answer_that_closes_its_connection_is_not_reused() -> None:
    closing = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(closing)
        await writer.drain()

    async with serving(handle) as (url, connections):
        notices = client()
        assert await notices.get(f"{url}/win") is None
        assert await notices.get(f"{url}/win") is None
        await notices.close()
    assert len(connections) == 2


@in_loop
async def test_a_kept_alive_connection_the_server_closed_while_idle_is_replaced_and_the_notice_sent() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(NO_CONTENT)  # keeps the connection alive, then closes it without a word
        await writer.drain()

    async with serving(handle) as (url, connections):
        notices = client()
        assert await notices.get(f"{url}/win") is None
        await asyncio.sleep(0.05)  # the close reaches the client while the connection is idle
        assert await notices.get(f"{url}/win") is None
        await notices.close()
    assert len(connections) == 2


@in_loop
async def test_a_server_that_never_answers_is_a_timeout_within_the_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(10)

    async with serving(handle) as (url, _):
        notices = client(timeout_s=0.2)
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await notices.get(f"{url}/win") == "timeout"
        assert loop.time() - started < 1.0
        await notices.close()


@in_loop
async def test_an_answer_that_is_not_http_is_a_protocol_error_and_its_connection_is_not_reused() -> None:
    async with serving(answering(b"SSH-2.0-OpenSSH\r\n\r\n", NO_CONTENT)) as (url, connections):
        notices = client()
        assert await notices.get(f"{url}/win") == "protocol"
        assert await notices.get(f"{url}/win") is None
        await notices.close()
    assert len(connections) == 2


@in_loop
async def test_a_refused_connection_and_a_url_that_cannot_be_sent_are_reasons_not_exceptions() -> None:
    async with serving(answering()) as (url, _):
        pass  # closed: its port now refuses connections
    notices = client()
    assert await notices.get(f"{url}/win") == "connect"
    assert await notices.get("ftp://127.0.0.1/win") == "bad_url"
    assert await notices.get("http:///win") == "bad_url"
    await notices.close()


@in_loop
async def test_a_reused_connection_closed_unanswered_sends_the_notice_again_once_on_a_new_one() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(NO_CONTENT)
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")  # the next request on this connection: closed unanswered

    async with serving(handle) as (url, connections):
        notices = client()
        assert await notices.get(f"{url}/win") is None
        assert await notices.get(f"{url}/win") is None
        await notices.close()
    assert len(connections) == 2


@in_loop
async def test_a_new_connection_closed_unanswered_is_a_reason_and_is_not_sent_again() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")

    async with serving(handle) as (url, connections):
        notices = client()
        assert await notices.get(f"{url}/win") == "protocol"
        await notices.close()
    assert len(connections) == 1
