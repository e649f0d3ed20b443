"""The 429 `rate_limited` answer (limits/): the error envelope, naming what is limited, with Retry-After."""

from __future__ import annotations

from adslot.api.reply import JSON, NO_STORE, Reply
from adslot.errors import ApiError

AD_REQUESTS = ApiError(
    429,
    "rate_limited",
    "this key is over its ad request rate limit; retry after Retry-After seconds",
    "Ssp-Key",
)
PIXELS = ApiError(
    429,
    "rate_limited",
    "too many fires for this ad request; retry after Retry-After seconds",
    "ad_request_uuid",
)
_PIXELS_BODY = PIXELS.body()
_AD_REQUESTS_BODY = AD_REQUESTS.body()


def ad_requests_limited(retry_after: int) -> Reply:
    """A key over ADSLOT_RATE_LIMIT_AD_REQUESTS: retry once its bucket holds a token again."""
    return Reply(429, _AD_REQUESTS_BODY, JSON, [NO_STORE, ("retry-after", str(retry_after))])


def pixels_limited() -> Reply:
    """An ad request over ADSLOT_RATE_LIMIT_PIXELS fires this second: the next second takes them again."""
    return Reply(429, _PIXELS_BODY, JSON, [NO_STORE, ("retry-after", "1")])
