"""The dashboard: today and the last seven days at a glance, hour by hour, and who is behind plan."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from litestar import Request, Response, get

from adslot.campaigns import repository as campaigns_repo
from adslot.console.charts import Series, line_chart
from adslot.console.figures import DAY, HOUR, campaign_delivery, delivery, hour_floor
from adslot.console.web import ROOT, EnvName, console_of, render
from adslot.fleet import repository as fleet_repo


def dark_screens(conn: Any, default_silent: int, now: float) -> int:
    """Screens silent now while their venue is open (the Screens page lists them first)."""
    silent = fleet_repo.silent_seconds(conn, default_silent)
    return len(fleet_repo.fleet(conn, now, silent, status="silent", figures=False))


@get(ROOT + "/{env_name:str}", include_in_schema=False)
async def dashboard(request: Request[Any, Any, Any], env_name: EnvName) -> Response[str]:
    env = console_of(request).env(env_name)
    now = int(time.time())
    today = now - now % DAY
    week = today - 6 * DAY
    last_hour = hour_floor(now) + HOUR

    def read(conn: Any) -> Any:
        return (
            delivery(conn, today, today + DAY, now).totals,
            delivery(conn, week, today + DAY, now).totals,
            delivery(conn, week, last_hour, now, group_by=("hour",)).rows,
        )

    today_totals, week_totals, hourly = await env.run_sync(read)
    dark = await env.run_sync(lambda c: dark_screens(c, env.settings.screen_silent_seconds, now))
    hours = list(range(week, last_hour, HOUR))
    by_hour = {int(dt.datetime.fromisoformat(str(r.hour)).timestamp()): r for r in hourly}
    series = [
        Series("requests", [float(by_hour[h].requests or 0) if h in by_hour else 0.0 for h in hours]),
        Series("fills", [float(by_hour[h].fills) if h in by_hour else 0.0 for h in hours]),
        Series("plays", [float(by_hour[h].plays) if h in by_hour else 0.0 for h in hours]),
    ]
    labels = [time.strftime("%a %Hh", time.gmtime(h)) for h in hours]
    live = await env.run_sync(lambda c: campaigns_repo.list_campaigns(c, status="active"))
    running = [c for c in live if c.start_at <= now < c.end_at]
    delivered = await campaign_delivery(env, running, now)
    behind = [(c, [g for g in delivered[c.id].goals if g.behind]) for c in running]
    return render(
        request,
        "dashboard.html",
        env=env,
        title="Dashboard",
        today=today_totals,
        week=week_totals,
        chart=line_chart(labels, series, title="Ad requests, fills and plays by hour, last 7 days (UTC)"),
        behind=[(c, gs) for c, gs in behind if gs],
        running=len(running),
        dark=dark,
    )


ROUTES = [dashboard]
