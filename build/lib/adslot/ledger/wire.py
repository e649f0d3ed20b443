"""How a batch of operations and its verdicts cross the pipe to the writer process: one msgpack frame each.

Fires are most of the traffic, so they travel as bare tuples (16-byte id, event, layer, time); the rarer
operations travel as tagged msgspec-encoded dataclasses. A batch frame starts with its Stamp (which worker
sent it, its number, when, and whether it is a resend). Verdicts travel as tuples. Frames are
length-prefixed: a 4-byte big-endian size, then the payload.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from typing import Any, BinaryIO, NamedTuple

import msgspec

from adslot.ledger.budget import Snapshot
from adslot.ledger.records import NO_COUNTERS, Fire, Issue, NoFill, Operation, Release, Settle, Verdict
from adslot.storage.failures import LedgerUnavailable, OutcomeUnknown

FIRE, ISSUE, RELEASE, SETTLE, NO_FILL = range(5)
_TAGS: dict[type, int] = {Issue: ISSUE, Release: RELEASE, Settle: SETTLE, NoFill: NO_FILL}
_DECODERS: dict[int, msgspec.msgpack.Decoder[Any]] = {
    ISSUE: msgspec.msgpack.Decoder(Issue),
    RELEASE: msgspec.msgpack.Decoder(Release),
    SETTLE: msgspec.msgpack.Decoder(Settle),
    NO_FILL: msgspec.msgpack.Decoder(NoFill),
}
_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")
_encode = _encoder.encode
_frame_decoder = msgspec.msgpack.Decoder(list[tuple[int, msgspec.Raw]])
_fire_decoder = msgspec.msgpack.Decoder(Fire)
"""A Fire straight from its (16-byte id, event, layer, time) array: msgspec makes the tuple and its UUID in C,
a third of the cost of decoding the array and building both in Python (measured: ~0.3 against ~0.9 µs a
fire, every pixel, in the writer process)."""

VerdictRow = tuple[str, int | None, str | None, dict[str, Snapshot] | None, int]
_verdict_decoder = msgspec.msgpack.Decoder(tuple[str, list[VerdictRow]])
SIZE = struct.Struct(">I")
READY = b"ready"
"""A writer's answer to the frame naming its database, when it serves that database."""
MAX_FRAME = 256 * 1024 * 1024
"""A frame larger than this is a corrupt stream, never a batch (batch_max operations are far smaller)."""


class WireError(RuntimeError):
    """The writer process answered with an error, or the stream between the two broke."""


class Stamp(NamedTuple):
    """Frame `seq` of worker `client` (16 random bytes per worker process), sent at `at` (epoch seconds);
    `resent`: sent again after the writer that had it went away, so it may be committed already."""

    client: bytes
    seq: int
    at: int
    resent: bool


STAMP = struct.Struct(">16sQq?")


def encode_batch(stamp: Stamp, operations: Sequence[Operation]) -> bytes:
    return STAMP.pack(*stamp) + encode_operations(operations)


def decode_batch(frame: bytes) -> tuple[Stamp, list[Operation]]:
    if len(frame) < STAMP.size:
        raise WireError(f"a batch frame of {len(frame)} bytes has no stamp")
    return Stamp._make(STAMP.unpack_from(frame)), decode_operations(frame[STAMP.size :])


def resent(frame: bytes) -> bytes:
    """The same batch frame, marked as a resend."""
    return frame[: STAMP.size - 1] + b"\x01" + frame[STAMP.size :]


def encode_operations(operations: Sequence[Operation]) -> bytes:
    rows: list[object] = []
    for op in operations:
        if type(op) is Fire:
            rows.append((FIRE, op))  # an array: (id as 16 bytes, event, layer, at)
        else:
            rows.append((_TAGS[type(op)], op))
    return _encode(rows)


def decode_operations(frame: bytes) -> list[Operation]:
    out: list[Operation] = []
    for tag, raw in _frame_decoder.decode(frame):
        if tag == FIRE:
            out.append(_fire_decoder.decode(raw))
        else:
            decoder = _DECODERS.get(tag)
            if decoder is None:
                raise WireError(f"unknown operation tag {tag}")
            out.append(decoder.decode(raw))
    return out


def encode_verdicts(verdicts: Sequence[Verdict]) -> bytes:
    rows = [
        (v.outcome, v.expires_at, v.reason, dict(v.counters) if v.counters else None, v.settled)
        for v in verdicts
    ]
    return _encode(("ok", rows))


def encode_error(message: str, *, unavailable: bool = False, unknown: bool = False) -> bytes:
    """`unavailable`: the database refused the batch for a reason that passes (failures.unavailable);
    `unknown`: the batch may have been committed, and the database could not be asked whether it was."""
    status = "unknown" if unknown else "unavailable" if unavailable else "error"
    return _encode((status, [(message, None, None, None, 0)]))


_FAILURES: dict[str, type[Exception]] = {"unknown": OutcomeUnknown, "unavailable": LedgerUnavailable}
"""What the worker raises for each failed status: OutcomeUnknown is never applied again by its group
committer (a 503), LedgerUnavailable is retried op by op, anything else is a WireError (a 500)."""


def decode_verdicts(frame: bytes) -> list[Verdict]:
    status, rows = _verdict_decoder.decode(frame)
    if status != "ok":
        message = f"the ledger writer process failed the batch: {rows[0][0] if rows else status}"
        raise _FAILURES.get(status, WireError)(message)
    return [
        Verdict(outcome, expires_at, reason, counters or NO_COUNTERS, settled)  # type: ignore[arg-type]
        for outcome, expires_at, reason, counters, settled in rows
    ]


def framed(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


def write_frame(writer: asyncio.StreamWriter, payload: bytes) -> None:
    writer.write(framed(payload))


def frame_size(head: bytes | bytearray) -> int:
    """The payload size a frame's SIZE head announces; WireError if no batch could be that large."""
    (size,) = SIZE.unpack(head)
    if size > MAX_FRAME:
        raise WireError(f"frame of {size} bytes: the stream is corrupt")
    return int(size)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """The next frame; IncompleteReadError when the other side closed between frames."""
    return await reader.readexactly(frame_size(await reader.readexactly(SIZE.size)))


def read_frame_from(stream: BinaryIO) -> bytes | None:
    """The next frame from a blocking stream; None when the other side closed between frames."""
    head = stream.read(SIZE.size)
    if not head:
        return None
    if len(head) < SIZE.size:
        raise WireError("the stream ended inside a frame")
    size = frame_size(head)
    payload = stream.read(size)
    if len(payload) < size:
        raise WireError("the stream ended inside a frame")
    return payload
