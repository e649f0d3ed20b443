"""The batch and verdict frames between a server worker and its ledger writer process."""

from __future__ import annotations

import io
import uuid

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adslot.ledger.claims import Claim, Claims, PacePlan, Spacing
from adslot.ledger.records import NO_COUNTERS, Fire, Issue, NoFill, Operation, Release, Settle, Verdict
from adslot.ledger.wire import (
    WireError,
    decode_operations,
    decode_verdicts,
    encode_error,
    encode_operations,
    encode_verdicts,
    framed,
    read_frame_from,
)
from tests.ledger.stores import record


def test_every_operation_kind_comes_back_equal_in_order() -> None:
    claims = Claims(
        (Claim("c1:life:plays", 1, 12), Claim("c1:hour:0", 1, None, PacePlan("c1:life:plays", 12, 3))),
        (Spacing("s:v/s1:cars", 1_800_000_000, 300),),
    )
    operations: list[Operation] = [
        Fire(uuid.uuid4(), "impression", "wrapper", 1_800_000_100),
        Issue(record(claims=claims, key_id=3), claims),
        Issue(record(screen_id=None)),
        Release(uuid.uuid4(), 5, 1_800_000_200),
        Settle(1_800_000_300, limit=7, grace=11, retention=3600),
        NoFill("lobby", None, 1_800_000_000, 3),
        NoFill("lobby", "s1", 1_800_000_000),
        Fire(uuid.uuid4(), "thirdQuartile", "inline", 1_800_000_400),
    ]
    back = decode_operations(encode_operations(operations))
    assert back == operations
    assert [type(op) for op in back] == [type(op) for op in operations]


@given(st.uuids(), st.sampled_from(["impression", "start", "complete"]), st.integers(0, 2**62))
def test_a_fire_keeps_its_exact_id_and_time(ident: uuid.UUID, event: str, at: int) -> None:
    (fire,) = decode_operations(encode_operations([Fire(ident, event, "wrapper", at)]))
    assert fire == Fire(ident, event, "wrapper", at)
    assert str(fire.ad_request_id) == str(ident) and hash(fire.ad_request_id) == hash(ident)


@pytest.mark.parametrize(
    "fire",
    [(b"short", "impression", "wrapper", 1), (b"x" * 16, "impression", "wrapper", "1"), (b"x" * 16, "start")],
    ids=["id-not-16-bytes", "time-not-an-integer", "fields-missing"],
)
def test_a_malformed_fire_is_refused_not_turned_into_an_operation(fire: tuple[object, ...]) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_operations(msgspec.msgpack.encode([(0, fire)]))


def test_verdicts_come_back_with_their_counters_as_tuples() -> None:
    verdicts = [
        Verdict("counted", 1_800_000_900),
        Verdict("rejected", reason="cap_reached"),
        Verdict("issued", 1_800_000_900, counters={"c1:life:plays": (12, 3, 4, None), "s:x": (300, 0, 1, 7)}),
        Verdict("settled", settled=3, counters={"c1:life:plays": (12, 2, 4, None)}),
        Verdict("unknown"),
    ]
    back = decode_verdicts(encode_verdicts(verdicts))
    assert back == verdicts
    assert back[0].counters is NO_COUNTERS
    assert isinstance(back[2].counters["s:x"], tuple)


def test_an_error_frame_raises_with_the_writers_message() -> None:
    with pytest.raises(WireError, match="IntegrityError: boom"):
        decode_verdicts(encode_error("IntegrityError: boom"))


def test_an_unknown_operation_tag_is_refused() -> None:
    with pytest.raises(WireError, match="unknown operation tag 9"):
        decode_operations(msgspec.msgpack.encode([(9, {"x": 1})]))


def test_a_blocking_stream_yields_each_frame_then_none_where_it_ends_between_frames() -> None:
    stream = io.BytesIO(framed(b"first") + framed(b"") + framed(b"third"))
    assert [read_frame_from(stream) for _ in range(4)] == [b"first", b"", b"third", None]


@pytest.mark.parametrize("cut", [2, 4, 7], ids=["inside the size", "after the size", "inside the payload"])
def test_a_blocking_stream_that_ends_inside_a_frame_is_an_error(cut: int) -> None:
    with pytest.raises(WireError, match="ended inside a frame"):
        read_frame_from(io.BytesIO(framed(b"payload")[:cut]))


def test_a_blocking_stream_refuses_a_size_no_batch_can_have() -> None:
    with pytest.raises(WireError, match="corrupt"):
        read_frame_from(io.BytesIO(b"\xff\xff\xff\xff" + b"x" * 16))
