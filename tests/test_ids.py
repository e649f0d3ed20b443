"""Ad request ids: UUIDv7 (time-ordered, CSPRNG random bits) and the strict parser of their text form."""

from __future__ import annotations

import pickle
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adslot.ids import UUID_TYPE, parse_uuid, uuid7, uuid_from_int

CANONICAL = "01890a5d-ac96-774b-bcce-b302099a8057"


def unix_ms(value: uuid.UUID) -> int:
    return value.int >> 80


# --- uuid7 ----------------------------------------------------------------------------------------


def test_uuid7_has_version_7() -> None:
    for _ in range(1000):
        value = uuid7()
        assert value.version == 7
        assert (value.int >> 76) & 0xF == 0x7


def test_uuid7_has_the_rfc_variant() -> None:
    for _ in range(1000):
        value = uuid7()
        assert value.variant == uuid.RFC_4122
        assert (value.int >> 62) & 0b11 == 0b10


def test_uuid7_starts_with_the_current_unix_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= unix_ms(value) <= after


def test_uuid7_generated_in_later_milliseconds_sort_later() -> None:
    made = []
    for _ in range(30):
        made.append(uuid7())
        time.sleep(0.002)
    assert sorted(made) == made
    assert sorted(str(value) for value in made) == [str(value) for value in made]
    assert [unix_ms(value) for value in made] == sorted({unix_ms(value) for value in made})


def test_uuid7_is_unique_over_100k() -> None:
    assert len({uuid7() for _ in range(100_000)}) == 100_000


def test_uuid7_random_bits_differ_within_one_millisecond() -> None:
    values = [uuid7() for _ in range(2000)]
    by_ms: dict[int, set[int]] = {}
    for value in values:
        by_ms.setdefault(unix_ms(value), set()).add(value.int & ((1 << 76) - 1))
    assert any(len(group) > 1 for group in by_ms.values())
    assert sum(len(group) for group in by_ms.values()) == len(values)


def test_uuid7_uses_every_random_bit() -> None:
    """Across many ids, each of the 74 random bit positions takes both values."""
    rand_mask = (0xFFF << 64) | ((1 << 62) - 1)
    ones = 0
    zeros = 0
    for _ in range(2000):
        bits = uuid7().int & rand_mask
        ones |= bits
        zeros |= ~bits & rand_mask
    assert ones == rand_mask
    assert zeros == rand_mask


def test_uuid7_text_is_canonical_lowercase() -> None:
    text = str(uuid7())
    assert len(text) == 36
    assert text == text.lower()
    assert [len(part) for part in text.split("-")] == [8, 4, 4, 4, 12]
    assert text[14] == "7"


# --- parse_uuid -----------------------------------------------------------------------------------


def test_parse_uuid_accepts_the_canonical_form() -> None:
    assert parse_uuid(CANONICAL) == uuid.UUID(CANONICAL)


def test_parse_uuid_accepts_uppercase_hex() -> None:
    assert parse_uuid(CANONICAL.upper()) == uuid.UUID(CANONICAL)


def test_parse_uuid_round_trips_generated_ids() -> None:
    for _ in range(100):
        value = uuid7()
        assert parse_uuid(str(value)) == value


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("", id="empty"),
        pytest.param(CANONICAL.replace("-", ""), id="32-hex"),
        pytest.param("{" + CANONICAL + "}", id="braces"),
        pytest.param("urn:uuid:" + CANONICAL, id="urn"),
        pytest.param(CANONICAL[:-1], id="35-chars"),
        pytest.param(CANONICAL + "0", id="37-chars"),
        pytest.param(CANONICAL[:-1] + "g", id="non-hex"),
        pytest.param("urn:" + CANONICAL.replace("-", ""), id="36-chars-urn-prefix"),
        pytest.param("{" + CANONICAL.replace("-", "") + "}--", id="36-chars-braces-and-hyphens"),
        pytest.param(CANONICAL.replace("-", "")[:31] + "----" + "0", id="36-chars-hyphens-misplaced"),
        pytest.param("0189-0a5dac96-774b-bcce-b302099a8057", id="36-chars-groups-8-4-4-4-12-shuffled"),
        pytest.param("+1890a5d-ac96-774b-bcce-b302099a8057", id="36-chars-leading-plus"),
        pytest.param(" 1890a5d-ac96-774b-bcce-b302099a8057", id="36-chars-leading-space"),
        pytest.param("01890a5d-ac96-774b-bcce-b302099a805 ", id="36-chars-trailing-space"),
        pytest.param("01890a5d-ac96-774b-bcce-b302099a805\n", id="36-chars-trailing-newline"),
        pytest.param("01890a5d-ac96-774b-bcce-b302099a80_7", id="36-chars-underscore"),
        pytest.param("01890a5d-ac96-774b-bcce-b302099a805\u0667", id="36-chars-non-ascii-digit"),
        pytest.param("01890a5d-ac96-774b-bcce-b302099a805\uff17", id="36-chars-fullwidth-digit"),
    ],
)
def test_parse_uuid_rejects_anything_but_the_36_character_form(raw: str) -> None:
    assert parse_uuid(raw) is None


@given(st.uuids(version=None))
def test_a_parsed_uuid_is_indistinguishable_from_one_uuid_module_made(value: uuid.UUID) -> None:
    for text in (str(value), str(value).upper()):
        parsed = parse_uuid(text)
        assert parsed == value and hash(parsed) == hash(value)
        assert (str(parsed), parsed.hex, parsed.bytes, parsed.version) == (
            str(value),
            value.hex,
            value.bytes,
            value.version,
        )
        assert pickle.loads(pickle.dumps(parsed)) == value


@given(st.lists(st.uuids(version=None), min_size=1, max_size=20))
def test_ids_made_from_ints_equal_hash_and_sort_as_the_uuid_modules_do(values: list[uuid.UUID]) -> None:
    made = [uuid_from_int(value.int) for value in values]
    assert made == values and [hash(m) for m in made] == [hash(v) for v in values]
    assert sorted(made) == sorted(values)
    by_std = {value: n for n, value in enumerate(values)}
    assert [by_std[m] for m in made] == [by_std[v] for v in values]


def test_every_id_adslot_makes_is_the_compiled_uuid_type() -> None:
    # the whole ledger then hashes and prints ids in C (ids.UUID_TYPE's docstring)
    for made in (uuid7(), parse_uuid(CANONICAL), uuid_from_int(1 << 100)):
        assert type(made) is UUID_TYPE and isinstance(made, uuid.UUID)
