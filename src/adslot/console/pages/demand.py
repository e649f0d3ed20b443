"""Programmatic demand: the partner registry, the creative approval queue and the demand report, through the
repositories and audit actions the management and reporting APIs use, so the console and the API agree."""

from __future__ import annotations

import time
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.params import PathParameter
from litestar.response import Redirect

from adslot.api.reports import CSV, attachment
from adslot.console.forms import Form, decode, drop_none, number, text, words
from adslot.console.pages.reports import report_dates
from adslot.console.roles import TRAFFIC
from adslot.console.web import ROOT, EnvName, RowId, actor, change, console_of, form_fields, need, render
from adslot.demand import creatives_repository as creatives_repo
from adslot.demand import repository as demand_repo
from adslot.demand.creatives import CREATIVE_STATUSES, CreativeStatus
from adslot.demand.notice_rules import NOTICE_FAULTS
from adslot.demand.partners import DEFAULT_CURRENCY, DEFAULT_TIMEOUT_MS, PartnerIn, PartnerPatch
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.reporting import query as q
from adslot.reporting.demand import demand_report
from adslot.reporting.formats import demand_csv
from adslot.vast.headers import NO_SCRIPT_HEADERS

BASE = ROOT + "/{env_name:str}/demand"
PartnerName = Annotated[str, PathParameter(max_length=64)]
PREVIEW_HEADERS = dict(NO_SCRIPT_HEADERS)
"""The markup is the buyer's, not adslot's: never sniffed, never run as a page of the console's (as the
API's preview)."""
REPORT_COLUMNS = (
    ("requests", "Requests"),
    ("bids", "Bids"),
    ("bid_rate", "Bid rate"),
    ("no_bids", "No bids"),
    ("dropped", "Dropped"),
    ("timeouts", "Timeouts"),
    ("errors", "Errors"),
    ("skipped_qps", "Skipped (QPS)"),
    ("skipped_breaker", "Skipped (breaker)"),
    ("lost", "Lost"),
    ("wins", "Wins"),
    ("win_rate", "Win rate"),
    ("plays", "Plays"),
    ("spend", "Spend"),
    ("avg_clearing_cpm", "Avg clearing CPM"),
    ("currency", "Currency"),
    ("billed", "Billed"),
    ("notices_dropped", "Notices dropped"),
)


def partner_body(form: Form) -> dict[str, Any]:
    """The API's PartnerIn body: a blank field is the API's default, an unticked box is false."""
    return drop_none(
        {
            "name": text(form, "name"),
            "endpoint": text(form, "endpoint"),
            "timeout_ms": number(form, "timeout_ms"),
            "floor_cpm": number(form, "floor_cpm"),
            "currency": text(form, "currency"),
            "auction": text(form, "auction"),
            "max_qps": number(form, "max_qps"),
            "venues": words(form, "venues"),
            "auto_approve": form.get("auto_approve") == "on",
            "status": text(form, "status"),
            "notice_hosts": words(form, "notice_hosts"),
            "auth_header": _auth_header(form),
        }
    )


def _auth_header(form: Form) -> dict[str, str] | None:
    """The credential header typed, or None when its name is blank (a value alone is an error: name it)."""
    name, value = text(form, "auth_header_name"), form.get("auth_header_value", "")
    if name is None and not value:
        return None
    return {"name": name or "", "value": value}


def _shown_form(form: Form) -> dict[str, Any]:
    """The form as it is shown again after a refusal: never with a credential in the page, neither the
    header's value nor the user info of an endpoint (refused for it)."""
    shown: dict[str, Any] = {name: value for name, value in form.items() if name != "auth_header_value"}
    endpoint = shown.get("endpoint")
    if isinstance(endpoint, str) and "@" in endpoint:
        scheme, sep, rest = endpoint.partition("://")
        if not sep:
            scheme, rest = "", endpoint
        authority, slash, path = rest.partition("/")
        shown["endpoint"] = scheme + sep + authority.rpartition("@")[2] + slash + path
    return shown


NEW_PARTNER = {
    "timeout_ms": DEFAULT_TIMEOUT_MS,
    "floor_cpm": 0,
    "currency": DEFAULT_CURRENCY,
    "auction": "first",
    "status": "active",
}


def _partners_link(env: Environment) -> str:
    return f"{ROOT}/{env.name}/demand"


async def _partners_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    error: ApiError | None = None,
    form: dict[str, Any] | None = None,
) -> Response[str]:
    found = await env.run_sync(demand_repo.list_partners)
    return render(
        request,
        "demand_partners.html",
        env=env,
        title="Demand partners",
        tab="partners",
        partners=found,
        error=error,
        adding=form is not None,
        form=form or NEW_PARTNER,
    )


@get(BASE, include_in_schema=False)
async def partner_list(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    return await _partners_page(request, console_of(request).env(env_name))


@post(BASE + "/partners", include_in_schema=False)
async def partner_create(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    try:
        data = decode(partner_body(form), PartnerIn)
        await change(
            request,
            env,
            "demand_partner.create",
            f"demand partner {data.name}",
            lambda c: demand_repo.create_partner(c, data),
        )
    except ApiError as error:
        return await _partners_page(request, env, error=error, form=_shown_form(form))
    return Redirect(_partners_link(env), status_code=303)


@post(BASE + "/partners/{name:str}/status", include_in_schema=False)
async def partner_status(
    request: Request[Any, Any, Any], env_name: EnvName, name: PartnerName
) -> Response[Any]:
    """Pause or resume: a PATCH of `status`, audited as the API's update is."""
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    try:
        patch = decode({"status": (await form_fields(request)).get("status")}, PartnerPatch)
        await change(
            request,
            env,
            "demand_partner.update",
            f"demand partner {name}",
            lambda c: demand_repo.update_partner(c, name, patch),
            before=lambda c: demand_repo.get_partner(c, name),
        )
    except ApiError as error:
        return await _partners_page(request, env, error=error)
    return Redirect(_partners_link(env), status_code=303)


@post(BASE + "/partners/{name:str}/remove", include_in_schema=False)
async def partner_remove(
    request: Request[Any, Any, Any], env_name: EnvName, name: PartnerName
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)

    def remove(conn: Any) -> None:  # None: the audit entry of a deletion has no `after`, as the API's
        demand_repo.remove_partner(conn, name)

    try:
        await change(
            request,
            env,
            "demand_partner.delete",
            f"demand partner {name}",
            remove,
            before=lambda c: demand_repo.get_partner(c, name),
        )
    except ApiError as error:
        return await _partners_page(request, env, error=error)
    return Redirect(_partners_link(env), status_code=303)


def _status_filter(raw: str | None) -> CreativeStatus | None:
    """The queue's filter: pending unless asked otherwise; `all` for every status."""
    if raw == "all":
        return None
    for status in CREATIVE_STATUSES:
        if raw == status:
            return status
    return "pending"


async def _creatives_page(
    request: Request[Any, Any, Any], env: Environment, *, error: ApiError | None = None
) -> Response[str]:
    status = _status_filter(request.query_params.get("status"))
    found = await env.run_sync(lambda c: creatives_repo.list_creatives(c, status, base_url=env.base_url))
    return render(
        request,
        "demand_creatives.html",
        env=env,
        title="Demand creatives",
        tab="creatives",
        creatives=found,
        queue_status=status or "all",
        statuses=(*CREATIVE_STATUSES, "all"),
        error=error,
    )


@get(BASE + "/creatives", include_in_schema=False)
async def creative_list(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    return await _creatives_page(request, console_of(request).env(env_name))


@get(BASE + "/creatives/{creative_id:int}/preview", include_in_schema=False)
async def creative_preview(
    request: Request[Any, Any, Any], env_name: EnvName, creative_id: RowId
) -> Response[bytes]:
    """The stored VAST, for a signed-in user: the API's preview needs an admin key a browser does not hold."""
    env = console_of(request).env(env_name)
    adm = await env.run_sync(lambda c: creatives_repo.markup(c, creative_id))
    return Response(adm.encode(), media_type="text/xml; charset=utf-8", headers=PREVIEW_HEADERS)


async def _decide(
    request: Request[Any, Any, Any], env_name: str, creative_id: int, decision: str
) -> Response[Any]:
    """Approve or reject as the API does, the user's email as who decided; back to the queue as filtered."""
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    who = actor(request)
    decide = creatives_repo.approve if decision == "approve" else creatives_repo.reject
    try:
        await change(
            request,
            env,
            f"demand_creative.{decision}",
            f"demand creative {creative_id}",
            lambda c: decide(c, creative_id, who, base_url=env.base_url),
            before=lambda c: creatives_repo.get_creative(c, creative_id, base_url=env.base_url),
        )
    except ApiError as error:
        return await _creatives_page(request, env, error=error)
    back = request.query_params.get("status")
    return Redirect(
        f"{ROOT}/{env.name}/demand/creatives"
        + (f"?status={back}" if back in (*CREATIVE_STATUSES, "all") else ""),
        status_code=303,
    )


@post(BASE + "/creatives/{creative_id:int}/approve", include_in_schema=False)
async def creative_approve(
    request: Request[Any, Any, Any], env_name: EnvName, creative_id: RowId
) -> Response[Any]:
    return await _decide(request, env_name, creative_id, "approve")


@post(BASE + "/creatives/{creative_id:int}/reject", include_in_schema=False)
async def creative_reject(
    request: Request[Any, Any, Any], env_name: EnvName, creative_id: RowId
) -> Response[Any]:
    return await _decide(request, env_name, creative_id, "reject")


def _demand_query(request: Request[Any, Any, Any], now: int) -> tuple[q.DemandQuery, dict[str, Any]]:
    """The reporting API's query from the form: dates (UTC, `to` included, as the delivery report page) and
    a time zone for the hours' labels."""
    params = request.query_params
    form: dict[str, Any] = {"timezone": params.get("timezone") or ""}
    start, end, shown = report_dates(params, now)
    form |= shown
    return q.parse_demand(start=start, end=end, timezone=form["timezone"] or None), form


@get(BASE + "/report", include_in_schema=False)
async def report(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    found = None
    error = None
    form: dict[str, Any] = {}
    try:
        query, form = _demand_query(request, int(time.time()))
        found = await env.run_sync(lambda c: demand_report(c, query))
    except ApiError as exc:
        error = exc
        form = dict(request.query_params) | form
    return render(
        request,
        "demand_report.html",
        env=env,
        title="Demand report",
        tab="report",
        report=found,
        columns=REPORT_COLUMNS,
        notice_reasons=NOTICE_FAULTS,
        form=form,
        error=error,
        csv_query=request.url.query,
    )


@get(BASE + "/report.csv", include_in_schema=False)
async def report_csv(request: Request[Any, Any, Any], env_name: EnvName) -> Response[bytes]:
    env = console_of(request).env(env_name)
    query, _ = _demand_query(request, int(time.time()))
    found = await env.run_sync(lambda c: demand_report(c, query))
    return Response(
        demand_csv(found),
        media_type=CSV,
        headers=attachment(f"demand-{env.name}-{query.start}-{query.end}.csv"),
    )


ROUTES = [
    partner_list,
    partner_create,
    partner_status,
    partner_remove,
    creative_list,
    creative_preview,
    creative_approve,
    creative_reject,
    report,
    report_csv,
]
