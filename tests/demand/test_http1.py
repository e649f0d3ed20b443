"""The lean HTTP/1.1 client under bid requests and notices: bodies kept up to a cap, an answer ended at its
head when the rest is not wanted, a body delimited by the connection's close, and URLs it refuses to write."""

from __future__ import annotations

import asyncio

import pytest

from adslot.demand.http1 import Http1Client, target_of
from tests.demand.test_notice_client import answering, in_loop, serving


def origin_of(url: str) -> tuple[str, str, int]:
    return target_of(url).origin


def get(path: str = "/") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


@in_loop
async def test_a_body_is_kept_up_to_its_cap_and_one_byte_more_which_tells_it_was_over() -> None:
    body = b"x" * 100
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + body
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + body + b"\r\n0\r\n\r\n"
    async with serving(answering(sized, chunked, sized)) as (url, connections):
        client = Http1Client(keepalive_s=30)
        whole = await client.send(origin_of(url), get(), keep=100)
        assert (whole.status, whole.declared, whole.body) == (200, 100, body)
        over = await client.send(origin_of(url), get(), keep=10)
        assert over.body == body[:11]
        unkept = await client.send(origin_of(url), get(), keep=None)
        assert (unkept.status, unkept.body) == (200, b"")
        await client.close()
    assert len(connections) == 2  # the answer cut at its cap closed its connection


@in_loop
async def test_an_answer_not_wanted_past_its_head_ends_there_and_its_connection_is_closed() -> None:
    failed = b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy"
    declared = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n{"  # the rest never comes
    async with serving(answering(failed, declared, b"HTTP/1.1 204 No\r\n\r\n")) as (url, connections):
        client = Http1Client(keepalive_s=30)
        assert (await client.send(origin_of(url), get(), keep=100)).status == 503
        answer = await asyncio.wait_for(client.send(origin_of(url), get(), keep=100), 1.0)
        assert (answer.status, answer.declared, answer.body) == (200, 5000, b"")
        await client.close()
    assert len(connections) == 2


@in_loop
async def test_a_body_delimited_by_the_close_of_its_connection_is_read_whole() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe whole body")
        await writer.drain()

    async with serving(handle) as (url, _):
        client = Http1Client(keepalive_s=30)
        answer = await client.send(origin_of(url), get(), keep=100)
        assert (answer.status, answer.declared, answer.body) == (200, None, b"the whole body")
        await client.close()


@pytest.mark.parametrize(
    "url", ["ftp://bid.example/x", "http:///x", "bid.example/x", "http://bid.example:99999/x"]
)
def test_a_url_this_client_cannot_send_to_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        target_of(url)


def test_a_target_keeps_the_path_and_query_encoded_and_the_port_only_when_not_the_default() -> None:
    target = target_of("https://Bid.Example/open rtb?a=1&b=${X}")
    assert (target.origin, target.host, target.path) == (
        ("https", "bid.example", 443),
        "bid.example",
        "/open%20rtb?a=1&b=$%7BX%7D",
    )
    assert target_of("http://[::1]:8080/").host == "[::1]:8080"
