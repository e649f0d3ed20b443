"""Ad request identifiers: UUIDv7 whose 74 random bits come from the OS CSPRNG.

The id is a capability (players fetch VAST and fire pixels with it and no key), so it must be unguessable;
the time prefix keeps primary-key inserts local in the index. Python 3.11 has no uuid7, and the few lines
below are clearer than a dependency.
"""

from __future__ import annotations

import os
import re
import time
import uuid

_CANONICAL = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def uuid7() -> uuid.UUID:
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 74 are kept
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76  # version
    value |= ((rand >> 68) & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF  # rand_b, 62 bits
    return uuid.UUID(int=value)


def parse_uuid(raw: str) -> uuid.UUID | None:
    """Accept only the canonical 36-character form; anything else is malformed."""
    # uuid.UUID alone also takes "urn:", braces, misplaced hyphens, signs, spaces, "_" and non-ASCII digits.
    if len(raw) != 36 or _CANONICAL.fullmatch(raw) is None:
        return None
    # The pattern has checked every digit: skip UUID()'s own re-parsing, a third of a pixel's own work.
    return uuid_from_int(int(raw.replace("-", ""), 16))


_UNKNOWN = uuid.SafeUUID.unknown  # an enum member read through its class costs a descriptor call each time
_new = object.__new__
_set_int = uuid.UUID.__dict__["int"].__set__  # UUID's own slots, set as UUID.__init__ sets them
_set_safe = uuid.UUID.__dict__["is_safe"].__set__


def uuid_from_int(value: int) -> uuid.UUID:
    """UUID(int=value) without its argument checks, for values already known to be 128-bit: the ledger
    turns every stored id and every pixel's id into one, so the checks cost more than the rest."""
    made: uuid.UUID = _new(uuid.UUID)
    _set_int(made, value)
    _set_safe(made, _UNKNOWN)
    return made
