"""Sign-in, sign-out, the console's front door and its static files."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.params import PathParameter
from litestar.response import Redirect

from adslot.console import sessions, users
from adslot.console.roles import ADVERTISER
from adslot.console.scope import ADVERTISER_ENVIRONMENT, OPEN_TO_ADVERTISERS
from adslot.console.sign_in_sources import source_of
from adslot.console.web import (
    PRE_SESSION_COOKIE,
    ROOT,
    SIGN_IN,
    client_address,
    console_of,
    cookie,
    current_user,
    new_pre_session_token,
    render,
    session_cookie,
)

log = logging.getLogger("adslot.console")
STATIC = Path(__file__).parent.parent / "static"
STATIC_TYPES = {".css": "text/css", ".js": "application/javascript"}


def _safe_next(target: str | None) -> str:
    """Only a console path: never another site (an open redirect would make the sign-in page a phish)."""
    if target and target.startswith(ROOT + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return ROOT + "/"


@get(ROOT, include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def front_door(request: Request[Any, Any, Any]) -> Redirect:
    """The dashboard; an advertiser user's own campaigns (the dashboard sums everyone's)."""
    if request.state.user.role == ADVERTISER:
        return Redirect(f"{ROOT}/{ADVERTISER_ENVIRONMENT}/campaigns", status_code=303)
    return Redirect(ROOT + "/production/", status_code=303)


def _sign_in_page(
    request: Request[Any, Any, Any], *, email: str = "", problem: str | None = None, status: int = 200
) -> Response[str]:
    token = request.cookies.get(PRE_SESSION_COOKIE) or new_pre_session_token()
    return render(
        request,
        "sign_in.html",
        status=status,
        cookies=[cookie(request, PRE_SESSION_COOKIE, token, SIGN_IN)],
        pre_csrf=token,
        email=email,
        problem=problem,
        next=_safe_next(request.query_params.get("next")),
    )


@get(SIGN_IN, include_in_schema=False)
async def sign_in_form(request: Request[Any, Any, Any]) -> Response[Any]:
    if await current_user(request) is not None:
        return Redirect(_safe_next(request.query_params.get("next")), status_code=303)
    return _sign_in_page(request)


@post(SIGN_IN, include_in_schema=False)
async def sign_in(request: Request[Any, Any, Any]) -> Response[Any]:
    form = await request.form()
    email = str(form.get("email", ""))[:254]
    password = str(form.get("password", ""))
    now = int(time.time())
    production = console_of(request).production
    client = client_address(request)
    source = source_of(client)
    outcome = await production.run_sync(
        lambda c: users.sign_in(c, email, password, now, source), write=True, catalog=False
    )
    if outcome.user is None:
        log.warning(
            "console sign-in failed for %r from %s (%d in a row, %d from the address in the hour%s)",
            email,
            client or "?",
            outcome.failures,
            outcome.source_failures,
            f", locked for {outcome.locked_for} s" if outcome.locked_for else "",
        )
        if outcome.locked_for:
            return _sign_in_page(
                request,
                email=email,
                status=429,
                problem=f"Too many failed sign-ins: try again in {outcome.locked_for} seconds.",
            )
        return _sign_in_page(request, email=email, status=401, problem="Wrong email or password.")
    user = outcome.user
    token = await production.run_sync(
        lambda c: sessions.start_session(c, user.id, now), write=True, catalog=False
    )
    log.info("console sign-in: %s (%s) from %s", user.email, user.role, client or "?")
    response = Redirect(_safe_next(str(form.get("next", ""))), status_code=303)
    response.cookies.append(session_cookie(request, token, sessions.LIFETIME_SECONDS))
    return response


@post(ROOT + "/sign-out", include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def sign_out(request: Request[Any, Any, Any]) -> Redirect:
    token = request.cookies.get(sessions.COOKIE, "")
    await console_of(request).production.run_sync(
        lambda c: sessions.end_session(c, token), write=True, catalog=False
    )
    response = Redirect(SIGN_IN, status_code=303)
    response.cookies.append(session_cookie(request, "", 0))
    return response


@get(ROOT + "/static/{name:str}", include_in_schema=False, opt={OPEN_TO_ADVERTISERS: True})
async def static(name: Annotated[str, PathParameter()]) -> Response[bytes]:
    path = STATIC / name
    kind = STATIC_TYPES.get(path.suffix)
    if "/" in name or kind is None or not path.is_file():
        raise NotFoundException()
    return Response(path.read_bytes(), media_type=kind, headers={"cache-control": "public, max-age=3600"})


ROUTES = [front_door, sign_in_form, sign_in, sign_out, static]
