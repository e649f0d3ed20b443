"""The console's web layer: sign-in, sessions, CSRF, roles and rendering, shared by every page.

Every page but the sign-in page needs a live session (else it redirects there); every POST carries a CSRF
token bound to the session (HMAC of its secret token), checked before any handler runs; every change is
checked against the user's role and written to the environment's audit log in its own transaction.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import sqlalchemy as sa
from jinja2 import Environment as Jinja
from jinja2 import FileSystemLoader, select_autoescape
from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.exceptions import HTTPException, NotFoundException
from litestar.params import PathParameter
from litestar.response import Redirect
from litestar.types import Message, Scope

from adslot import audit
from adslot.console import sessions
from adslot.console.charts import line_chart
from adslot.console.forms import error_for, utc_input
from adslot.console.report_table import figure
from adslot.console.roles import ADVERTISER, Role, allows
from adslot.console.scope import ADVERTISER_ENVIRONMENT, ReadScope, route_open, scope_of
from adslot.console.users import User
from adslot.edge.clients import TrustedProxies, peer_of
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.fields import MAX_ID
from adslot.storage.failures import unavailable

T = TypeVar("T")
log = logging.getLogger("adslot.console")
ROOT = "/console"
SIGN_IN = ROOT + "/sign-in"
SHARED = ROOT + "/shared"
"""Share links' reports (pages/share.py): opened without signing in, by the link's token alone."""
CSRF_FIELD = "csrf_token"
PRE_SESSION_COOKIE = "adslot_console_csrf"
"""Before sign-in there is no session to bind a token to: the sign-in form's token is also a cookie."""
TEMPLATES = Jinja(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
NAV = (
    ("Dashboard", ""),
    ("Venues", "venues"),
    ("Campaigns", "campaigns"),
    ("Reports", "reports"),
    ("Play log", "play-log"),
    ("Demand", "demand"),
    ("Keys", "keys"),
    ("Health", "health"),
    ("Screens", "screens"),
    ("Alerts", "alerts"),
    ("Forecast", "forecast"),
    ("Users", "users"),
    ("Audit", "audit"),
)
ADVERTISER_NAV = (("Campaigns", "campaigns"),)
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; media-src 'self' http: https:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def _date(epoch: int | None) -> str:
    if epoch is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


TEMPLATES.filters["when"] = _date
TEMPLATES.filters["figure"] = figure
TEMPLATES.filters["utc_input"] = utc_input
TEMPLATES.globals["error_for"] = error_for
TEMPLATES.globals["line_chart"] = line_chart


EnvName = Annotated[str, PathParameter(description="production or sandbox")]
RowId = Annotated[int, PathParameter(ge=1, le=MAX_ID)]


@dataclass
class Console:
    """Both environments, and the production one, whose database holds users and sessions."""

    environments: Mapping[str, Environment]
    mount: str = ROOT
    secure_cookies: bool = False
    """Secure on the cookies: behind HTTPS (the public URL is https), or when the request came over it."""
    proxies: TrustedProxies = field(default_factory=lambda: TrustedProxies(()))
    """ADSLOT_TRUSTED_PROXIES: whose X-Forwarded-For names the client (client_address)."""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def production(self) -> Environment:
        return self.environments["production"]

    def env(self, name: str) -> Environment:
        env = self.environments.get(name)
        if env is None:
            raise NotFoundException(f"no environment {name!r}")
        return env


def console_of(request: Request[Any, Any, Any]) -> Console:
    console: Console = request.app.state.console
    return console


def client_address(request: Request[Any, Any, Any]) -> str | None:
    """The client's address: the connection's peer or, from a trusted proxy, the one its X-Forwarded-For
    names (edge/clients.py), as the invalid-traffic rules take it."""
    forwarded = ", ".join(request.headers.getall("x-forwarded-for", [])) or None
    return console_of(request).proxies.client(peer_of(request.scope), forwarded)


def csrf_for(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"adslot console csrf", hashlib.sha256).hexdigest()


def cookie(
    request: Request[Any, Any, Any], key: str, value: str, path: str, max_age: int | None = None
) -> Cookie:
    """The console's cookies: HttpOnly, SameSite=Lax, and Secure behind HTTPS."""
    return Cookie(
        key=key,
        value=value,
        path=path,
        httponly=True,
        samesite="lax",
        secure=console_of(request).secure_cookies or request.url.scheme == "https",
        max_age=max_age,
    )


def session_cookie(request: Request[Any, Any, Any], token: str, max_age: int | None) -> Cookie:
    return cookie(request, sessions.COOKIE, token, ROOT, max_age)


async def form_fields(request: Request[Any, Any, Any]) -> dict[str, str]:
    """A posted form's text fields (an upload or a repeated name is read apart, where a page takes one)."""
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


async def current_user(request: Request[Any, Any, Any]) -> User | None:
    token = request.cookies.get(sessions.COOKIE)
    if not token or len(token) > 128:
        return None
    now = int(time.time())
    return await console_of(request).production.run_sync(lambda c: sessions.session_user(c, token, now))


async def before_request(request: Request[Any, Any, Any]) -> Response[Any] | None:
    """Load the session's user, or send the browser to sign in; refuse a POST without its CSRF token."""
    path = request.url.path
    if path.startswith((ROOT + "/static/", SHARED + "/")):
        return None
    if path == SIGN_IN:
        if request.method == "POST":
            form = await request.form()
            expected = request.cookies.get(PRE_SESSION_COOKIE, "")
            if not expected or not hmac.compare_digest(str(form.get(CSRF_FIELD, "")), expected):
                return csrf_refused(request)
        return None
    user = await current_user(request)
    if user is None:
        target = path + (f"?{request.url.query}" if request.url.query else "")
        if request.method != "GET":
            target = ROOT
        return Redirect(f"{SIGN_IN}?next={quote(target, safe='')}", status_code=303)
    request.state.user = user
    if not route_open(user, request.route_handler.opt, request.path_params.get("env_name")):
        raise NotFoundException()  # as a page that does not exist: an advertiser learns nothing of it
    request.state.csrf = csrf_for(request.cookies[sessions.COOKIE])
    if request.method == "POST":
        form = await request.form()
        if not hmac.compare_digest(str(form.get(CSRF_FIELD, "")), request.state.csrf):
            return csrf_refused(request)
    return None


def logged_path(path: str) -> str:
    """The path as a log line may hold it: a share link's token (its secret) cut off."""
    if path.startswith(SHARED + "/"):
        return "/".join(path.split("/")[:4]) + "/(token)"
    return path


def csrf_refused(request: Request[Any, Any, Any]) -> Response[str]:
    log.warning("console: POST %s refused: missing or wrong CSRF token", logged_path(request.url.path))
    return message_page(
        request,
        403,
        "Form expired",
        "This form was refused: its security token is missing or stale. Go back, reload the page and "
        "send it again.",
    )


_SECURITY_LINES = tuple(
    (name.encode("ascii"), value.encode("ascii")) for name, value in SECURITY_HEADERS.items()
)


async def security_headers(message: Message, scope: Scope) -> None:
    """Every answer's security headers and no-store, a header the answer set itself kept (a static file's
    cache-control): as a before_send hook it reaches what no handler made too, the error pages of a
    route that does not exist, a method it does not take, a body too large, or a failure."""
    if message["type"] == "http.response.start":
        headers = list(message.get("headers", ()))
        present = {name.lower() for name, _ in headers}
        message["headers"] = headers + [line for line in _SECURITY_LINES if line[0] not in present]


def user_of(request: Request[Any, Any, Any]) -> User:
    user: User = request.state.user
    return user


def read_scope(request: Request[Any, Any, Any]) -> ReadScope:
    """What the signed-in user may read (scope.py): every page that reads campaigns filters through it."""
    return scope_of(user_of(request))


def need(request: Request[Any, Any, Any], role: Role) -> User:
    """The signed-in user, if their role allows `role`'s actions; else a 403 page."""
    user = user_of(request)
    if not allows(user.role, role):
        raise HTTPException(
            status_code=403, detail=f"Your role ({user.role}) cannot do this: it needs {role} or above."
        )
    return user


def env_link(env: Environment, page: str = "") -> str:
    return f"{ROOT}/{env.name}/{page}".rstrip("/") + ("/" if not page else "")


def render(
    request: Request[Any, Any, Any],
    template: str,
    *,
    env: Environment | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
    cookies: list[Cookie] | None = None,
    **context: Any,
) -> Response[str]:
    """A page. A form shown again with its errors is a page served as asked (200, as Django answers it):
    the errors are in it, next to their fields; a 4xx would only add a "failed to load" error to the
    browser's console."""
    user: User | None = getattr(request.state, "user", None)
    console = console_of(request)
    page = request.url.path.removeprefix(ROOT + "/" + env.name if env else ROOT).strip("/")
    context.setdefault("error", None)  # the forms' shared fields look for it
    advertiser = user is not None and user.role == ADVERTISER
    html = TEMPLATES.get_template(template).render(
        user=user,
        env=env,
        environments=[ADVERTISER_ENVIRONMENT] if advertiser else list(console.environments),
        nav=ADVERTISER_NAV if advertiser else NAV,
        section=page.split("/")[0] if page else "",
        page_path=page,
        csrf=getattr(request.state, "csrf", ""),
        csrf_field=CSRF_FIELD,
        root=ROOT,
        allows=(lambda role: user is not None and allows(user.role, role)),
        **context,
    )
    return Response(
        html, status_code=status, media_type="text/html", headers=headers or {}, cookies=cookies or []
    )


def message_page(request: Request[Any, Any, Any], status: int, title: str, text: str) -> Response[str]:
    return render(request, "message.html", status=status, title=title, text=text)


def http_error_page(request: Request[Any, Any, Any], exc: HTTPException) -> Response[str]:
    titles = {403: "Not allowed", 404: "Not found", 405: "Not allowed"}
    return message_page(request, exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail))


def api_error_page(request: Request[Any, Any, Any], exc: ApiError) -> Response[str]:
    return message_page(request, exc.status, "Cannot do that", f"{exc.message} ({exc.code})")


def internal_error_page(request: Request[Any, Any, Any], exc: Exception) -> Response[str]:
    if unavailable(exc):
        log.warning("console: storage unavailable for %s: %s", logged_path(request.url.path), exc)
        return message_page(
            request, 503, "Storage unavailable", "The database cannot take this right now; retry shortly."
        )
    log.exception("console: %s %s failed", request.method, logged_path(request.url.path))
    return message_page(request, 500, "Something went wrong", "The error has been logged.")


def actor(request: Request[Any, Any, Any]) -> str:
    return user_of(request).email


async def change(
    request: Request[Any, Any, Any],
    env: Environment,
    action: str,
    target: str,
    fn: Callable[[sa.Connection], T],
    *,
    before: Callable[[sa.Connection], Any] | None = None,
    after: Callable[[T], Any] | None = None,
    catalog: bool = True,
) -> T:
    """Make a change and its audit entry in one transaction: both are kept, or neither."""
    change_fn = audit.audited(actor(request), action, target, fn, before=before, after=after)
    return await env.run_sync(change_fn, write=True, catalog=catalog)


def new_pre_session_token() -> str:
    return secrets.token_urlsafe(24)
