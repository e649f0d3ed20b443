"""The alerts API (admin permission): webhooks, the environment's alert settings, and the alert history."""

from __future__ import annotations

import time
from typing import Annotated, Any

import msgspec
import sqlalchemy as sa
from litestar import Controller, Request, delete, get, post
from litestar.params import Body, PathParameter

from adslot.api.adapters import env_of
from adslot.api.management import ERRORS, READ_ERRORS, WRITE_ERRORS, admin_guard, change
from adslot.api.strict_body import strict_body
from adslot.errors import ApiError
from adslot.fields import MAX_ID
from adslot.fleet import alert_store, webhooks
from adslot.fleet import repository as fleet_repo
from adslot.fleet.watch import DEFAULT_NOT_PLAYING_SHARE

WebhookId = Annotated[int, PathParameter(description="The webhook's id", ge=1, le=MAX_ID)]
MAX_EMAILS = 16
MAX_SILENT_MINUTES = 7 * 24 * 60


class WebhookIn(msgspec.Struct, forbid_unknown_fields=True):
    url: str
    """Where each alert and recovery is POSTed as JSON, signed in X-Adslot-Signature."""


class AlertSettings(msgspec.Struct):
    silent_seconds: int
    """A screen silent this long while its venue is open raises an alert."""
    silent_seconds_default: int
    """ADSLOT_SCREEN_SILENT_SECONDS, used when the environment sets none."""
    not_playing_share: float
    """A screen whose plays stay under this share of its fills over a window raises not_playing."""
    emails: list[str]
    """Who gets alert emails (when ADSLOT_SMTP_HOST is set)."""
    email_enabled: bool


class AlertSettingsIn(msgspec.Struct, forbid_unknown_fields=True):
    silent_minutes: int | None = None
    """Minutes; null: back to ADSLOT_SCREEN_SILENT_SECONDS."""
    not_playing_share: float | None = None
    emails: list[str] | None = None


class AlertHistory(msgspec.Struct):
    alerts: list[alert_store.AlertRow]
    attempts: list[alert_store.AttemptRow]


def read_settings(conn: sa.Connection, default_silent: int, email_enabled: bool) -> AlertSettings:
    share = fleet_repo.read_meta(conn, fleet_repo.NOT_PLAYING_SHARE_KEY)
    emails = fleet_repo.read_meta(conn, fleet_repo.EMAILS_KEY) or ""
    return AlertSettings(
        silent_seconds=fleet_repo.silent_seconds(conn, default_silent),
        silent_seconds_default=default_silent,
        not_playing_share=float(share) if share else DEFAULT_NOT_PLAYING_SHARE,
        emails=[e for e in emails.split(",") if e],
        email_enabled=email_enabled,
    )


def checked_settings(data: AlertSettingsIn) -> dict[str, str | None]:
    """The environment_meta values to write; 400 naming the first bad field."""
    out: dict[str, str | None] = {}
    if data.silent_minutes is not None and not 1 <= data.silent_minutes <= MAX_SILENT_MINUTES:
        raise ApiError(400, "invalid_field", f"between 1 and {MAX_SILENT_MINUTES} minutes", "silent_minutes")
    out[fleet_repo.SILENT_KEY] = None if data.silent_minutes is None else str(data.silent_minutes * 60)
    if data.not_playing_share is not None:
        if not 0 < data.not_playing_share <= 1:
            raise ApiError(400, "invalid_field", "a share above 0, at most 1", "not_playing_share")
        out[fleet_repo.NOT_PLAYING_SHARE_KEY] = repr(data.not_playing_share)
    if data.emails is not None:
        if len(data.emails) > MAX_EMAILS:
            raise ApiError(400, "invalid_field", f"at most {MAX_EMAILS} addresses", "emails")
        for i, address in enumerate(data.emails):
            local, at, domain = address.partition("@")
            if (
                not at
                or not local
                or "." not in domain
                or len(address) > 254
                or any(c.isspace() or c in ',<>"' or ord(c) < 0x20 for c in address)
            ):
                raise ApiError(400, "invalid_field", f"{address!r} is not an email address", f"emails[{i}]")
        out[fleet_repo.EMAILS_KEY] = ",".join(data.emails)
    return out


def write_settings(
    conn: sa.Connection, data: AlertSettingsIn, default_silent: int, email_enabled: bool
) -> AlertSettings:
    for name, value in checked_settings(data).items():
        fleet_repo.write_meta(conn, name, value)
    return read_settings(conn, default_silent, email_enabled)


class AlertController(Controller):
    path = "/api/v1/alerts"
    tags = ("fleet",)
    guards = (admin_guard, strict_body)
    security = ({"SspKey": []},)

    @get(
        operation_id="listAlerts",
        summary="Alerts, newest first, and every delivery attempt",
        responses=ERRORS,
    )
    async def history(self, request: Request[Any, Any, Any]) -> AlertHistory:
        def read(conn: sa.Connection) -> AlertHistory:
            return AlertHistory(alert_store.history(conn), alert_store.attempts_of(conn))

        return await env_of(request).run_sync(read)

    @get(
        "/settings",
        operation_id="getAlertSettings",
        summary="The environment's alert settings",
        responses=ERRORS,
    )
    async def get_settings(self, request: Request[Any, Any, Any]) -> AlertSettings:
        env = env_of(request)
        default, email = env.settings.screen_silent_seconds, bool(env.settings.smtp_host)
        return await env.run_sync(lambda c: read_settings(c, default, email))

    @post(
        "/settings",
        operation_id="setAlertSettings",
        summary="Set the environment's alert settings (members left out or null: silent_minutes back to "
        "the default; the others unchanged)",
        responses=WRITE_ERRORS,
        status_code=200,
    )
    async def set_settings(
        self, request: Request[Any, Any, Any], data: Annotated[AlertSettingsIn, Body()]
    ) -> AlertSettings:
        env = env_of(request)
        default, email = env.settings.screen_silent_seconds, bool(env.settings.smtp_host)
        return await change(
            request, "alerts.settings", "alert settings", lambda c: write_settings(c, data, default, email)
        )

    @get("/webhooks", operation_id="listAlertWebhooks", summary="Alert webhooks", responses=ERRORS)
    async def list_webhooks(self, request: Request[Any, Any, Any]) -> list[webhooks.Webhook]:
        return await env_of(request).run_sync(webhooks.active)

    @post(
        "/webhooks",
        operation_id="addAlertWebhook",
        summary="Add an alert webhook: its signing secret is in this answer only",
        responses=WRITE_ERRORS,
    )
    async def add_webhook(
        self, request: Request[Any, Any, Any], data: Annotated[WebhookIn, Body()]
    ) -> webhooks.Webhook:
        env = env_of(request)
        url = webhooks.checked_url(data.url, env.settings.alert_webhooks_allow_private)
        made = await change(
            request,
            "alerts.webhook.add",
            "alert webhook",
            lambda c: webhooks.create(c, url, int(time.time())),
        )
        return made

    @delete(
        "/webhooks/{webhook_id:int}",
        operation_id="removeAlertWebhook",
        summary="Remove an alert webhook",
        responses=READ_ERRORS,
    )
    async def remove_webhook(self, request: Request[Any, Any, Any], webhook_id: WebhookId) -> None:
        await change(
            request,
            "alerts.webhook.remove",
            f"alert webhook {webhook_id}",
            lambda c: webhooks.remove(c, webhook_id, int(time.time())),
        )


ALERT_CONTROLLERS = [AlertController]
