"""A campaign's decisioning rules as stored: scalars in their columns, the nested rules in one JSON document.

Money and impressions are stored as integers (micros of the account currency, thousandths of an impression)
so that counters never accumulate float error; the wire speaks decimal amounts and whole impressions. This
module converts between the two, and checks what msgspec cannot: decimals, duplicates, assigned country
codes and the goals that need more than one field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from adslot.campaigns.schemas import (
    CampaignIn,
    CampaignPatch,
    Cap,
    CapMetric,
    CapPeriod,
    Daypart,
    Frequency,
    Pacing,
    TargetingRules,
    Tier,
)
from adslot.errors import ApiError
from adslot.places import check_timezone, country_code

MICROS = 1_000_000
"""Stored money unit: micros of the account currency."""
MILLI = 1_000
"""Stored impressions unit: thousandths of an impression (a venue's audience per play is fractional)."""
MAX_DECIMALS = 6
EXCLUSIONS = "exclusions"


class StoredCap(msgspec.Struct, frozen=True):
    period: CapPeriod
    metric: CapMetric
    limit: int
    """Plays, milli-impressions or spend micros."""


class StoredRules(msgspec.Struct, omit_defaults=True):
    """The `rules` column. Targeting's venue list is not here: it lives in campaign_venues."""

    targeting: TargetingRules | None = None
    exclusions: TargetingRules | None = None
    dayparts: list[Daypart] = []
    caps: list[StoredCap] = []
    frequency: Frequency | None = None


_RULES = msgspec.json.Decoder(StoredRules)


def micros(amount: float, field: str) -> int:
    """An amount with at most 6 decimals as integer micros; more decimals than that would be silently lost."""
    exact = Decimal(repr(amount))
    exponent = exact.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -MAX_DECIMALS:
        raise ApiError(400, "invalid_field", f"{field} has more than {MAX_DECIMALS} decimals", field)
    return int(exact * MICROS)


def amount(stored_micros: int) -> float:
    return stored_micros / MICROS


def _whole(value: float, field: str, metric: str) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise ApiError(400, "invalid_field", f"{metric} are counted in whole numbers", field)
    return int(value)


def stored_caps(caps: list[Cap], field: str = "caps") -> list[StoredCap]:
    """Caps in stored units; one cap per period and metric, or which one holds would be ambiguous."""
    out: list[StoredCap] = []
    seen: set[tuple[str, str]] = set()
    for i, cap in enumerate(caps):
        where = f"{field}[{i}]"
        if (cap.period, cap.metric) in seen:
            raise ApiError(400, "invalid_field", f"a second {cap.period} {cap.metric} cap", where)
        seen.add((cap.period, cap.metric))
        if cap.metric == "spend":
            limit = micros(cap.limit, f"{where}.limit")
        else:
            limit = _whole(cap.limit, f"{where}.limit", cap.metric)
            limit = limit * MILLI if cap.metric == "impressions" else limit
        out.append(StoredCap(cap.period, cap.metric, limit))
    return out


def wire_cap(cap: StoredCap) -> Cap:
    if cap.metric == "spend":
        return Cap(cap.period, cap.metric, amount(cap.limit))
    return Cap(cap.period, cap.metric, cap.limit // MILLI if cap.metric == "impressions" else cap.limit)


def clean_targeting(rules: TargetingRules | None, field: str) -> TargetingRules | None:
    """Country codes upper-cased once they are known to be assigned. Targeting's venue list is left out
    (see StoredRules); the exclusions keep theirs."""
    if rules is None:
        return None
    geo = rules.geo
    if geo is not None and geo.countries:
        countries = [country_code(c, f"{field}.geo.countries[{i}]") for i, c in enumerate(geo.countries)]
        geo = msgspec.structs.replace(geo, countries=countries)
    venue_ids: list[str] | UnsetType | None = UNSET
    if field == EXCLUSIONS:
        venue_ids = None if rules.venue_ids is UNSET else rules.venue_ids
    return msgspec.structs.replace(rules, geo=geo, venue_ids=venue_ids)


def check_dayparts(parts: list[Daypart], field: str = "dayparts") -> list[Daypart]:
    for i, part in enumerate(parts):
        if len(set(part.days)) != len(part.days):
            raise ApiError(400, "invalid_field", "a day is listed twice", f"{field}[{i}].days")
    return parts


def check_frequency(frequency: Frequency | None) -> Frequency | None:
    if frequency is not None and frequency.per_hour is None and frequency.per_day is None:
        raise ApiError(400, "invalid_field", "give per_hour, per_day or both (or null for none)", "frequency")
    return frequency


@dataclasses.dataclass(frozen=True, slots=True)
class CampaignRules:
    """Everything a campaign's decisions follow beyond its flight and venue list, in stored form."""

    tier: Tier = "standard"
    weight: int = 100
    timezone: str = "UTC"
    pacing: Pacing = "asap"
    cpm_micros: int | None = None
    share_of_voice: float | None = None
    separation_minutes: int = 0
    rules: StoredRules = dataclasses.field(default_factory=StoredRules)

    @classmethod
    def from_input(cls, data: CampaignIn) -> CampaignRules:
        """The rules of a new campaign; shape errors (400) name their path in the body."""
        return cls(
            tier=data.tier,
            weight=data.weight,
            timezone=data.timezone,
            pacing=data.pacing,
            cpm_micros=None if data.cpm is None else micros(data.cpm, "cpm"),
            share_of_voice=data.share_of_voice,
            separation_minutes=data.separation_minutes,
            rules=StoredRules(
                targeting=clean_targeting(data.targeting, "targeting"),
                exclusions=clean_targeting(data.exclusions, EXCLUSIONS),
                dayparts=check_dayparts(data.dayparts),
                caps=stored_caps(data.caps),
                frequency=check_frequency(data.frequency),
            ),
        )

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> CampaignRules:
        return cls(
            tier=row["tier"],
            weight=row["weight"],
            timezone=row["timezone"],
            pacing=row["pacing"],
            cpm_micros=row["cpm_micros"],
            share_of_voice=row["share_of_voice"],
            separation_minutes=row["separation_minutes"],
            rules=_RULES.decode(row["rules"]),
        )

    def patched(self, patch: CampaignPatch) -> CampaignRules:
        """These rules with the members the patch gives replaced, each checked like on create."""
        changes: dict[str, Any] = {
            name: value
            for name in ("tier", "weight", "timezone", "pacing", "share_of_voice", "separation_minutes")
            if (value := getattr(patch, name)) is not UNSET
        }
        if patch.cpm is not UNSET:
            changes["cpm_micros"] = None if patch.cpm is None else micros(patch.cpm, "cpm")
        rules: dict[str, Any] = {}
        if patch.targeting is not UNSET:
            rules["targeting"] = clean_targeting(patch.targeting, "targeting")
        if patch.exclusions is not UNSET:
            rules["exclusions"] = clean_targeting(patch.exclusions, EXCLUSIONS)
        if patch.dayparts is not UNSET:
            rules["dayparts"] = check_dayparts(patch.dayparts)
        if patch.caps is not UNSET:
            rules["caps"] = stored_caps(patch.caps)
        if patch.frequency is not UNSET:
            rules["frequency"] = check_frequency(patch.frequency)
        if rules:
            changes["rules"] = msgspec.structs.replace(self.rules, **rules)
        return dataclasses.replace(self, **changes)

    def check(self, advertiser_id: int, category: str | None) -> None:
        """The 422 checks: a timezone that exists, and goals that can be met."""
        check_timezone(self.timezone)
        caps = self.rules.caps
        if any(c.metric == "spend" for c in caps) and self.cpm_micros is None:
            raise ApiError(422, "invalid_goal", "a spend cap needs a cpm to count spend by", "cpm")
        if self.pacing == "even" and not caps:
            raise ApiError(
                422, "invalid_goal", "even pacing spreads a lifetime or daily cap: add one", "pacing"
            )
        if self.separation_minutes and category is None:
            raise ApiError(
                422,
                "missing_category",
                f"separation keeps apart campaigns of one advertiser category; advertiser {advertiser_id} "
                "has none",
                "separation_minutes",
            )

    def columns(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "weight": self.weight,
            "timezone": self.timezone,
            "pacing": self.pacing,
            "cpm_micros": self.cpm_micros,
            "share_of_voice": self.share_of_voice,
            "separation_minutes": self.separation_minutes,
            "rules": msgspec.json.encode(self.rules).decode(),
        }
