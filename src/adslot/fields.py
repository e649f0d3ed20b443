"""Field types that more than one domain's wire shapes share (venues, screens, campaigns, creatives).

msgspec checks shape and range on decoding, so a bad value is a 400 `invalid_field` naming its path.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""Short labels (advertiser category, venue type, tags, regions): their columns hold 64 characters."""
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
PathId = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^(?=.*\S)[^\x00-\x1f\x7f/]+$")]
"""An id that names a resource in a URL path (a venue's, a screen's): no "/", which no path could reach, and
not blank, which no ad request may name."""
MimeType = Annotated[str, msgspec.Meta(pattern=r"^video/[a-z0-9.+-]{1,40}$")]
Timezone = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_+\-/]+$")]
"""An IANA time zone name; the repository checks that it exists (422 invalid_timezone)."""
Latitude = Annotated[float, msgspec.Meta(ge=-90, le=90)]
Longitude = Annotated[float, msgspec.Meta(ge=-180, le=180)]
MAX_ID = 2**31 - 1
"""The largest row id: ids are 32-bit in every supported database (PostgreSQL INTEGER), so a larger one
names nothing, and would make the driver raise rather than find no row."""
CountryCode = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z]{2}$")]
"""ISO 3166-1 alpha-2, either case; stored in upper case once the repository has found it assigned."""
