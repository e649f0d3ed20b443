"""The reports' SQL: SQLAlchemy Core that runs unchanged on SQLite and PostgreSQL.

The database does the heavy lifting (filter by the play_time index, GROUP BY, COUNT, SUM); Python only
folds the groups (aggregate.fold). Numbers that shape the SQL itself (time zone offsets, DST change instants,
bucket sizes) are computed here, never taken from the request, and rendered as literals: PostgreSQL only
recognises a GROUP BY expression as the selected one when both are the same text, which separately bound
parameters are not.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.reporting.aggregate import TABLE_COLUMNS, fold, grouped_table_columns
from adslot.reporting.buckets import DAY, HOUR, Segment, offset_at, segments, whole_hours
from adslot.reporting.invalid import invalid_figures
from adslot.reporting.query import DELIVERY_MAX_DAYS, Cursor, DeliveryQuery, PlaylogQuery
from adslot.reporting.schemas import PLAY_COLUMNS, DeliveryReport, PlaylogPage, PlayRow
from adslot.storage.tables import ad_requests, invalid_fires, report_rollups, request_stats

PLAYLOG_BATCH = 5_000
"""Rows per query when a play log is streamed: each batch is its own short read."""
MAX_GROUPS = 200_000
"""Most SQL groups one delivery report may fold (a year by screen and hour could be millions): beyond it the
report is refused with advice, rather than built in memory for minutes."""


def _number(value: int) -> sa.ColumnElement[int]:
    return sa.literal_column(str(int(value)), sa.BigInteger)


def _offset(
    found: list[Segment], at: sa.ColumnElement[int] = ad_requests.c.play_time
) -> sa.ColumnElement[int]:
    """Each row's UTC offset at `at`: one constant, or a CASE over the DST change instants."""
    if len(found) == 1:
        return _number(found[0].offset)
    return sa.case(
        *(
            (at < _number(following.start), _number(segment.offset))
            for segment, following in itertools.pairwise(found)
        ),
        else_=_number(found[-1].offset),
    )


def _bounded(conn: sa.Connection, statement: sa.Select[Any]) -> list[sa.RowMapping]:
    """The statement's groups, or 400 report_too_large when there are more than MAX_GROUPS."""
    rows = list(conn.execute(statement.limit(MAX_GROUPS + 1)).mappings())
    if len(rows) > MAX_GROUPS:
        raise ApiError(
            400,
            "report_too_large",
            f"the report would have more than {MAX_GROUPS:,} groups: shorten from/to, filter by campaign, "
            "venue or screen, or group by fewer or coarser dimensions (day rather than hour)",
            "group_by",
        )
    return rows


def delivery_figures(now: int) -> list[sa.Label[Any]]:
    """What the report sums per group of ad_requests rows, each labelled with its name. Retention rolls old
    rows up with these same expressions into report_rollups, a column per label (rolled_groups sums them
    back): a figure added here needs its column there too."""
    t = ad_requests.c
    played = t.impression_at.is_not(None)
    released = t.settle_reason == "released"
    expired = sa.and_(
        t.impression_at.is_(None),
        t.expires_at < now,
        sa.or_(t.settle_reason.is_(None), t.settle_reason != "released"),
    )
    return [
        sa.func.count().label("fills"),
        sa.func.count(t.impression_at).label("plays"),
        sa.func.sum(sa.case((played, t.impressions))).label("impressions"),
        sa.func.count(t.start_at).label("starts"),
        sa.func.count(t.first_quartile_at).label("first_quartiles"),
        sa.func.count(t.midpoint_at).label("midpoints"),
        sa.func.count(t.third_quartile_at).label("third_quartiles"),
        sa.func.count(t.complete_at).label("completes"),
        sa.func.sum(t.late_count).label("late"),
        sa.func.sum(t.duplicate_count).label("duplicates"),
        sa.func.count(sa.case((expired, 1))).label("expired"),
        sa.func.count(sa.case((released, 1))).label("released"),
    ]


def programmatic_figures() -> list[sa.Label[Any]]:
    """What the report sums per group of ad_requests besides delivery_figures: the plays of programmatic
    ad requests (no campaign: a demand partner won them). Not rolled up as a column of its own: report_rollups
    keeps programmatic ad requests under campaign PROGRAMMATIC, which rolled_groups counts them by."""
    t = ad_requests.c
    programmatic_play = sa.and_(t.campaign_id.is_(None), t.impression_at.is_not(None))
    return [sa.func.count(sa.case((programmatic_play, 1))).label("programmatic_plays")]


def _bare(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    return column.element if isinstance(column, sa.Label) else column


def _keyed(columns: sa.ColumnCollection[str, sa.Column[Any]]) -> dict[str, sa.ColumnElement[Any]]:
    """The table columns (TABLE_COLUMNS) a report groups and filters by."""
    return {name: columns[name] for name in TABLE_COLUMNS}


def _grouped(
    conn: sa.Connection,
    query: DeliveryQuery,
    found: list[Segment],
    columns: Mapping[str, sa.ColumnElement[Any]],
    at: sa.ColumnElement[int],
    figures: list[sa.Label[Any]],
    source: sa.FromClause | None = None,
) -> list[dict[str, Any]]:
    """Rows grouped by the report's table columns (of `columns`) and, when grouped by time, the local
    wall-clock hour or day of `at` (`wall`, UTC epoch seconds of the wall clock read as UTC) with its
    `utc_offset`; each of `figures` per group. The report's filters apply to `columns`, its period to `at`."""
    keys: list[sa.ColumnElement[Any]] = [columns[name] for name in grouped_table_columns(query.group_by)]
    size = HOUR if "hour" in query.group_by else DAY
    offset = _offset(found, at)
    varying = len(found) > 1
    if query.by_time:
        # One day added keeps the wall clock positive, so % floors alike in every database.
        wall = at + offset + _number(DAY)
        keys.append((wall - wall % _number(size)).label("wall"))
        if varying:
            keys.append(offset.label("utc_offset"))
    statement = sa.select(*keys, *figures)
    if source is not None:
        statement = statement.select_from(source)
    statement = statement.where(at >= query.start, at < query.end).group_by(*(_bare(key) for key in keys))
    if query.campaign_id is not None:
        statement = statement.where(_bare(columns["campaign_id"]) == query.campaign_id)
    if query.venue_id is not None:
        statement = statement.where(_bare(columns["venue_id"]) == query.venue_id)
    if query.screen_id is not None:
        statement = statement.where(_bare(columns["screen_id"]) == query.screen_id)
    groups = []
    for row in _bounded(conn, statement):
        group = {str(name): value for name, value in row.items()}
        if query.by_time:
            group["wall"] = int(group["wall"]) - DAY
            if not varying:
                group["utc_offset"] = found[0].offset
        groups.append(group)
    return groups


def delivery_groups(
    conn: sa.Connection, query: DeliveryQuery, found: list[Segment], now: int
) -> list[dict[str, Any]]:
    """ad_requests grouped as the report asks (_grouped), by their play_time."""
    t = ad_requests.c
    figures = delivery_figures(now) + programmatic_figures()
    return _grouped(conn, query, found, _keyed(t), t.play_time, figures)


def invalid_groups(conn: sa.Connection, query: DeliveryQuery, found: list[Segment]) -> list[dict[str, Any]]:
    """The fires the invalid-traffic rules flagged (invalid_fires), counted per reason (invalid_<reason>,
    reporting/invalid.py) in the groups delivery_groups makes of their ad requests."""
    t = ad_requests.c
    source = invalid_fires.join(ad_requests, invalid_fires.c.ad_request_id == t.id)
    return _grouped(conn, query, found, _keyed(t), t.play_time, invalid_figures(), source)


ROLLUP_KEYS = frozenset({"bucket", *TABLE_COLUMNS})
PROGRAMMATIC = 0
"""report_rollups' campaign_id and creative_id of programmatic ad requests (null in ad_requests): a key
column cannot be null, and no campaign or creative has id 0."""


def rolled_groups(conn: sa.Connection, query: DeliveryQuery, found: list[Segment]) -> list[dict[str, Any]]:
    """report_rollups (ad requests past the retention, rolled up per 15-minute bucket) grouped as
    delivery_groups groups ad_requests, with each of its figure columns summed under its name (those of
    delivery_figures, and invalid_<reason>), and the plays of campaign PROGRAMMATIC as programmatic_plays,
    whose campaign and creative are null again. A bucket counts when it starts within [from, to): exact when
    from and to are whole quarter hours, as every local hour and day is."""
    r = report_rollups.c
    figures = [sa.func.sum(c).label(c.name) for c in report_rollups.columns if c.name not in ROLLUP_KEYS]
    programmatic = r.campaign_id == _number(PROGRAMMATIC)
    figures.append(
        sa.func.sum(sa.case((programmatic, r.plays), else_=_number(0))).label("programmatic_plays")
    )
    columns = _keyed(r)
    for name in ("campaign_id", "creative_id"):
        columns[name] = sa.func.nullif(r[name], _number(PROGRAMMATIC)).label(name)
    return _grouped(conn, query, found, columns, r.bucket, figures)


def request_groups(conn: sa.Connection, query: DeliveryQuery, found: list[Segment]) -> list[dict[str, Any]]:
    """request_stats summed per venue and screen (as grouped) and, when grouped by time, per UTC hour,
    each hour then placed on the local wall clock (whole hours only: see aggregate.requests_attributable)."""
    t = request_stats.c
    keys: list[sa.ColumnElement[Any]] = [
        t[name] for name in grouped_table_columns(query.group_by) if name in ("venue_id", "screen_id")
    ]
    if query.by_time:
        keys.append(t.hour)
    statement = (
        sa.select(*keys, sa.func.sum(t.requests).label("requests"))
        .where(t.hour >= query.start, t.hour < query.end)
        .group_by(*keys)
    )
    if query.venue_id is not None:
        statement = statement.where(t.venue_id == query.venue_id)
    if query.screen_id is not None:
        statement = statement.where(t.screen_id == query.screen_id)
    size = HOUR if "hour" in query.group_by else DAY
    groups = []
    for row in _bounded(conn, statement):
        group = {str(name): value for name, value in row.items()}
        if query.by_time:
            offset = offset_at(found, int(group["hour"]))
            wall = int(group["hour"]) + offset
            group |= {"wall": wall - wall % size, "utc_offset": offset}
        groups.append(group)
    return groups


def requests_attributable(query: DeliveryQuery, found: list[Segment]) -> bool:
    """request_stats counts requests per venue, screen and UTC hour, before a campaign is chosen: they fit a
    report only when it is not split or filtered by campaign or creative, and every boundary it needs (from,
    to, each local day or hour) is a whole UTC hour."""
    return not query.requests_by_campaign and whole_hours(found, query.start, query.end)


def windows(start: int, end: int, days: int = DELIVERY_MAX_DAYS) -> Iterator[tuple[int, int]]:
    """[start, end) cut into consecutive ranges of at most `days` days: the longest the API reads at once."""
    size = days * DAY
    for first in range(start, end, size):
        yield first, min(first + size, end)


def delivery_report(conn: sa.Connection, query: DeliveryQuery, now: int) -> DeliveryReport:
    """The delivery report; `now` decides which unplayed ad requests have expired.

    A range longer than DELIVERY_MAX_DAYS (the console's whole flights; the API refuses one) is read window
    by window and folded as one: a row that spans two windows (a local day) sums its groups from both."""
    delivery: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] | None = []
    for start, end in windows(query.start, query.end):
        part = dataclasses.replace(query, start=start, end=end)
        found = segments(part.zone, start, end) if part.by_time else [Segment(start, 0)]
        delivery += delivery_groups(conn, part, found, now) + rolled_groups(conn, part, found)
        delivery += invalid_groups(conn, part, found)
        if requests is not None and requests_attributable(part, found):
            requests += request_groups(conn, part, found)
        else:
            requests = None
    return fold(query, delivery, requests)


def playlog_rows(conn: sa.Connection, query: PlaylogQuery, after: Cursor | None, limit: int) -> list[PlayRow]:
    """Up to `limit` played ad requests of the venue (and screen), by (play_time, id), after the cursor."""
    t = ad_requests.c
    lower = query.start if after is None else max(query.start, after.play_time)
    statement = (
        sa.select(*(t.id.label(name) if name == "ad_request_uuid" else t[name] for name in PLAY_COLUMNS))
        .where(
            t.venue_id == query.venue_id,
            t.play_time >= lower,
            t.play_time < query.end,
            t.impression_at.is_not(None),
        )
        .order_by(t.play_time, t.id)
        .limit(limit)
    )
    if query.screen_id is not None:
        statement = statement.where(t.screen_id == query.screen_id)
    if after is not None:
        statement = statement.where(
            sa.or_(t.play_time > after.play_time, sa.and_(t.play_time == after.play_time, t.id > after.id))
        )
    rows = []
    for row in conn.execute(statement).mappings():
        values = {str(name): value for name, value in row.items()}
        values["ad_request_uuid"] = str(values["ad_request_uuid"])
        values["impressions"] = float(values["impressions"])
        rows.append(PlayRow(**values))
    return rows


def cursor_after(row: PlayRow) -> Cursor:
    return Cursor(row.play_time, uuid.UUID(row.ad_request_uuid))


def playlog_page(conn: sa.Connection, query: PlaylogQuery) -> PlaylogPage:
    """One JSON page: up to query.limit rows, and the cursor of the next page when there are more."""
    rows = playlog_rows(conn, query, query.after, query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    return PlaylogPage(
        venue_id=query.venue_id,
        screen_id=query.screen_id,
        from_=query.start,
        to=query.end,
        rows=rows,
        next_cursor=cursor_after(rows[-1]).encode() if more else None,
    )


def playlog_batches(conn: sa.Connection, query: PlaylogQuery) -> Iterator[list[PlayRow]]:
    """Every played row from the cursor on, PLAYLOG_BATCH rows per query (the CLI's export)."""
    after = query.after
    while True:
        rows = playlog_rows(conn, query, after, PLAYLOG_BATCH)
        if rows:
            yield rows
        if len(rows) < PLAYLOG_BATCH:
            return
        after = cursor_after(rows[-1])
