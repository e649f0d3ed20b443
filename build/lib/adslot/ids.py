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
from typing import cast

from asyncpg.pgproto.pgproto import UUID as _CompiledUUID

_CANONICAL = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
UUID_TYPE: type[uuid.UUID] = _CompiledUUID
"""Every id adslot makes or parses is asyncpg's compiled subclass of uuid.UUID (what asyncpg itself returns
for a uuid column), not uuid.UUID: equal to a uuid.UUID of the same value, with the same hash, but its hash,
str() and construction are C, not Python. A pixel's id is hashed ~8 times on its way through the ledger's
batch dicts and the writer's memory (uuid.UUID.__hash__ 0.10 µs each, this one's 0.04), str() goes into
every VAST link (0.63 µs against 0.04), and asyncpg encodes it without a call to its `bytes` property."""


def uuid7() -> uuid.UUID:
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 74 are kept
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76  # version
    value |= ((rand >> 68) & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF  # rand_b, 62 bits
    return uuid_from_int(value)


def parse_uuid(raw: str) -> uuid.UUID | None:
    """Accept only the canonical 36-character form; anything else is malformed."""
    # uuid.UUID alone also takes "urn:", braces, misplaced hyphens, signs, spaces, "_" and non-ASCII
    # digits, and the compiled UUID takes hyphens anywhere: the pattern checks the form, then the
    # compiled parser reads the digits it has checked.
    if len(raw) != 36 or _CANONICAL.fullmatch(raw) is None:
        return None
    return cast(uuid.UUID, _CompiledUUID(raw))


def uuid_from_int(value: int) -> uuid.UUID:
    """UUID(int=value) for values already known to be 128-bit, as the compiled type: the ledger turns every
    stored id and every pixel's id into one."""
    return cast(uuid.UUID, _CompiledUUID(value.to_bytes(16, "big")))
