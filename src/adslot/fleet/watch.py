"""The fleet watch: one background task per node and environment that looks at the screens every
ADSLOT_SCREEN_CHECK_MS, raises and clears alerts, keeps the screen gauges, and sends what the outbox owes.

Every node runs one; what makes each alert go once is in the database, not in who runs (alert_store.py):
the unique episode key, the conditional clear, the conditional roll of a screen's play window, and the
claim of a delivery. A look reads screen_status (a row per screen), the open alerts and the venues: never
the ad requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
import anyio.to_thread
import sqlalchemy as sa

from adslot.fleet import alert_store, mail, webhooks
from adslot.fleet import repository as fleet_repo
from adslot.fleet.alerts import (
    AlertKey,
    OpenAlert,
    cleared,
    describe,
    new_alerts,
    playing_verdict,
    silence_alerts,
)
from adslot.fleet.status import counts, screen_states
from adslot.outbox_sender import OutboxSender
from adslot.settings import Settings
from adslot.storage.database import read_transaction, write_transaction
from adslot.storage.tables import screen_status
from adslot.telemetry.metrics import set_screens

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_SECONDS = 10.0
DEFAULT_NOT_PLAYING_SHARE = 0.5
MAX_SENDS_PER_PASS = 100


@dataclass(frozen=True, slots=True)
class Window:
    venue_id: str
    screen_id: str
    start: int
    fills: int
    plays: int


def receivers(conn: sa.Connection, settings: Settings) -> list[alert_store.Receiver]:
    out = [alert_store.Receiver("webhook", str(w.id)) for w in webhooks.active(conn)]
    if settings.smtp_host:
        emails = fleet_repo.read_meta(conn, fleet_repo.EMAILS_KEY) or ""
        out += [alert_store.Receiver("email", a.strip()) for a in emails.split(",") if a.strip()]
    return out


def not_playing_share(conn: sa.Connection) -> float:
    own = fleet_repo.read_meta(conn, fleet_repo.NOT_PLAYING_SHARE_KEY)
    return float(own) if own else DEFAULT_NOT_PLAYING_SHARE


def closed_windows(conn: sa.Connection, before: int) -> list[Window]:
    s = screen_status.c
    rows = conn.execute(
        sa.select(s.venue_id, s.screen_id, s.window_start, s.window_fills, s.window_plays).where(
            s.window_start <= before
        )
    )
    return [Window(*row) for row in rows]


def roll(conn: sa.Connection, window: Window, now: int) -> bool:
    """Start the screen's next window, keeping what arrived since `window` was read; False when another
    node rolled it first (that node judges it)."""
    s = screen_status.c
    done = conn.execute(
        sa.update(screen_status)
        .where(
            s.venue_id == window.venue_id,
            s.screen_id == window.screen_id,
            s.window_start == window.start,
        )
        .values(
            window_start=now,
            window_fills=s.window_fills - window.fills,
            window_plays=s.window_plays - window.plays,
        )
    )
    return done.rowcount == 1


class FleetWatch(OutboxSender):
    def __init__(self, engine: sa.Engine, settings: Settings, environment: str) -> None:
        super().__init__(f"fleet-{environment}", settings.screen_check_seconds)
        self._engine = engine
        self._settings = settings
        self._environment = environment
        self.raised = 0
        self.cleared = 0
        self.sent = 0

    async def run_pass(self) -> None:
        await self.in_thread(self.look, time.time())
        await super().run_pass()

    def new_session(self) -> aiohttp.ClientSession:
        return webhooks.sending_session(self._settings.alert_webhooks_allow_private, WEBHOOK_TIMEOUT_SECONDS)

    # -- looking ------------------------------------------------------------------------------------------

    def look(self, now: float) -> None:
        """One look at the fleet: gauges, silence alerts raised and cleared, play windows judged."""
        settings = self._settings
        with read_transaction(self._engine) as conn:
            silent = fleet_repo.silent_seconds(conn, settings.screen_silent_seconds)
            venues = fleet_repo.load_venues(conn)
            seen = fleet_repo.read_seen(conn)
            registered = fleet_repo.registered_screens(conn)
            opened = alert_store.open_alerts(conn)
            windows = closed_windows(conn, int(now) - settings.screen_not_playing_seconds)
        set_screens(self._environment, counts(screen_states(registered, seen, venues, now, silent)))
        raising = new_alerts(silence_alerts(seen, venues, now, silent), opened)
        clearing = cleared(opened, seen)
        if raising or clearing:
            names = {v.venue_id: v.name for v in venues.values()}
            self._change(raising, clearing, names, int(now))
        if windows:
            self._judge(windows, opened, int(now))

    def _change(
        self, raising: Sequence[AlertKey], clearing: Sequence[OpenAlert], names: dict[str, str], now: int
    ) -> None:
        with write_transaction(self._engine) as conn:
            targets = receivers(conn, self._settings)
            for key in raising:
                detail = describe(key, names.get(key.venue_id))
                if alert_store.raise_alert(conn, key, detail, now, targets, self._environment) is not None:
                    self.raised += 1
                    log.warning("alert raised in %s: %s", self._environment, detail)
            for alert in clearing:
                if alert_store.clear_alert(conn, alert, now, targets, self._environment):
                    self.cleared += 1
                    log.info("alert cleared in %s: %s", self._environment, describe(alert.key))

    def _judge(self, windows: Sequence[Window], opened: Sequence[OpenAlert], now: int) -> None:
        playing = {(a.key.venue_id, a.key.screen_id): a for a in opened if a.key.kind == "not_playing"}
        with write_transaction(self._engine) as conn:
            share = not_playing_share(conn)
            targets: list[alert_store.Receiver] | None = None
            for window in windows:
                if not roll(conn, window, now):
                    continue
                verdict = playing_verdict(window.fills, window.plays, share)
                open_alert = playing.get((window.venue_id, window.screen_id))
                if verdict is False and open_alert is None:
                    key = AlertKey("not_playing", window.venue_id, window.screen_id, window.start)
                    targets = targets if targets is not None else receivers(conn, self._settings)
                    detail = f"{describe(key)}: {window.plays} plays of {window.fills} ads"
                    if alert_store.raise_alert(conn, key, detail, now, targets, self._environment):
                        self.raised += 1
                        log.warning("alert raised in %s: %s", self._environment, detail)
                elif verdict is True and open_alert is not None:
                    targets = targets if targets is not None else receivers(conn, self._settings)
                    if alert_store.clear_alert(conn, open_alert, now, targets, self._environment):
                        self.cleared += 1

    # -- sending ------------------------------------------------------------------------------------------

    async def send_due(self) -> int:
        """Claim the head of each receiver's queue that is due, send them at once; how many got through."""
        now = int(time.time())
        claimed = await self.in_thread(self._claim, now)
        if not claimed:
            return 0
        outcomes = await asyncio.gather(*(self._send(d) for d in claimed))
        await self.in_thread(self._mark, claimed, outcomes, int(time.time()))
        delivered = sum(1 for ok, _, _, _ in outcomes if ok)
        self.sent += delivered
        return delivered

    def _claim(self, now: int) -> list[tuple[alert_store.Delivery, tuple[str, str] | None]]:
        with read_transaction(self._engine) as conn:
            heads = alert_store.pending_heads(conn, now)
        if not heads:
            return []
        out = []
        with write_transaction(self._engine) as conn:
            for delivery in heads[:MAX_SENDS_PER_PASS]:
                if alert_store.claim(conn, delivery, now):
                    hook = None
                    if delivery.channel == "webhook":
                        hook = webhooks.secret_and_url(conn, int(delivery.target))
                    out.append((delivery, hook))
        return out

    async def _send(
        self, claimed: tuple[alert_store.Delivery, tuple[str, str] | None]
    ) -> tuple[bool, int | None, str | None, bool]:
        """(delivered, HTTP status, error, given up)."""
        delivery, hook = claimed
        if delivery.channel == "email":
            subject = f"adslot alert: {delivery.event}"
            try:
                await anyio.to_thread.run_sync(
                    mail.send, self._settings, delivery.target, subject, delivery.body
                )
            except Exception as exc:
                return False, None, mail.failure(exc), False
            return True, None, None, False
        if hook is None:
            return False, None, "webhook removed", True
        secret, url = hook
        try:
            webhooks.checked_url(url, self._settings.alert_webhooks_allow_private)
        except Exception:
            return False, None, "webhook URL no longer allowed", True
        body = delivery.body.encode()
        headers = {
            "Content-Type": "application/json",
            webhooks.SIGNATURE_HEADER: webhooks.sign(secret, body),
            webhooks.DELIVERY_HEADER: str(delivery.id),
        }
        try:
            async with self.session.post(url, data=body, headers=headers, allow_redirects=False) as answer:
                await answer.read()
                ok = 200 <= answer.status < 300
                return ok, answer.status, None if ok else f"HTTP {answer.status}", False
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, webhooks.InternalAddress):
                return False, None, "webhook host resolves to an internal address", True
            return False, None, type(exc).__name__, False
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return False, None, type(exc).__name__, False

    def _mark(
        self,
        claimed: Sequence[tuple[alert_store.Delivery, tuple[str, str] | None]],
        outcomes: Sequence[tuple[bool, int | None, str | None, bool]],
        now: int,
    ) -> None:
        with write_transaction(self._engine) as conn:
            for (delivery, _), (ok, status, error, given_up) in zip(claimed, outcomes, strict=True):
                if given_up:
                    alert_store.give_up(conn, delivery, now, error or "given up")
                else:
                    alert_store.mark(conn, delivery, now, ok, status, error)
