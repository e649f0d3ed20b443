"""Keys, users and the audit log: what an admin manages, and what everyone may read."""

from __future__ import annotations

import time
from typing import Any

from litestar import Request, Response, get, post
from litestar.response import Redirect

from adslot import audit
from adslot.auth import repository as keys_repo
from adslot.auth.keys import LIVE_PREFIX, SCOPES, TEST_PREFIX
from adslot.campaigns import repository as campaigns_repo
from adslot.console import users
from adslot.console.forms import digits, text
from adslot.console.roles import ADMIN, ROLES
from adslot.console.web import ROOT, EnvName, RowId, change, console_of, form_fields, need, render
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.fields import MAX_ID


async def _form(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The form's fields, and the scopes ticked (one `scope` field each)."""
    form = await request.form()
    scopes = [s for s in form.getall("scope") if isinstance(s, str)] if "scope" in form else []
    ticked = [s for s in form.getall("advertiser") if isinstance(s, str)] if "advertiser" in form else []
    return {**await form_fields(request), "scopes": scopes, "advertisers": ticked}


def advertiser_ids(ticked: list[str]) -> list[int]:
    """The advertisers ticked for an advertiser user, as ids (an id that is no number is refused)."""
    if any(not digits(t) or len(t) > 12 for t in ticked):
        raise ApiError(400, "invalid_field", "an advertiser is named by its id", "advertiser")
    return [int(t) for t in ticked]


async def _keys_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    created: str | None = None,
    error: ApiError | None = None,
    form: dict[str, Any] | None = None,
) -> Response[str]:
    found = await env.run_sync(keys_repo.list_keys)
    return render(
        request,
        "keys.html",
        env=env,
        status=201 if created else 200,
        title="Keys",
        keys=list(reversed(found)),
        created=created,
        error=error,
        form=form or {"scopes": ["ad_request"]},
        scopes=SCOPES,
    )


@get(ROOT + "/{env_name:str}/keys", include_in_schema=False)
async def key_list(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    return await _keys_page(request, console_of(request).env(env_name))


@post(ROOT + "/{env_name:str}/keys", include_in_schema=False)
async def key_create(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    need(request, ADMIN)
    env = console_of(request).env(env_name)
    form = await _form(request)
    account = text(form, "account")
    label = text(form, "label")
    try:
        if account is None or len(account) > 128:
            raise ApiError(400, "invalid_field", "name the account (1 to 128 characters)", "account")
        if label is not None and len(label) > 128:
            raise ApiError(400, "invalid_field", "a label has at most 128 characters", "label")
        try:
            prefix = LIVE_PREFIX if env.name == "production" else TEST_PREFIX
            scopes = ",".join(form["scopes"])
            key, _ = await change(
                request,
                env,
                "key.create",
                f"key for account {account}",
                lambda c: keys_repo.create_key(c, account=account, prefix=prefix, scopes=scopes, label=label),
                after=lambda made: made[1],
            )
        except ValueError as exc:
            raise ApiError(400, "invalid_field", str(exc), "scope") from exc
    except ApiError as error:
        return await _keys_page(request, env, error=error, form=form)
    return await _keys_page(request, env, created=key)


@post(ROOT + "/{env_name:str}/keys/{key_id:int}/revoke", include_in_schema=False)
async def key_revoke(request: Request[Any, Any, Any], env_name: EnvName, key_id: RowId) -> Response[Any]:
    need(request, ADMIN)
    env = console_of(request).env(env_name)

    def before(conn: Any) -> Any:
        return next((k for k in keys_repo.list_keys(conn) if k.id == key_id), None)

    def revoke(conn: Any) -> Any:
        if not keys_repo.revoke_key(conn, key_id):
            raise ApiError(404, "unknown_key", f"no active key {key_id}", "key_id")
        return before(conn)

    await change(request, env, "key.revoke", f"key {key_id}", revoke, before=before)
    return Redirect(f"{ROOT}/{env.name}/keys", status_code=303)


async def _users_page(
    request: Request[Any, Any, Any],
    env: Environment,
    *,
    error: ApiError | None = None,
    form: dict[str, Any] | None = None,
    notice: str | None = None,
) -> Response[str]:
    production = console_of(request).production
    found = await production.run_sync(users.list_users)
    advertisers = {a.id: a.name for a in await production.run_sync(campaigns_repo.list_advertisers)}
    return render(
        request,
        "users.html",
        env=env,
        title="Users",
        users=found,
        roles=ROLES,
        advertisers=advertisers,
        error=error,
        form=form or {"role": "viewer"},
        notice=notice,
    )


@get(ROOT + "/{env_name:str}/users", include_in_schema=False)
async def user_list(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    return await _users_page(request, console_of(request).env(env_name))


@post(ROOT + "/{env_name:str}/users", include_in_schema=False)
async def user_create(request: Request[Any, Any, Any], env_name: EnvName) -> Response[Any]:
    need(request, ADMIN)
    console = console_of(request)
    env = console.env(env_name)
    form = await _form(request)
    email, role, password = (
        str(form.get("email", "")),
        str(form.get("role", "")),
        str(form.get("password", "")),
    )
    try:
        bound = advertiser_ids(form["advertisers"])
        await change(
            request,
            console.production,
            "user.create",
            f"user {email}",
            lambda c: users.create_user(c, email, role, password, bound),
            catalog=False,
        )
    except ApiError as error:
        return await _users_page(request, env, error=error, form=form)
    return Redirect(f"{ROOT}/{env.name}/users", status_code=303)


@post(ROOT + "/{env_name:str}/users/{user_id:int}/disable", include_in_schema=False)
async def user_disable(request: Request[Any, Any, Any], env_name: EnvName, user_id: RowId) -> Response[Any]:
    me = need(request, ADMIN)
    console = console_of(request)
    env = console.env(env_name)
    if user_id == me.id:
        return await _users_page(
            request, env, error=ApiError(409, "own_account", "you cannot disable your own account", "user")
        )

    def disable(conn: Any) -> users.User:
        found = users.get_user(conn, user_id)
        if found is None:
            raise ApiError(404, "unknown_user", f"no user {user_id}", "user")
        return users.disable_user(conn, found.email)

    await change(
        request,
        console.production,
        "user.disable",
        f"user {user_id}",
        disable,
        before=lambda c: users.get_user(c, user_id),
        catalog=False,
    )
    return Redirect(f"{ROOT}/{env.name}/users", status_code=303)


@post(ROOT + "/{env_name:str}/users/{user_id:int}/password", include_in_schema=False)
async def user_password(request: Request[Any, Any, Any], env_name: EnvName, user_id: RowId) -> Response[Any]:
    need(request, ADMIN)
    console = console_of(request)
    env = console.env(env_name)
    password = str((await _form(request)).get("password", ""))

    def set_password(conn: Any) -> users.User:
        found = users.get_user(conn, user_id)
        if found is None:
            raise ApiError(404, "unknown_user", f"no user {user_id}", "user")
        return users.set_password(conn, found.email, password)

    try:
        changed = await change(
            request, console.production, "user.set-password", f"user {user_id}", set_password, catalog=False
        )
    except ApiError as error:
        return await _users_page(request, env, error=error)
    return await _users_page(request, env, notice=f"Password of {changed.email} set; their sessions ended.")


@get(ROOT + "/{env_name:str}/audit", include_in_schema=False)
async def audit_log(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    raw = request.query_params.get("before") or ""
    before_id = int(raw) if digits(raw) and len(raw) < 12 and int(raw) <= MAX_ID else None
    found = await env.run_sync(lambda c: audit.entries(c, before_id))
    return render(
        request,
        "audit.html",
        env=env,
        title="Audit log",
        entries=found,
        more=len(found) == audit.PAGE_SIZE,
        now=int(time.time()),
    )


ROUTES = [key_list, key_create, key_revoke, user_list, user_create, user_disable, user_password, audit_log]
