"""The reporting API (admin permission): delivery figures and the raw play log, as JSON or CSV.

Parameters are taken as the query string's strings and checked by adslot.reporting.query, as the CLI's are,
so that every bad value answers the error envelope with the parameter's own name as `field`; their OpenAPI
schemas (types, limits, patterns) are declared here by hand to match.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from litestar import Controller, Request, Response, get
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIHeader, OpenAPIMediaType, OpenAPIType, Schema
from litestar.params import QueryParameter
from litestar.response import Stream

from adslot.api.adapters import env_of
from adslot.api.docs import error_spec
from adslot.api.hot_routes import documented
from adslot.api.management import admin_guard
from adslot.api.reply import JSON
from adslot.environment import Environment
from adslot.reporting import query as q
from adslot.reporting.demand import DROPS, demand_report
from adslot.reporting.formats import (
    delivery_csv,
    delivery_json,
    demand_csv,
    demand_json,
    playlog_csv_header,
    playlog_csv_rows,
    playlog_json,
)
from adslot.reporting.repository import (
    MAX_GROUPS,
    PLAYLOG_BATCH,
    cursor_after,
    delivery_report,
    playlog_page,
    playlog_rows,
)
from adslot.reporting.schemas import DeliveryEnvelope, DemandEnvelope, PlaylogEnvelope

ERRORS = {
    400: error_spec("Invalid parameter; `error.code` and `error.field` say which."),
    401: error_spec("Missing or invalid key."),
    403: error_spec("The key lacks the admin permission."),
}
CSV = "text/csv"  # Litestar adds "; charset=utf-8" to text/* types
CSV_ANSWER = {
    "200": {CSV: OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING, description="RFC 4180 CSV"))}
}
CSV_HEADERS = {
    "200": {
        "Content-Disposition": OpenAPIHeader(
            description="format=csv only: `attachment; filename=...`", schema=Schema(type=OpenAPIType.STRING)
        )
    }
}
IDENTIFIER = {
    "type": OpenAPIType.STRING,
    "min_length": 1,
    "max_length": q.MAX_ID_LENGTH,
    "pattern": r"^[^\x00-\x1f\x7f]*\S[^\x00-\x1f\x7f]*$",
}
EPOCH = {"type": OpenAPIType.INTEGER, "minimum": 0, "maximum": q.MAX_EPOCH}


def param(name: str, description: str, **schema: Any) -> QueryParameter:
    """A query parameter the handler takes as `str | None` and checks itself (adslot.reporting.query),
    documented with the type and limits that check enforces."""
    return QueryParameter(name=name, description=description, schema_extra={"one_of": None, **schema})


def formats(default: str) -> dict[str, Any]:
    return {"type": OpenAPIType.STRING, "enum": list(q.FORMATS), "default": default}


From = Annotated[
    str | None, param("from", "Start of the range, included: UTC epoch seconds of play_time", **EPOCH)
]
To = Annotated[str | None, param("to", "End of the range, excluded: UTC epoch seconds of play_time", **EPOCH)]
Format = Annotated[str | None, param("format", "json (default) or csv", **formats("json"))]
Timezone = Annotated[
    str | None,
    param(
        "timezone",
        "IANA time zone of the day and hour buckets",
        type=OpenAPIType.STRING,
        pattern=q.TIMEZONE_PATTERN,
        max_length=64,
        default="UTC",
    ),
]
ScreenFilter = Annotated[str | None, param("screen_id", "Only this screen's ad requests", **IDENTIFIER)]


def attachment(name: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{name}"'}


DELIVERY_DESCRIPTION = f"""Delivery figures over play times in [from, to) (at most
{q.DELIVERY_MAX_DAYS} days), one row per group and the totals.

**group_by** is a comma list of `campaign`, `creative`, `venue`, `screen` (a screen id is unique only within
its venue, so it groups by venue too), `day` and `hour`; the default is `campaign`. Each row carries the
grouped dimensions (`campaign_id`, `creative_id`, `venue_id`, `screen_id`, `day` as the local date,
`hour` as the local hour's start in ISO 8601 with its UTC offset) and the metrics. Days and hours are those
of **timezone** (IANA, default UTC), DST changes included: a day may have 23 or 25 hours, and the repeated
autumn hour is two rows with different offsets.

Metrics: `requests` (ad requests, filled or not), `fills` (filled ad requests), `fill_rate` (fills /
requests), `plays` (impressions counted), `impressions` (the audience impressions those plays are worth,
3 decimals), `starts`, `first_quartiles`, `midpoints`, `third_quartiles`, `completes`, `completion_rate`
(completes / starts), `late` (fires after expiry, not counted), `duplicates` (repeated fires), `expired`
(expiry passed unplayed, not released), `released` (given back by the player), `invalid` (flagged fires
per rule), and `direct_plays` and `programmatic_plays` (plays of the environment's own campaigns, and of ad
requests a demand partner won: they add up to `plays`). Rates have 4 decimals and are null when their
denominator is 0.

Ad requests a demand partner won have no campaign or creative: grouped by campaign or creative, they are the
row whose `campaign_id` (and `creative_id`) is `"programmatic"`; a `campaign_id` filter leaves them out.

**requests and fill_rate are null** when they cannot be attributed exactly: requests are counted per
venue, screen and UTC hour before any campaign is chosen, so they are null whenever the report is grouped
or filtered by campaign or creative, when `from` or `to` is not a whole UTC hour, and when it is grouped by
day or hour in a time zone whose boundaries are not whole UTC hours (e.g. Asia/Kolkata, +05:30).

format=csv answers a header row (the dimensions, then the metrics, then `invalid` as an `invalid_<rule>`
column each, then `direct_plays` and `programmatic_plays`) and one line per row, without totals.

A report of more than {MAX_GROUPS:,} groups is refused (400 `report_too_large`): shorten the range,
filter, or group by coarser dimensions.

Ad requests older than the server's retention (ADSLOT_RETENTION_DAYS) are kept as 15-minute aggregates:
the figures stay exact for a `from` and `to` on whole quarter hours (a rolled quarter hour counts whole when
it starts within the range)."""

PLAYLOG_DESCRIPTION = f"""One row per played ad request (impression counted) of a venue, optionally one
screen, with play_time in [from, to) (at most {q.PLAYLOG_MAX_DAYS} days), ordered by play_time (then uuid).
Times are UTC epoch seconds; `impressions` is what the play is worth in audience impressions.

**JSON** answers pages of at most `limit` rows (default {q.PLAYLOG_DEFAULT_LIMIT:,}, at most
{q.PLAYLOG_MAX_LIMIT:,}). When more rows follow, `next_cursor` is set: ask again with the same venue_id,
screen_id, from and to and `cursor=<next_cursor>`; it is null on the last page. Paging is by key, so rows
recorded meanwhile never shift a page.

**CSV** streams every row of the range (after `cursor`, when given) in one answer, whatever its length:
a header row, then one line per play; `limit` does not apply.

**Retention**: when the server keeps ad requests for a limited time (ADSLOT_RETENTION_DAYS), plays older
than it are rolled up into the delivery report's aggregates and are no longer listed here."""


DEMAND_DESCRIPTION = f"""What each programmatic demand partner was asked, answered, won and played, one row
per partner and hour with anything to count, and a total per partner.

Asks are counted per UTC hour of the slots' play time, so the rows are UTC hours: an hour (its asks and its
wins alike) counts when it starts within [from, to) (at most {q.DEMAND_MAX_DAYS} days). `hour` is the
hour's start in **timezone** (IANA, default UTC), ISO 8601 with its UTC offset: the local hour in zones
whose offset is a whole number of hours, and the UTC hour's local start (e.g. 05:30) in the others.

Metrics: `requests` (bid requests sent), `bids` (answers with a bid that could compete), `bid_rate`
(bids / requests), `no_bids`, `dropped` (answers of which no bid could compete), `timeouts`, `errors` and
`errors_by_reason`, `drops` (bids or answers dropped, per reason), `skipped_qps` and `skipped_breaker`
(asks skipped, not requests), `lost` (bids that lost the auction), `wins` (ad requests won), `win_rate`
(wins / bids), `plays` (wins whose impression was counted), `spend` (sum over plays of clearing CPM *
impressions per play / 1000), `avg_clearing_cpm` (over wins), `currency` (of spend and prices; null, as
are they, when the wins were in several currencies) and `billed` (wins whose billing notice was sent).
Rates have 4 decimals and are null when their denominator is 0.

format=csv answers a header row and one line per partner and hour, without totals: `errors_by_reason` is
left out, `drops` is a `drop_<reason>` column per reason ({", ".join(DROPS)})."""


class ReportController(Controller):
    path = "/api/v1/reports"
    tags = ("reports",)
    guards = (admin_guard,)
    security = ({"SspKey": []},)

    @get(
        "/delivery",
        operation_id="getDeliveryReport",
        summary="Delivery report: requests, fills, plays, impressions, quartiles, grouped",
        description=DELIVERY_DESCRIPTION,
        responses={
            200: ResponseSpec(
                DeliveryEnvelope,
                generate_examples=False,
                description="The report (JSON, or CSV with format=csv).",
            ),
            **ERRORS,
            422: error_spec("timezone is not an IANA time zone."),
        },
        operation_class=documented(required=("from", "to"), alternatives=CSV_ANSWER, headers=CSV_HEADERS),
    )
    async def delivery(
        self,
        request: Request[Any, Any, Any],
        from_: From = None,
        to: To = None,
        group_by: Annotated[
            str | None,
            param(
                "group_by",
                "Comma list of campaign, creative, venue, screen, day, hour",
                type=OpenAPIType.STRING,
                pattern=q.GROUP_BY_PATTERN,
                max_length=64,
                default="campaign",
            ),
        ] = None,
        timezone: Timezone = None,
        campaign_id: Annotated[
            str | None,
            param(
                "campaign_id",
                "Only this campaign's ad requests",
                type=OpenAPIType.INTEGER,
                minimum=1,
                maximum=q.MAX_ID,
            ),
        ] = None,
        venue_id: Annotated[
            str | None, param("venue_id", "Only this venue's ad requests", **IDENTIFIER)
        ] = None,
        screen_id: ScreenFilter = None,
        fmt: Format = None,
    ) -> Response[bytes]:
        query = q.parse_delivery(
            start=from_,
            end=to,
            group_by=group_by,
            timezone=timezone,
            campaign_id=campaign_id,
            venue_id=venue_id,
            screen_id=screen_id,
            fmt=fmt,
        )
        now = int(time.time())
        report = await env_of(request).run_sync(lambda conn: delivery_report(conn, query, now))
        if query.fmt == "csv":
            name = f"delivery-{query.start}-{query.end}.csv"
            return Response(delivery_csv(report), media_type=CSV, headers=attachment(name))
        return Response(delivery_json(report), media_type=JSON)

    @get(
        "/demand",
        operation_id="getDemandReport",
        summary="Demand report: per partner and hour, requests, bids, wins, plays, spend",
        description=DEMAND_DESCRIPTION,
        responses={
            200: ResponseSpec(
                DemandEnvelope,
                generate_examples=False,
                description="The report (JSON, or CSV with format=csv).",
            ),
            **ERRORS,
            422: error_spec("timezone is not an IANA time zone."),
        },
        operation_class=documented(required=("from", "to"), alternatives=CSV_ANSWER, headers=CSV_HEADERS),
    )
    async def demand(
        self,
        request: Request[Any, Any, Any],
        from_: From = None,
        to: To = None,
        timezone: Timezone = None,
        fmt: Format = None,
    ) -> Response[bytes]:
        query = q.parse_demand(start=from_, end=to, timezone=timezone, fmt=fmt)
        report = await env_of(request).run_sync(lambda conn: demand_report(conn, query))
        if query.fmt == "csv":
            name = f"demand-{query.start}-{query.end}.csv"
            return Response(demand_csv(report), media_type=CSV, headers=attachment(name))
        return Response(demand_json(report), media_type=JSON)

    @get(
        "/playlog",
        operation_id="getPlaylog",
        summary="Play log: one row per played ad request of a venue",
        description=PLAYLOG_DESCRIPTION,
        responses={
            200: ResponseSpec(
                PlaylogEnvelope, generate_examples=False, description="A page (JSON), or every row (CSV)."
            ),
            **ERRORS,
        },
        operation_class=documented(
            required=("venue_id", "from", "to"), alternatives=CSV_ANSWER, headers=CSV_HEADERS
        ),
    )
    async def playlog(
        self,
        request: Request[Any, Any, Any],
        venue_id: Annotated[str | None, param("venue_id", "The venue", **IDENTIFIER)] = None,
        from_: From = None,
        to: To = None,
        screen_id: ScreenFilter = None,
        fmt: Format = None,
        limit: Annotated[
            str | None,
            param(
                "limit",
                "JSON only: most rows per page",
                type=OpenAPIType.INTEGER,
                minimum=1,
                maximum=q.PLAYLOG_MAX_LIMIT,
                default=q.PLAYLOG_DEFAULT_LIMIT,
            ),
        ] = None,
        cursor: Annotated[
            str | None,
            param(
                "cursor",
                "The next_cursor of the previous page",
                type=OpenAPIType.STRING,
                pattern=q.CURSOR_PATTERN,
            ),
        ] = None,
    ) -> Response[Any]:
        query = q.parse_playlog(
            venue_id=venue_id,
            start=from_,
            end=to,
            screen_id=screen_id,
            fmt=fmt,
            limit=limit,
            after=cursor,
        )
        env = env_of(request)
        if query.fmt == "csv":
            name = f"playlog-{query.start}-{query.end}.csv"
            return Stream(stream_playlog(env, query), media_type=CSV, headers=attachment(name))
        page = await env.run_sync(lambda conn: playlog_page(conn, query))
        return Response(playlog_json(page), media_type=JSON)


async def stream_playlog(env: Environment, query: q.PlaylogQuery) -> AsyncIterator[bytes]:
    """The CSV in batches of PLAYLOG_BATCH rows, each read in its own short transaction (no read held open
    for the whole download), so a month of plays never sits in memory at once."""
    yield playlog_csv_header()
    after = query.after
    while True:
        rows = await env.run_sync(
            functools.partial(playlog_rows, query=query, after=after, limit=PLAYLOG_BATCH)
        )
        if rows:
            yield playlog_csv_rows(rows)
        if len(rows) < PLAYLOG_BATCH:
            return
        after = cursor_after(rows[-1])


REPORT_CONTROLLERS: Sequence[type[Controller]] = [ReportController]
