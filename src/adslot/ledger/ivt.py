"""Invalid-traffic rules: which first fires are flagged, and why. Pure, O(1) per fire.

The ledger writer asks `Judge.judge` about each fire that would count (or echo): a flagged fire is stored in
invalid_fires with its reason and sets its event's fired bits (so its repeats are duplicates), but never its
event's time, so it is never a play, never delivered against a cap and never billed. The rules, each of which
can be switched off (ADSLOT_IVT_RULES):

- `out_of_order`: an event played before one that comes earlier in a play (a midpoint before the first
  quartile, a complete before the start), by more than the tolerance;
- `too_fast`: two events closer together than the creative's duration allows: k quartiles apart need at
  least k/4 of the duration, times ADSLOT_IVT_TOO_FAST_PERCENT, less the tolerance (a 30-second creative's
  complete 22.5 s - 2 s after its start, at the defaults);
- `foreign_network`: a fire from another network than its ad request's (network_key());
- `burst`: more than ADSLOT_IVT_BURST_IMPRESSIONS first impressions (so distinct ad requests) from one
  network within ADSLOT_IVT_BURST_SECONDS (a sliding window of two buckets, kept by this process only).

Times are the fires' played_at (a live pixel's is its arrival), in whole seconds.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Literal, NamedTuple

from adslot.settings import Settings

IvtReason = Literal["too_fast", "out_of_order", "foreign_network", "burst"]
RULES: tuple[IvtReason, ...] = ("too_fast", "out_of_order", "foreign_network", "burst")

HINTS: dict[str, str] = {
    "too_fast": "events arrived faster than the creative plays: fire each quartile when playback reaches it, "
    "a quarter of the creative's duration after the one before",
    "out_of_order": "an event arrived before one that comes earlier in a play: fire start, firstQuartile, "
    "midpoint, thirdQuartile and complete in that order",
    "foreign_network": "the fire came from another network than its ad request: fire the pixels from the "
    "player that asked for the ad",
    "burst": "more first impressions came from this network within the burst window than the rule allows: "
    "one ad request per slot and screen, played before the next",
}
"""What the sandbox tells an integrator whose fire a rule flagged (production answers it as counted)."""

RANKS = (0, 0, 1, 2, 3, 4)
"""How far into a play each event of records.EVENT_COLUMNS comes, in quarters of the creative (impression
and start both at its start)."""
IMPRESSION = 0
"""The impression's index in the event times."""
NO_EVENTS: tuple[int | None, ...] = (None,) * len(RANKS)
"""The event times of an ad request with none counted: one tuple every such ad request shares (the ledger's
resolve.NO_TIMES), so the timing rules skip it by identity."""
BURST_KEYS = 1 << 16
"""(network, window) counts kept at most before the old windows are dropped."""
_IPV6 = 1 << 62


class IvtConfig(NamedTuple):
    """The rules switched on and their thresholds (settings.py), as the writer process receives them."""

    rules: tuple[str, ...] = RULES
    too_fast_percent: int = 75
    tolerance_seconds: int = 2
    burst_impressions: int = 600
    burst_seconds: int = 60


DEFAULT = IvtConfig()


def network_key(address: str | None, ipv4_prefix: int = 16, ipv6_prefix: int = 48) -> int:
    """The network of an address as one BIGINT-sized integer (0: unknown): the prefix length and the
    address's first bits, so that two keys are equal exactly when both addresses lie in one network of that
    size; IPv4-mapped IPv6 addresses count as IPv4. `ipv6_prefix` is at most 56. A loopback address is
    unknown: it is a reverse proxy on the same host (whose X-Forwarded-For adslot is not told to trust) or a
    test harness, and every player behind it would share its network."""
    if not address:
        return 0
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return 0
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return 0
    if isinstance(ip, ipaddress.IPv4Address):
        return ipv4_prefix << 32 | int(ip) >> (32 - ipv4_prefix)
    return _IPV6 | ipv6_prefix << 56 | int(ip) >> (128 - ipv6_prefix)


def comparable(a: int, b: int) -> bool:
    """Whether two network keys were made with the same family and prefix length (the settings may change
    between an ad request and its fires)."""
    if (a >= _IPV6) != (b >= _IPV6):
        return True  # one IPv4 and one IPv6 network: different networks
    shift = 56 if a >= _IPV6 else 32
    return a >> shift == b >> shift


class Judge:
    """The rules of one IvtConfig, and the burst counts of this process."""

    def __init__(self, config: IvtConfig = DEFAULT) -> None:
        rules = set(config.rules)
        self.config = config
        self._order = "out_of_order" in rules
        self._fast = "too_fast" in rules
        self._foreign = "foreign_network" in rules
        self._burst = "burst" in rules
        self._timing = self._order or self._fast
        self._tolerance = config.tolerance_seconds
        self._window = config.burst_seconds
        self._limit = config.burst_impressions * config.burst_seconds
        self._counts: dict[int, int] = {}
        """First impressions per (network << 40 | window number)."""
        self._newest = 0

    def judge(
        self,
        index: int,
        at: int,
        known: Sequence[int | None],
        duration: int | None,
        network: int,
        source: int,
    ) -> IvtReason | None:
        """Why the first fire of the event at `index` (records.EVENT_COLUMNS order), played at `at`, is
        invalid, or None. `known`: the ad request's counted event times (None: not counted); `duration`: its
        creative's, in seconds; `network`: its ad request's network key, `source` the fire's (0: unknown)."""
        if self._timing and known is not NO_EVENTS:
            reason = self._timing_reason(index, at, known, duration)
            if reason is not None:
                if index == IMPRESSION and self._burst and source:
                    self._count(source, at)
                return reason
        if self._foreign and network and source and network != source and comparable(network, source):
            return "foreign_network"
        if index == IMPRESSION and self._burst and source and self._count(source, at):
            return "burst"
        return None

    def _timing_reason(
        self, index: int, at: int, known: Sequence[int | None], duration: int | None
    ) -> IvtReason | None:
        rank = RANKS[index]
        tolerance = self._tolerance
        for other_index, other_at in enumerate(known):
            if other_at is None:
                continue
            other = RANKS[other_index]
            if other == rank:
                continue
            # The later event's time less the earlier one's: never negative in a real play.
            gap = at - other_at if rank > other else other_at - at
            if self._order and gap < -tolerance:
                return "out_of_order"
            if self._fast and duration:
                quarters = rank - other if rank > other else other - rank
                if gap * 400 < quarters * duration * self.config.too_fast_percent - tolerance * 400:
                    return "too_fast"
        return None

    def _count(self, source: int, at: int) -> bool:
        """Count a first impression from `source` at `at`; whether its window now holds more than the limit:
        this bucket's count plus the previous bucket's, weighted by how much of it the window still covers."""
        window = self._window
        bucket = at // window
        counts = self._counts
        key = source << 40 | bucket  # an int key: hashed faster than a (source, bucket) tuple
        current = counts.get(key, 0) + 1
        counts[key] = current
        if bucket > self._newest:
            self._newest = bucket
            if len(counts) > BURST_KEYS:
                self._drop_old()
        previous = counts.get(key - 1, 0)
        return current * window + previous * (window - at % window) > self._limit

    def _drop_old(self) -> None:
        """Keep the two newest windows' counts only (the rest no longer weigh in any live pixel's window)."""
        oldest = self._newest - 1
        low = (1 << 40) - 1
        kept = {key: n for key, n in self._counts.items() if key & low >= oldest}
        self._counts = kept if len(kept) <= BURST_KEYS else {}


def ivt_config(settings: Settings) -> IvtConfig:
    """The rules and thresholds ADSLOT_IVT_* set."""
    return IvtConfig(
        settings.ivt_rules,
        settings.ivt_too_fast_percent,
        settings.ivt_tolerance_seconds,
        settings.ivt_burst_impressions,
        settings.ivt_burst_seconds,
    )
