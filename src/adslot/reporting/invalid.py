"""The delivery report's invalid-traffic counts: the fires the rules flagged (ledger/ivt.py), per reason.

They come from invalid_fires (one row per flagged fire), joined to its ad request by id, so they are grouped
and filtered exactly as the report's other figures (by the ad request's campaign, creative, venue, screen and
play_time). Each reason is a figure of its own, `invalid_<reason>`, in the groups handed to aggregate.fold:
the JSON report nests them as `invalid: {reason: n}`, the CSV writes a column each. Retention rolls them up
with invalid_figures() over the same join.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from adslot.ledger.ivt import RULES
from adslot.storage.tables import invalid_fires

INVALID_FIGURES = tuple(f"invalid_{reason}" for reason in RULES)
"""Each reason's figure name, in ivt.RULES order: the CSV columns and report_rollups' columns."""


def invalid_figures() -> list[sa.Label[Any]]:
    """The count of flagged fires per reason, each labelled with its figure name, over rows of invalid_fires
    (joined to ad_requests by invalid_fires.ad_request_id = ad_requests.id, grouped as the report groups)."""
    reason = invalid_fires.c.reason
    return [
        sa.func.count(sa.case((reason == name, 1))).label(figure)
        for name, figure in zip(RULES, INVALID_FIGURES, strict=True)
    ]


def invalid_counts(group: dict[str, Any]) -> dict[str, int]:
    """A group's counts by reason (0 where it has none), from its invalid_<reason> figures."""
    return {name: int(group.get(figure) or 0) for name, figure in zip(RULES, INVALID_FIGURES, strict=True)}
