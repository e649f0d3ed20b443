"""Share links: an admin or trafficker makes and revokes them on a campaign's page; anyone with a live
link opens its proof-of-play report (and CSV) without signing in (web.before_request lets SHARED through)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.params import PathParameter
from litestar.response import Redirect, Stream

from adslot.campaigns import repository as campaigns_repo
from adslot.console import share_links
from adslot.console.figures import DAY
from adslot.console.forms import digits, number, text
from adslot.console.pages.campaigns import campaign_page
from adslot.console.pages.proof import csv_report, plays_csv, proof_csv, proof_page, read_proof, utc_day
from adslot.console.roles import TRAFFIC
from adslot.console.web import ROOT, SHARED, EnvName, RowId, actor, change, console_of, form_fields, need
from adslot.errors import ApiError

BASE = ROOT + "/{env_name:str}/campaigns/{campaign_id:int}/share-links"
Token = Annotated[str, PathParameter(max_length=share_links.MAX_TOKEN)]
GONE = "This report link is unknown, has expired or was revoked: ask whoever sent it for a new one."


def link_url(request: Request[Any, Any, Any], env_name: str, token: str) -> str:
    return console_of(request).production.base_url + share_links.link_path(env_name, token)


@post(BASE, include_in_schema=False)
async def share_link_create(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    form = await form_fields(request)
    now = int(time.time())
    who = actor(request)
    try:
        typed = number(form, "days")
        if typed is not None and not (digits(typed) and len(typed) <= 4):
            raise ApiError(400, "invalid_field", "a whole number of days", "days")
        days = None if typed is None else int(typed)
        first, last = text(form, "from"), text(form, "to")
        start = utc_day(first, "from") if first else None
        end = utc_day(last, "to") + DAY if last else None
        token, _ = await change(
            request,
            env,
            "share-link.create",
            f"campaign {campaign_id} share link",
            lambda c: share_links.create_link(
                c, campaign_id, actor=who, now=now, days=days, label=text(form, "label"), start=start, end=end
            ),
            after=lambda made: made[1],
            catalog=False,
        )
    except ApiError as error:
        return await campaign_page(request, env, campaign_id, share_form=form, share_error=error)
    return await campaign_page(request, env, campaign_id, new_link=link_url(request, env.name, token))


@post(BASE + "/{link_id:int}/revoke", include_in_schema=False)
async def share_link_revoke(
    request: Request[Any, Any, Any], env_name: EnvName, campaign_id: RowId, link_id: RowId
) -> Response[Any]:
    need(request, TRAFFIC)
    env = console_of(request).env(env_name)
    now = int(time.time())

    def revoke(conn: Any) -> share_links.ShareLink:
        found = share_links.get_link(conn, link_id)
        if found is None or found.campaign_id != campaign_id:
            raise ApiError(404, "unknown_share_link", f"no share link {link_id}", "link_id")
        return share_links.revoke_link(conn, link_id, now)

    await change(
        request,
        env,
        "share-link.revoke",
        f"campaign {campaign_id} share link {link_id}",
        revoke,
        before=lambda c: share_links.get_link(c, link_id),
        catalog=False,
    )
    return Redirect(f"{ROOT}/{env.name}/campaigns/{campaign_id}", status_code=303)


@get(SHARED + "/{env_name:str}/{token:str}", include_in_schema=False)
async def shared_report(request: Request[Any, Any, Any], env_name: EnvName, token: Token) -> Response[str]:
    """The report of a live link, its opening counted; 404 for any other token."""
    env = console_of(request).env(env_name)
    now = int(time.time())
    link = await env.run_sync(lambda c: share_links.open_link(c, token, now), write=True, catalog=False)
    if link is None:
        raise NotFoundException(GONE)

    def read(conn: Any) -> Any:
        campaign = campaigns_repo.get_campaign(conn, link.campaign_id)
        return read_proof(conn, campaign, link.period_start, link.period_end, now)

    found = await env.run_sync(read)
    path = share_links.link_path(env.name, token)
    return proof_page(
        request, None, found, csv_link=f"{path}/report.csv", plays_link=f"{path}/play-log.csv", shared=link
    )


@get(SHARED + "/{env_name:str}/{token:str}/report.csv", include_in_schema=False)
async def shared_report_csv(
    request: Request[Any, Any, Any], env_name: EnvName, token: Token
) -> Response[bytes]:
    env = console_of(request).env(env_name)
    now = int(time.time())
    link = await env.run_sync(lambda c: share_links.find_live(c, token, now))
    if link is None:
        raise NotFoundException(GONE)

    def read(conn: Any) -> Any:
        campaign = campaigns_repo.get_campaign(conn, link.campaign_id)
        return campaign, csv_report(conn, campaign, link.period_start, link.period_end, now)

    campaign, figures = await env.run_sync(read)
    return proof_csv(campaign, figures, link.period_start, link.period_end)


@get(SHARED + "/{env_name:str}/{token:str}/play-log.csv", include_in_schema=False)
async def shared_play_log_csv(request: Request[Any, Any, Any], env_name: EnvName, token: Token) -> Stream:
    env = console_of(request).env(env_name)
    now = int(time.time())
    link = await env.run_sync(lambda c: share_links.find_live(c, token, now))
    if link is None:
        raise NotFoundException(GONE)
    campaign = await env.run_sync(lambda c: campaigns_repo.get_campaign(c, link.campaign_id))
    return plays_csv(env, campaign, link.period_start, link.period_end)


ROUTES = [share_link_create, share_link_revoke, shared_report, shared_report_csv, shared_play_log_csv]
