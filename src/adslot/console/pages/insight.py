"""Health (each integration's go-live criteria) and Forecast (a campaign simulated before it is sold)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import multiprocessing
import time
import weakref
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio.to_thread
import msgspec
from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.params import PathParameter
from litestar.response import Redirect

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import DAYS, CampaignIn, CreativeIn
from adslot.console.charts import Series, line_chart
from adslot.console.figures import DAY, hour_floor
from adslot.console.forecast_jobs import Cancelled, Job, JobError, Jobs
from adslot.console.forms import decode, digits, number, row_id, text, utc_input
from adslot.console.pages.campaigns import CAP_ROWS, DAYPART_ROWS, RULE_SETS, campaign_body
from adslot.console.web import CSRF_FIELD, ROOT, EnvName, console_of, form_fields, render
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ledger.ivt import HINTS
from adslot.reporting import health
from adslot.settings import EnvironmentSettings
from adslot.simulation.forecast import (
    MAX_HOURS,
    ExistingCampaign,
    ForecastReport,
    NewCampaign,
    Proposal,
    forecast,
)
from adslot.storage.database import make_engine, read_transaction

log = logging.getLogger(__name__)
JobId = Annotated[str, PathParameter(description="a forecast job's id")]

CRITERIA_LABELS = {
    health.FILL: "Ad requests answered with a VAST",
    health.PLAYED: "Ads played",
    health.POP_ON_TIME: "PoPs within 60 minutes of play",
    health.QUARTILES: "Plays with all five quartile events",
    health.VOLUME: "Last hour's requests against its hourly average",
}


@get(ROOT + "/{env_name:str}/health", include_in_schema=False)
async def health_page(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    now = int(time.time())
    found = await env.run_sync(lambda c: health.integration_health(c, now))
    return render(
        request,
        "health.html",
        env=env,
        title="Integration health",
        integrations=found,
        labels=CRITERIA_LABELS,
        days=health.DEFAULT_DAYS,
        min_sample=health.MIN_SAMPLE,
        min_hours=health.VOLUME_MIN_HOURS,
        hints=HINTS,
    )


def _forecast_defaults() -> dict[str, Any]:
    now = hour_floor(int(time.time())) + 3600
    return {
        "start_at": utc_input(now),
        "end_at": utc_input(now + 7 * DAY),
        "tier": "standard",
        "weight": 100,
        "timezone": "UTC",
        "pacing": "asap",
        "status": "active",
        "separation_minutes": 0,
        "creative.width": 1920,
        "creative.height": 1080,
        "creative.duration_seconds": 15,
        "creative.mime_type": "video/mp4",
        "hours": 7 * 24,
        "slot_seconds": 300,
    }


async def _page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    form: dict[str, Any],
    report: ForecastReport | None = None,
    error: ApiError | None = None,
    job: tuple[str, Job] | None = None,
) -> Response[str]:
    advertisers = await env.run_sync(campaigns_repo.list_advertisers)
    found = await env.run_sync(campaigns_repo.list_campaigns)
    chart = None
    partial: dict[str, int] = {}
    if report is not None and report.days:
        if report.campaign_id is not None:
            picked = next((c for c in found if c.id == report.campaign_id), None)
            timezone = picked.timezone if picked else "UTC"
        else:
            timezone = form.get("timezone") or "UTC"
        covered = hours_by_day(timezone, report.start, report.start + report.hours * 3600)
        partial = {d: h for d, h in covered.items() if h < 24}
        chart = line_chart(
            [day_label(d.date, partial.get(d.date)) for d in report.days],
            [
                Series("targeted slots", [float(d.slots) for d in report.days]),
                Series("expected plays", [float(d.plays) for d in report.days]),
            ],
            title="Targeted slots and expected plays by day",
            partial={i for i, d in enumerate(report.days) if d.date in partial},
        )
    return render(
        request,
        "forecast.html",
        env=env,
        title="Forecast",
        form=form,
        report=report,
        error=error,
        chart=chart,
        partial_days=partial,
        campaigns=found,
        advertiser_options=[(a.id, a.name) for a in advertisers],
        days=DAYS,
        daypart_rows=range(DAYPART_ROWS),
        cap_rows=range(CAP_ROWS),
        rule_sets=RULE_SETS,
        campaign=None,
        max_hours=MAX_HOURS,
        job=job,
        jobs=_jobs(env).recent(),
        headers={"refresh": "1"} if job is not None and job[1].state == "running" else None,
    )


def hours_by_day(timezone: str, start: int, end: int) -> dict[str, int]:
    """The hours of [start, end) on each local date: fewer than 24 (a DST day aside) is a day the window
    cuts, whose figures are not comparable with a whole day's."""
    try:
        zone: dt.tzinfo = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    hours: Counter[str] = Counter()
    for at in range(start - start % 3600, end, 3600):
        hours[dt.datetime.fromtimestamp(at, zone).date().isoformat()] += 1
    return dict(hours)


def day_label(date: str, hours: int | None) -> str:
    day = dt.date.fromisoformat(date)
    return f"{day:%a} {day.day} {day:%b}" + (f" ({hours} h)" if hours is not None else "")


@get(ROOT + "/{env_name:str}/forecast", include_in_schema=False)
async def forecast_form(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    return await _page(request, env, form=_forecast_defaults())


def _proposal(form: dict[str, str]) -> Proposal:
    picked = text(form, "campaign_id")
    if picked is not None:
        return ExistingCampaign(row_id(picked, "campaign_id", "pick a campaign"))
    campaign = decode(campaign_body(form), CampaignIn)
    creative = {
        "name": "forecast creative",
        "media_url": "/media/forecast.mp4",
        "mime_type": text(form, "creative.mime_type"),
        "width": number(form, "creative.width"),
        "height": number(form, "creative.height"),
        "duration_seconds": number(form, "creative.duration_seconds"),
    }
    try:
        made = decode({k: v for k, v in creative.items() if v is not None}, CreativeIn)
    except ApiError as exc:
        raise ApiError(exc.status, exc.code, exc.message, f"creative.{exc.field}") from exc
    return NewCampaign(campaign, [made])


FORECASTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)
"""One forecast at a time per worker (per event loop): each takes a core for seconds to minutes."""
RUNNING: set[asyncio.Task[None]] = set()
"""The jobs this worker runs, kept referenced until they end."""


def _jobs(env: Environment) -> Jobs:
    return Jobs(env.settings.data_dir / "forecasts" / "jobs")


def _run(
    config: EnvironmentSettings,
    proposal: Proposal,
    data_dir: Path,
    hours: int | None,
    slot_seconds: int,
    jobs: Jobs,
    job_id: str,
) -> None:
    engine = make_engine(config)

    def run(progress: Callable[[float], None]) -> ForecastReport:
        with read_transaction(engine) as conn:
            return forecast(
                conn, proposal, data_dir=data_dir, hours=hours, slot_seconds=slot_seconds, progress=progress
            )

    try:
        jobs.finish(job_id, run)
    finally:
        engine.dispose()


def in_child_process(
    config: EnvironmentSettings,
    proposal: Proposal,
    data_dir: Path,
    hours: int | None,
    slot_seconds: int,
    jobs: Jobs,
    job_id: str,
) -> None:
    """The forecast in a process of its own: it is CPU-bound for up to minutes, and in a worker's thread it
    would hold the interpreter lock the worker's ad requests and pixels need. It writes its progress and its
    end to the job's file."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(_run, config, proposal, data_dir, hours, slot_seconds, jobs, job_id).result()


async def _in_background(env: Environment, jobs: Jobs, job_id: str, run: Callable[[], None]) -> None:
    try:
        async with FORECASTS.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(1)):
            if jobs.cancelled(job_id):
                jobs.finish(job_id, _cancelled)
                return
            await anyio.to_thread.run_sync(run)
    except Exception as exc:  # the child died: say so on the job rather than leave it running forever
        log.exception("console: forecast job %s failed", job_id)
        job = jobs.read(job_id)
        if job is not None and job.state == "running":
            error = JobError(500, "forecast_failed", f"the forecast stopped: {type(exc).__name__}")
            jobs.write(job_id, msgspec.structs.replace(job, state="failed", error=error))


def _cancelled(progress: Callable[[float], None]) -> ForecastReport:
    progress(0.0)
    raise Cancelled("cancelled before it started")


@post(ROOT + "/{env_name:str}/forecast", include_in_schema=False)
async def forecast_run(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    """A forecast reads and never writes: any role may run one. It runs as a job: the answer is the job's
    page, which shows its progress until the result."""
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    data_dir = env.settings.data_dir / "forecasts"
    try:
        proposal = _proposal(form)
        hours_text = text(form, "hours")
        slot_text = text(form, "slot_seconds")
        if hours_text is not None and not digits(hours_text):
            raise ApiError(400, "invalid_field", f"hours must be 1 to {MAX_HOURS}", "hours")
        if slot_text is not None and not digits(slot_text):
            raise ApiError(
                400, "invalid_field", "slot_seconds must be a whole number of seconds", "slot_seconds"
            )
        hours = int(hours_text) if hours_text and len(hours_text) < 7 else None
        slot_seconds = int(slot_text) if slot_text and len(slot_text) < 7 else 300
    except ApiError as error:
        return await _page(request, env, form=_forecast_defaults() | form, error=error)
    jobs = _jobs(env)
    kept = {k: v for k, v in form.items() if k != CSRF_FIELD}
    job_id = jobs.create(kept)
    config = env.config
    task = asyncio.create_task(
        _in_background(
            env,
            jobs,
            job_id,
            lambda: in_child_process(config, proposal, data_dir, hours, slot_seconds, jobs, job_id),
        )
    )
    RUNNING.add(task)
    task.add_done_callback(RUNNING.discard)
    return Redirect(f"{ROOT}/{env.name}/forecast/jobs/{job_id}", status_code=303)


def _job_of(env: Environment, job_id: str) -> tuple[Jobs, Job]:
    jobs = _jobs(env)
    job = jobs.read(job_id)
    if job is None:
        raise NotFoundException("no such forecast")
    return jobs, job


@get(ROOT + "/{env_name:str}/forecast/jobs/{job_id:str}", include_in_schema=False)
async def forecast_job(request: Request[Any, Any, Any], env_name: EnvName, job_id: JobId) -> Response[str]:
    """A forecast job: its progress while it runs (the page reloads itself every second), then its result
    beside the form it was asked with; the page can be left and come back to."""
    env = console_of(request).env(env_name)
    _, job = _job_of(env, job_id)
    form = _forecast_defaults() | job.form
    error = job.error.as_api_error() if job.error is not None else None
    return await _page(request, env, form=form, report=job.report, error=error, job=(job_id, job))


@post(ROOT + "/{env_name:str}/forecast/jobs/{job_id:str}/cancel", include_in_schema=False)
async def forecast_cancel(request: Request[Any, Any, Any], env_name: EnvName, job_id: JobId) -> Response[Any]:
    env = console_of(request).env(env_name)
    jobs, _ = _job_of(env, job_id)
    jobs.cancel(job_id)
    return Redirect(f"{ROOT}/{env.name}/forecast/jobs/{job_id}", status_code=303)


ROUTES = [health_page, forecast_form, forecast_run, forecast_job, forecast_cancel]
