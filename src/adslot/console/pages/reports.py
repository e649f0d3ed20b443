"""The delivery report and the play log: the reporting API's queries as forms, tables, a chart and CSV."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.response import Stream

from adslot.api.reports import CSV, attachment, stream_playlog
from adslot.campaigns import repository as campaigns_repo
from adslot.console import report_table
from adslot.console.figures import DAY
from adslot.console.web import ROOT, EnvName, console_of, render
from adslot.errors import ApiError
from adslot.reporting import query as q
from adslot.reporting.formats import delivery_csv
from adslot.reporting.repository import delivery_report, playlog_page

PLAYLOG_PAGE = 100


def _day_epoch(value: str | None, name: str, default: int) -> str:
    """A date input (YYYY-MM-DD, UTC) as the API's epoch seconds; the API's own check names `name`."""
    if not value:
        return str(default)
    try:
        return str(int(dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC).timestamp()))
    except ValueError:
        raise ApiError(400, "invalid_field", "a date such as 2026-12-04", name) from None


def report_dates(params: Any, now: int) -> tuple[str, str, dict[str, str]]:
    today = now - now % DAY
    start = _day_epoch(params.get("from"), "from", today - 6 * DAY)
    end_day = _day_epoch(params.get("to"), "to", today)
    end = str(int(end_day) + DAY)  # the "to" date is included
    shown = {
        "from": time.strftime("%Y-%m-%d", time.gmtime(int(start))),
        "to": time.strftime("%Y-%m-%d", time.gmtime(int(end) - DAY)),
    }
    return start, end, shown


def _delivery_query(request: Request[Any, Any, Any], now: int) -> tuple[q.DeliveryQuery, dict[str, Any]]:
    params = request.query_params
    group_by = [d for d in q.DIMENSIONS if params.get(f"by_{d}")]
    form: dict[str, Any] = {f"by_{d}": True for d in group_by}
    for name in ("campaign_id", "venue_id", "screen_id", "timezone"):
        form[name] = params.get(name) or ""
    start, end, shown = report_dates(params, now)
    form |= shown
    query = q.parse_delivery(
        start=start,
        end=end,
        group_by=",".join(group_by) or None,
        timezone=form["timezone"] or None,
        campaign_id=form["campaign_id"] or None,
        venue_id=form["venue_id"] or None,
        screen_id=form["screen_id"] or None,
    )
    return query, form


@get(ROOT + "/{env_name:str}/reports", include_in_schema=False)
async def reports(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    now = int(time.time())
    report = None
    error = None
    form: dict[str, Any] = {}
    names: dict[int, str] = {}
    try:
        query, form = _delivery_query(request, now)
        report = await env.run_sync(lambda c: delivery_report(c, query, now))
        if "campaign" in report.group_by:
            found = await env.run_sync(campaigns_repo.list_campaigns)
            names = {c.id: c.name for c in found}
    except ApiError as exc:
        error = exc
        form = dict(request.query_params) | form
    return render(
        request,
        "reports.html",
        env=env,
        title="Reports",
        report=report,
        columns=report_table.columns(report) if report else (),
        cell=lambda row, key: report_table.cell(row, key, names),
        invalid_detail=report_table.invalid_detail,
        invalid_total=report_table.invalid_total,
        csv_only=report_table.CSV_ONLY,
        chart=report_table.chart(report, names) if report else None,
        form=form,
        error=error,
        dimensions=q.DIMENSIONS,
        csv_query=request.url.query,
    )


@get(ROOT + "/{env_name:str}/reports.csv", include_in_schema=False)
async def reports_csv(request: Request[Any, Any, Any], env_name: EnvName) -> Response[bytes]:
    env = console_of(request).env(env_name)
    now = int(time.time())
    query, _ = _delivery_query(request, now)
    report = await env.run_sync(lambda c: delivery_report(c, query, now))
    return Response(
        delivery_csv(report),
        media_type=CSV,
        headers=attachment(f"delivery-{env.name}-{query.start}-{query.end}.csv"),
    )


def _playlog_query(
    request: Request[Any, Any, Any], now: int, fmt: str | None = None
) -> tuple[q.PlaylogQuery, dict[str, Any]]:
    params = request.query_params
    start, end, shown = report_dates(params, now)
    form = {"venue_id": params.get("venue_id") or "", "screen_id": params.get("screen_id") or ""} | shown
    query = q.parse_playlog(
        venue_id=form["venue_id"] or None,
        start=start,
        end=end,
        screen_id=form["screen_id"] or None,
        fmt=fmt,
        limit=str(PLAYLOG_PAGE),
        after=params.get("cursor") or None,
    )
    return query, form


@get(ROOT + "/{env_name:str}/play-log", include_in_schema=False)
async def play_log(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    now = int(time.time())
    page = None
    error = None
    form: dict[str, Any] = dict(request.query_params)
    if request.query_params.get("venue_id") is not None:
        try:
            query, form = _playlog_query(request, now)
            page = await env.run_sync(lambda c: playlog_page(c, query))
        except ApiError as exc:
            error = exc
    else:
        form |= report_dates({}, now)[2]
    venues = sorted(env.catalog.venues) if env.catalog else []
    return render(
        request,
        "play_log.html",
        env=env,
        title="Play log",
        page=page,
        form=form,
        error=error,
        venues=venues[:1000],
        query=urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]),
    )


@get(ROOT + "/{env_name:str}/play-log.csv", include_in_schema=False)
async def play_log_csv(request: Request[Any, Any, Any], env_name: EnvName) -> Stream:
    env = console_of(request).env(env_name)
    query, _ = _playlog_query(request, int(time.time()), fmt="csv")
    name = f"playlog-{env.name}-{query.venue_id}-{query.start}-{query.end}.csv"
    return Stream(stream_playlog(env, query), media_type=CSV, headers=attachment(name))


ROUTES = [reports, reports_csv, play_log, play_log_csv]
